package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// selfSubject asks the API server who c's credentials are.
func selfSubject(t testing.TB, c *Client) authenticationv1.UserInfo {
	t.Helper()
	kc, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	r, err := kc.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a SelfSubjectReview: %v", err)
	}
	return r.Status.UserInfo
}

func TestClusterClientListsNamespaces(t *testing.T) {
	cl := clustertest.Get(t)
	h := humustest.NewHost()
	tok := cl.AdminToken()
	c := newTestClient(t, &humus.Setup{Host: h.Host()}, Connection{
		Server: cl.Server(),
		TLS:    &tls.Config{RootCAs: cl.CA()},
		Token:  func(context.Context) (string, error) { return tok, nil },
	})
	names, err := listNamespaces(t, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"default", "kube-system"} {
		if !slices.Contains(names, want) {
			t.Errorf("namespaces = %q, want %s among them", names, want)
		}
	}
	if d := h.Dials(); len(d) == 0 || slices.ContainsFunc(d, func(a string) bool { return a != cl.Server() }) {
		t.Errorf("the Host dialled %q, want only %s", d, cl.Server())
	}
}

func TestClusterClientCertificateWithoutToken(t *testing.T) {
	cl := clustertest.Get(t)
	cert := cl.ClientCert(t, "alice", "devs")
	c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
		Server: cl.Server(),
		TLS:    &tls.Config{RootCAs: cl.CA(), Certificates: []tls.Certificate{cert}},
	})
	u := selfSubject(t, c)
	if u.Username != "alice" {
		t.Errorf("authenticated as %q, want alice", u.Username)
	}
	for _, g := range []string{"devs", "system:authenticated"} {
		if !slices.Contains(u.Groups, g) {
			t.Errorf("groups = %q, want %s among them", u.Groups, g)
		}
	}
}

func TestClusterClientServiceAccountToken(t *testing.T) {
	cl := clustertest.Get(t)
	ns := cl.Namespace(t)
	tok := cl.ServiceAccount(t, ns, "reader")
	c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
		Server: cl.Server(),
		TLS:    &tls.Config{RootCAs: cl.CA()},
		Token:  func(context.Context) (string, error) { return tok, nil },
	})
	if u := selfSubject(t, c); u.Username != "system:serviceaccount:"+ns+":reader" {
		t.Errorf("authenticated as %q, want system:serviceaccount:%s:reader", u.Username, ns)
	}
}

func TestClusterClientRefusesAServerItsCADidNotSign(t *testing.T) {
	cl := clustertest.Get(t)
	other := newTestPKI(t)
	tok := cl.AdminToken()
	c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
		Server: cl.Server(),
		TLS:    &tls.Config{RootCAs: other.roots},
		Token:  func(context.Context) (string, error) { return tok, nil },
	})
	_, err := listNamespaces(t, c)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("error = %v, want an x509.UnknownAuthorityError", err)
	}
}

func TestClusterClientWrongTokenIsUnauthorized(t *testing.T) {
	cl := clustertest.Get(t)
	c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
		Server: cl.Server(),
		TLS:    &tls.Config{RootCAs: cl.CA()},
		Token:  func(context.Context) (string, error) { return "not-a-token", nil },
	})
	_, err := listNamespaces(t, c)
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("apierrors.IsUnauthorized(%v) = false, want true", err)
	}
	want := `Get "https://` + cl.Server() + `/api/v1/namespaces": kube: the API server ` + cl.Server() +
		` refused the client's credentials: Unauthorized`
	assertErrText(t, err, want)
}
