package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

func TestCheckServer(t *testing.T) {
	tests := []struct {
		addr string
		want string // "" for no error
	}{
		{addr: "10.96.0.1:443"},
		{addr: "kubernetes.default.svc:443"},
		{addr: "[fd00::1]:6443"},
		{addr: "localhost:65535"},
		{addr: "h:1"},
		{addr: "", want: `kube: server "" isn't host:port: missing port in address`},
		{addr: "10.96.0.1", want: `kube: server "10.96.0.1" isn't host:port: address 10.96.0.1: missing port in address`},
		// A kubeconfig's server is a URL: the error says what to write.
		{addr: "https://127.0.0.1:6443", want: `kube: server "https://127.0.0.1:6443": want host:port, such as 127.0.0.1:6443, not a URL`},
		{addr: "https://10.96.0.1:443/", want: `kube: server "https://10.96.0.1:443/": want host:port, such as 10.96.0.1:443, not a URL`},
		{addr: "https://[fd00::1]:6443", want: `kube: server "https://[fd00::1]:6443": want host:port, such as [fd00::1]:6443, not a URL`},
		{addr: "https://kubernetes.example.com", want: `kube: server "https://kubernetes.example.com": want host:port, such as kubernetes.example.com:443, not a URL`},
		{addr: "https://", want: `kube: server "https://": want host:port, not a URL`},
		{addr: "fd00::1:6443", want: `kube: server "fd00::1:6443" isn't host:port: address fd00::1:6443: too many colons in address`},
		{addr: ":443", want: `kube: server ":443" has no host`},
		{addr: "h:0", want: `kube: server "h:0" has port "0", which isn't a number from 1 to 65535`},
		{addr: "h:65536", want: `kube: server "h:65536" has port "65536", which isn't a number from 1 to 65535`},
		{addr: "h:https", want: `kube: server "h:https" has port "https", which isn't a number from 1 to 65535`},
		{addr: "h:-1", want: `kube: server "h:-1" has port "-1", which isn't a number from 1 to 65535`},
		{addr: "h:", want: `kube: server "h:" has port "", which isn't a number from 1 to 65535`},
		{addr: ":", want: "kube: server \":\" has no host\nkube: server \":\" has port \"\", which isn't a number from 1 to 65535"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			assertErrText(t, CheckServer(tt.addr), tt.want)
		})
	}
}

// NewClient names a kubeconfig's URL, given as Server, with what to write:
// it said "too many colons in address".
func TestNewClientSaysAURLIsntHostPort(t *testing.T) {
	_, err := NewClient(&humus.Setup{Host: humustest.NewHost().Host()}, Connection{Server: "https://127.0.0.1:6443", TLS: &tls.Config{}})
	assertErrText(t, err, `kube: server "https://127.0.0.1:6443": want host:port, such as 127.0.0.1:6443, not a URL`)
}

func TestCheckTLS(t *testing.T) {
	assertErrText(t, CheckTLS(nil), "kube: TLS config is nil: it needs at least the cluster's CA in RootCAs")
	assertErrText(t, CheckTLS(&tls.Config{}), "")
}

func TestNewClientNamesEveryMistake(t *testing.T) {
	host := humustest.NewHost().Host()
	tests := []struct {
		name string
		s    *humus.Setup
		c    Connection
		want string
	}{
		{
			name: "empty connection",
			s:    &humus.Setup{Host: host},
			c:    Connection{},
			want: "kube: server \"\" isn't host:port: missing port in address\n" +
				"kube: TLS config is nil: it needs at least the cluster's CA in RootCAs",
		},
		{
			name: "nil setup",
			s:    nil,
			c:    Connection{Server: "h:0", TLS: &tls.Config{}},
			want: "kube: the humus.Setup is nil\n" +
				`kube: server "h:0" has port "0", which isn't a number from 1 to 65535`,
		},
		{
			name: "no dial",
			s:    &humus.Setup{},
			c:    Connection{Server: "h:443"},
			want: "kube: the humus.Setup's Host.Dial is nil\n" +
				"kube: TLS config is nil: it needs at least the cluster's CA in RootCAs",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(tt.s, tt.c)
			assertErrText(t, err, tt.want)
			if c != nil {
				t.Errorf("NewClient returned a Client with its error: %v", c)
			}
		})
	}
}

func TestNewClientOpensNoConnection(t *testing.T) {
	h := humustest.NewHost()
	c, err := NewClient(&humus.Setup{Host: h.Host()}, Connection{Server: "127.0.0.1:1", TLS: &tls.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfig(c.Config()); err != nil {
		t.Fatal(err)
	}
	if d := h.Dials(); len(d) != 0 {
		t.Errorf("NewClient and kubernetes.NewForConfig dialled %q; want nothing dialled before a request", d)
	}
}

func TestConfig(t *testing.T) {
	c, err := NewClient(&humus.Setup{Host: humustest.NewHost().Host()}, Connection{
		Server: "[::1]:6443",
		TLS:    &tls.Config{},
		Token:  func(context.Context) (string, error) { return "t", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Config()
	if cfg.Host != "https://[::1]:6443" {
		t.Errorf("Host = %q, want https://[::1]:6443", cfg.Host)
	}
	if cfg.Transport != c.rt {
		t.Errorf("Transport = %T, want the Client's own", cfg.Transport)
	}
	if cfg.UserAgent != "humus-kube" {
		t.Errorf("UserAgent = %q, want humus-kube", cfg.UserAgent)
	}
	if cfg.QPS >= 0 || cfg.RateLimiter != nil {
		t.Errorf("QPS = %v, RateLimiter = %v; want a negative QPS and no RateLimiter, so nothing limits the rate", cfg.QPS, cfg.RateLimiter)
	}
	if cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.CAData != nil || cfg.CertData != nil || cfg.ServerName != "" {
		t.Errorf("rest.Config carries credentials or TLS options beside its Transport: %+v", cfg)
	}

	// client-go takes the Transport as it is, and adds no rate limiter.
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig: %v", err)
	}
	if rl := kc.CoreV1().RESTClient().GetRateLimiter(); rl != nil {
		t.Errorf("the clientset's rate limiter is %T, want none", rl)
	}

	// Each call is a fresh Config.
	cfg.Host = "https://changed:1"
	cfg.UserAgent = "changed"
	if again := c.Config(); again.Host != "https://[::1]:6443" || again.UserAgent != "humus-kube" || again == cfg {
		t.Errorf("a change to one Config reached the next: %+v", again)
	}
}

// assertErrText fails t unless err's text is want; want "" means no error.
func assertErrText(t testing.TB, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("error = %q, want none", err)
	case want != "" && err == nil:
		t.Errorf("no error, want %q", want)
	case want != "" && err.Error() != want:
		t.Errorf("error = %q\nwant    %q", err, want)
	}
}

// testPKI is a CA and a serving certificate it signed, for localhost,
// kube.test, 127.0.0.1 and ::1, whose chain holds the CA too. Like every
// clustertest.CA's, they are valid from 1990 to 2100, so a synctest bubble's
// clock, which starts in 2000, accepts them too.
type testPKI struct {
	roots *x509.CertPool
	leaf  tls.Certificate
}

func newTestPKI(t testing.TB) testPKI {
	t.Helper()
	ca, err := clustertest.NewCA("kube test CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Serving("localhost", "kube.test", "127.0.0.1", "::1")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := tls.X509KeyPair(append(certPEM, ca.PEM()...), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return testPKI{roots: ca.Pool(), leaf: leaf}
}

// seen is what a testServer's handler records of one request.
type seen struct {
	Method, Path, RawQuery string
	Authorization          string
	UserAgent              string
	ProtoMajor             int
	Host                   string
}

// testServer is an httptest TLS server, serving HTTP/2 and HTTP/1.1, that
// records every request it gets and the TLS ServerName of every handshake.
type testServer struct {
	*httptest.Server
	pki testPKI

	mu          sync.Mutex
	requests    []seen
	serverNames []string
}

// newTestServer starts a testServer whose handler is h after the request
// is recorded; a nil h answers every request with a NamespaceList holding
// "default".
func newTestServer(t testing.TB, h http.HandlerFunc) *testServer {
	t.Helper()
	if h == nil {
		h = serveNamespaces
	}
	s := &testServer{pki: newTestPKI(t)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, seen{
			Method:        r.Method,
			Path:          r.URL.Path,
			RawQuery:      r.URL.RawQuery,
			Authorization: r.Header.Get("Authorization"),
			UserAgent:     r.Header.Get("User-Agent"),
			ProtoMajor:    r.ProtoMajor,
			Host:          r.Host,
		})
		s.mu.Unlock()
		h(w, r)
	}))
	s.EnableHTTP2 = true
	s.TLS = &tls.Config{
		Certificates: []tls.Certificate{s.pki.leaf},
		NextProtos:   []string{"h2", "http/1.1"}, // so HTTP/2 is the client's choice
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			s.mu.Lock()
			s.serverNames = append(s.serverNames, hello.ServerName)
			s.mu.Unlock()
			return nil, nil
		},
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// Addr is the server's address, 127.0.0.1:PORT.
func (s *testServer) Addr() string { return s.Listener.Addr().String() }

// Port is the server's port.
func (s *testServer) Port() string {
	_, port, _ := net.SplitHostPort(s.Addr())
	return port
}

func (s *testServer) Requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *testServer) ServerNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.serverNames)
}

func serveNamespaces(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"default"}}]}`))
}

// newTestClient returns a Client of c through h, closing its idle
// connections when t ends.
func newTestClient(t testing.TB, s *humus.Setup, c Connection) *Client {
	t.Helper()
	client, err := NewClient(s, c)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(client.base.CloseIdleConnections)
	return client
}
