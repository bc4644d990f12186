package kube_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"testing/fstest"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
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

// In a pod, the Connection comes from what the kubelet provides: the
// service's address in the environment, and the CA and a token that it
// rotates in the service account's directory. Both are read through the
// Host, so this runs the same on humustest's Host.
func ExampleConnection_pod() {
	const serviceAccount = "var/run/secrets/kubernetes.io/serviceaccount/"
	h := humustest.NewHost() // in a pod, humus.Main hands Init the real Host
	h.Env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
	h.Env["KUBERNETES_SERVICE_PORT"] = "443"
	h.Files[serviceAccount+"ca.crt"] = &fstest.MapFile{Data: []byte(exampleCA)}
	h.Files[serviceAccount+"token"] = &fstest.MapFile{Data: []byte("eyJhbGciOi...\n")}
	s := &humus.Setup{Host: h.Host()}
	ctx := context.Background()

	// In Init:
	ca, err := fs.ReadFile(s.Host.FS, serviceAccount+"ca.crt")
	if err != nil {
		fmt.Println(err)
		return
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		fmt.Println("no certificate in ca.crt")
		return
	}
	conn, err := config.Struct(func(r *config.Resolver) kube.Connection {
		return kube.Connection{
			// The kubelet sets both in every container. JoinHostPort
			// brackets an IPv6 host.
			Server: net.JoinHostPort(
				r.Get(config.Env(s.Host, "KUBERNETES_SERVICE_HOST")),
				r.Get(config.Env(s.Host, "KUBERNETES_SERVICE_PORT")),
			),
			TLS: &tls.Config{RootCAs: roots},
			// Read again at most once a minute, so a rotated token is
			// picked up.
			Token: func(context.Context) (string, error) {
				b, err := fs.ReadFile(s.Host.FS, serviceAccount+"token")
				return string(bytes.TrimSpace(b)), err
			},
		}
	}).Read(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := kube.NewClient(s, conn)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(client.Config().Host)
	// Output: https://10.96.0.1:443
}

// kubeconfig is a kubeconfig with its CA and token embedded, as kind and
// the test control plane write one.
var kubeconfig = []byte(`apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJXekNDQVFHZ0F3SUJBZ0lCQVRBS0JnZ3Foa2pPUFFRREFqQVZNUk13RVFZRFZRUURFd3BsZUdGdGNHeGwKTFdOaE1CNFhEVEkyTURFd01UQXdNREF3TUZvWERUTTJNREV3TVRBd01EQXdNRm93RlRFVE1CRUdBMVVFQXhNSwpaWGhoYlhCc1pTMWpZVEJaTUJNR0J5cUdTTTQ5QWdFR0NDcUdTTTQ5QXdFSEEwSUFCR0E3d09xQzRwTGd2ZDhtClorZk8zVGFtNFpPMlBLRzZ3bG1vVC9veHQ5blZwellaOFNDS28rcVVuZzE1UnhNSm5WRlVEZStTNUNSZ0oxZzQKUVVHb1RReWpRakJBTUE0R0ExVWREd0VCL3dRRUF3SUNCREFQQmdOVkhSTUJBZjhFQlRBREFRSC9NQjBHQTFVZApEZ1FXQkJUNjdCSUdJaHRBSjd3Z2xwcnB1MXkxb28wbitqQUtCZ2dxaGtqT1BRUURBZ05JQURCRkFpRUEzZ0VsCmZFaUZTOUFhU1BFNDZXQUFHakFQbndTT3ErT1FzWWlDTThubTIyVUNJQWd3YXhVcmxhUEN2bFdKQmtOVVk4NTYKOVpPSGkzZGJDQTVSeTZVVEpsNEgKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=
contexts:
- name: dev
  context:
    cluster: dev
    user: admin
users:
- name: admin
  user:
    token: admin-token
`)

// Outside a cluster, such as in a test, the Connection can be filled from
// a kubeconfig whose credentials are embedded. kube reads no kubeconfig
// itself: an exec plugin or an auth provider is the end user's to run, with
// its cloud's SDK behind Token.
func ExampleConnection_kubeconfig() {
	s := &humus.Setup{Host: humustest.NewHost().Host()} // Init's Setup

	cfg, err := clientcmd.Load(kubeconfig) // read through s.Host.FS in an App
	if err != nil {
		fmt.Println(err)
		return
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		fmt.Printf("no context %q\n", cfg.CurrentContext)
		return
	}
	cluster, user := cfg.Clusters[kctx.Cluster], cfg.AuthInfos[kctx.AuthInfo]
	if cluster == nil || user == nil {
		fmt.Println("the context names a missing cluster or user")
		return
	}

	// A kubeconfig's server is a URL; a Connection's is host:port.
	u, err := url.Parse(cluster.Server)
	if err != nil {
		fmt.Println(err)
		return
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(cluster.CertificateAuthorityData) {
		fmt.Println("no certificate-authority-data")
		return
	}
	conn := kube.Connection{
		Server: net.JoinHostPort(u.Hostname(), port),
		TLS:    &tls.Config{RootCAs: roots, ServerName: cluster.TLSServerName},
	}
	if len(user.ClientCertificateData) > 0 {
		cert, err := tls.X509KeyPair(user.ClientCertificateData, user.ClientKeyData)
		if err != nil {
			fmt.Println(err)
			return
		}
		conn.TLS.Certificates = []tls.Certificate{cert}
	}
	if token := user.Token; token != "" {
		conn.Token = func(context.Context) (string, error) { return token, nil }
	}
	if user.Exec != nil || user.AuthProvider != nil {
		fmt.Println(errors.New("an exec plugin or auth provider: fill Token with the cloud's SDK"))
		return
	}

	client, err := kube.NewClient(s, conn)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(client.Config().Host)
	// Output: https://127.0.0.1:6443
}
