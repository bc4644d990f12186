package kube_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
)

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

	ca, err := clustertest.NewCA("cluster CA") // stands for the cluster's CA, as the cloud's SDK returns it
	if err != nil {
		fmt.Println(err)
		return
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.PEM()) {
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
