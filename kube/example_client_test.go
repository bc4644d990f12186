package kube_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
)

// exampleCA is a CA certificate, as a cluster's ca.crt holds one.
const exampleCA = `-----BEGIN CERTIFICATE-----
MIIBWzCCAQGgAwIBAgIBATAKBggqhkjOPQQDAjAVMRMwEQYDVQQDEwpleGFtcGxl
LWNhMB4XDTI2MDEwMTAwMDAwMFoXDTM2MDEwMTAwMDAwMFowFTETMBEGA1UEAxMK
ZXhhbXBsZS1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABGA7wOqC4pLgvd8m
Z+fO3Tam4ZO2PKG6wlmoT/oxt9nVpzYZ8SCKo+qUng15RxMJnVFUDe+S5CRgJ1g4
QUGoTQyjQjBAMA4GA1UdDwEB/wQEAwICBDAPBgNVHRMBAf8EBTADAQH/MB0GA1Ud
DgQWBBT67BIGIhtAJ7wglprpu1y1oo0n+jAKBggqhkjOPQQDAgNIADBFAiEA3gEl
fEiFS9AaSPE46WAAGjAPnwSOq+OQsYiCM8nm22UCIAgwaxUrlaPCvlWJBkNUY856
9ZOHi3dbCA5Ry6UTJl4H
-----END CERTIFICATE-----
`

// cloudToken stands for a cloud SDK's call that returns a short-lived
// token for a cluster, which its kubeconfig's exec plugin would otherwise
// run a program for.
func cloudToken(ctx context.Context, cluster string) (string, error) {
	return "k8s-aws-v1.token-for-" + cluster, nil
}

// A Connection is three plain values. Package kubeenv fills one from a
// kubeconfig or from a pod's service account; an App fills it by hand
// where those don't fit, as here for a cloud's API server whose tokens
// come from the cloud's own SDK.
func ExampleConnection() {
	s := &humus.Setup{Host: humustest.NewHost().Host()} // Init's Setup

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(exampleCA)) {
		fmt.Println("no certificate in the cluster's CA")
		return
	}
	conn := kube.Connection{
		Server: "abcd.gr7.eu-west-1.eks.amazonaws.com:443",
		TLS:    &tls.Config{RootCAs: roots},
		// Called at most once a minute, and again soon after a 401, so a
		// short-lived token is renewed before it expires.
		Token: func(ctx context.Context) (string, error) { return cloudToken(ctx, "prod") },
	}

	client, err := kube.NewClient(s, conn)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(client.Config().Host)
	// Output: https://abcd.gr7.eu-west-1.eks.amazonaws.com:443
}
