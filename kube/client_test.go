package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/transport"
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
		// A URL's credentials aren't shown: its password, its query's values
		// and its fragment (issue 35).
		{addr: "https://me:hunter2@127.0.0.1:6443", want: `kube: server "https://me:xxxxx@127.0.0.1:6443": want host:port, such as 127.0.0.1:6443, not a URL`},
		{addr: "https://127.0.0.1:6443?token=s3cret", want: `kube: server "https://127.0.0.1:6443?token=xxxxx": want host:port, such as 127.0.0.1:6443, not a URL`},
		{addr: "https://example.com/k8s?token=s3cret#s3cret", want: `kube: server "https://example.com/k8s?token=xxxxx#xxxxx": want host:port, such as example.com:443, not a URL`},
		{addr: "me:hunter2@10.96.0.1:443", want: `kube: server "me:xxxxx@10.96.0.1:443" isn't host:port: it has a userinfo, a query or a fragment, as only a URL has`},
		{addr: "10.96.0.1:443?token=s3cret", want: `kube: server "10.96.0.1:443?token=xxxxx" isn't host:port: it has a userinfo, a query or a fragment, as only a URL has`},
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
	t.Cleanup(client.rt.CloseIdleConnections)
	return client
}

// listNamespaces lists namespaces with a clientset built from c.Config(),
// and returns their names.
func listNamespaces(t testing.TB, c *Client) ([]string, error) {
	t.Helper()
	kc, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig: %v", err)
	}
	list, err := kc.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	return names, nil
}

func TestClientRequestGoesThroughHost(t *testing.T) {
	srv := newTestServer(t, nil)
	h := humustest.NewHost()
	server := "localhost:" + srv.Port()
	c := newTestClient(t, &humus.Setup{Host: h.Host()}, Connection{
		Server: server,
		TLS:    &tls.Config{RootCAs: srv.pki.roots},
		Token:  func(context.Context) (string, error) { return "tok-1", nil },
	})

	names, err := listNamespaces(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"default"}) {
		t.Errorf("namespaces = %q, want [default]", names)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the server got %d requests, want 1: %+v", len(reqs), reqs)
	}
	got := reqs[0]
	want := seen{
		Method:        "GET",
		Path:          "/api/v1/namespaces",
		Authorization: "Bearer tok-1",
		UserAgent:     "humus-kube",
		ProtoMajor:    2,
		Host:          server,
	}
	if got != want {
		t.Errorf("the server saw %+v\nwant               %+v", got, want)
	}
	if d := h.Dials(); !slices.Equal(d, []string{server}) {
		t.Errorf("the Host dialled %q, want [%s]", d, server)
	}
	if sn := srv.ServerNames(); !slices.Equal(sn, []string{"localhost"}) {
		t.Errorf("TLS ServerNames = %q, want [localhost]", sn)
	}
}

func TestClientServerName(t *testing.T) {
	srv := newTestServer(t, nil)
	tests := []struct {
		name       string
		server     string
		serverName string
		want       string // the ServerName the server saw
		wantConfig string // the ServerName the transport dials with
	}{
		{name: "defaults to a name", server: "localhost:" + srv.Port(), want: "localhost", wantConfig: "localhost"},
		// An IP isn't sent in the handshake, but the certificate is still
		// checked against it.
		{name: "defaults to an IP", server: srv.Addr(), want: "", wantConfig: "127.0.0.1"},
		{name: "explicit", server: srv.Addr(), serverName: "kube.test", want: "kube.test", wantConfig: "kube.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.ServerNames())
			conn := Connection{Server: tt.server, TLS: &tls.Config{RootCAs: srv.pki.roots, ServerName: tt.serverName}}
			c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, conn)
			if _, err := listNamespaces(t, c); err != nil {
				t.Fatal(err)
			}
			if got := srv.ServerNames()[before:]; !slices.Equal(got, []string{tt.want}) {
				t.Errorf("the server saw ServerNames %q, want [%q]", got, tt.want)
			}
			if got := c.rt.Base().TLSClientConfig.ServerName; got != tt.wantConfig {
				t.Errorf("the transport's ServerName = %q, want %q", got, tt.wantConfig)
			}
			// Connection.TLS is cloned, never changed.
			if conn.TLS.ServerName != tt.serverName || conn.TLS.NextProtos != nil {
				t.Errorf("Connection.TLS was changed: ServerName %q, NextProtos %q", conn.TLS.ServerName, conn.TLS.NextProtos)
			}
		})
	}
}

func TestClientNilTokenSendsNone(t *testing.T) {
	srv := newTestServer(t, nil)
	c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
		Server: srv.Addr(),
		TLS:    &tls.Config{RootCAs: srv.pki.roots},
	})
	if _, err := listNamespaces(t, c); err != nil {
		t.Fatal(err)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Authorization != "" {
		t.Errorf("requests = %+v, want one with no Authorization", reqs)
	}
}

func TestClientRefusesAnUnknownCA(t *testing.T) {
	srv := newTestServer(t, nil)
	other := newTestPKI(t)
	c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
		Server: srv.Addr(),
		TLS:    &tls.Config{RootCAs: other.roots},
	})
	_, err := listNamespaces(t, c)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("error = %v, want an x509.UnknownAuthorityError", err)
	}
	if len(srv.Requests()) != 0 {
		t.Errorf("the server got a request over a connection the client refused")
	}
}

// countingProxy listens on a loopback port until t ends, closes every
// connection it is offered, and returns its URL and how many it was
// offered.
func countingProxy(t *testing.T) (string, func() int) {
	t.Helper()
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var proxied sync.WaitGroup
	var mu sync.Mutex
	var n int
	proxied.Go(func() {
		for {
			conn, err := proxy.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			_ = conn.Close()
		}
	})
	t.Cleanup(func() {
		_ = proxy.Close()
		proxied.Wait()
	})
	return "http://" + proxy.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

func TestClientUsesNoProxy(t *testing.T) {
	srv := newTestServer(t, nil)
	proxyURL, proxied := countingProxy(t)
	var mu sync.Mutex
	for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		t.Setenv(v, proxyURL)
	}
	for _, v := range []string{"NO_PROXY", "no_proxy"} {
		t.Setenv(v, "")
	}

	// kube.test isn't loopback, so the environment's proxy would be used
	// for it; the Host sends its dial to the server.
	h := humustest.NewHost()
	host := h.Host()
	var asked []string
	dial := host.Dial
	host.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		asked = append(asked, addr)
		mu.Unlock()
		if addr == "kube.test:443" {
			addr = srv.Addr()
		}
		return dial(ctx, network, addr)
	}
	c := newTestClient(t, &humus.Setup{Host: host}, Connection{
		Server: "kube.test:443",
		TLS:    &tls.Config{RootCAs: srv.pki.roots},
	})
	if c.rt.Base().Proxy != nil {
		t.Errorf("the transport has a Proxy")
	}
	if _, err := listNamespaces(t, c); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, []string{"kube.test:443"}) {
		t.Errorf("the client dialled %q, want [kube.test:443]", asked)
	}
	if d := h.Dials(); !slices.Equal(d, []string{srv.Addr()}) {
		t.Errorf("the Host dialled %q, want the server %s", d, srv.Addr())
	}
	if n := proxied(); n != 0 {
		t.Errorf("the proxy got %d connections, want 0", n)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Host != "kube.test:443" {
		t.Errorf("requests = %+v, want one for kube.test:443", reqs)
	}
}

func TestClientUnauthorizedNamesServer(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		wantMessage string
	}{
		{
			name:        "a Status",
			contentType: "application/json",
			body:        `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`,
			wantMessage: "Unauthorized",
		},
		{
			name:        "a Status with its own message",
			contentType: "application/json; charset=utf-8",
			body:        `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"token expired","reason":"Unauthorized","code":401}`,
			wantMessage: "token expired",
		},
		{name: "text", contentType: "text/plain", body: "go away", wantMessage: "Unauthorized"},
		{name: "protobuf", contentType: "application/vnd.kubernetes.protobuf", body: "k8s\x00", wantMessage: "Unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, tt.body)
			})
			c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
				Server: srv.Addr(),
				TLS:    &tls.Config{RootCAs: srv.pki.roots},
				Token:  func(context.Context) (string, error) { return "wrong", nil },
			})
			_, err := listNamespaces(t, c)
			if !apierrors.IsUnauthorized(err) {
				t.Errorf("apierrors.IsUnauthorized(%v) = false, want true", err)
			}
			want := `Get "https://` + srv.Addr() + `/api/v1/namespaces": kube: the API server ` + srv.Addr() +
				` refused the client's credentials: ` + tt.wantMessage
			assertErrText(t, err, want)
		})
	}
}

// TestClientUnauthorizedCallsTokenAgain runs the whole Client, in fake
// time, against an API server that accepts the token "b" only, when Token
// returns "a" first: the first list fails with a 401, and a list a second
// later carries "b". The token's round tripper sees the 401 under the one
// that turns it into an error.
func TestClientUnauthorizedCallsTokenAgain(t *testing.T) {
	pki := newTestPKI(t)
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var auths []string
		srv := servePipes(t, pki, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			auths = append(auths, r.Header.Get("Authorization"))
			mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer b" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
				return
			}
			serveNamespaces(w, r)
		})
		host := humustest.NewHost().Host()
		host.Dial = srv.dial
		tokens := []string{"a", "b"}
		var calls int
		c := newTestClient(t, &humus.Setup{Host: host}, Connection{
			Server: "kube.test:443",
			TLS:    &tls.Config{RootCAs: pki.roots},
			Token: func(context.Context) (string, error) {
				calls++
				return tokens[min(calls, len(tokens))-1], nil
			},
		})

		if _, err := listNamespaces(t, c); !apierrors.IsUnauthorized(err) {
			t.Fatalf("the first list: error %v, want a 401", err)
		}
		time.Sleep(transport.TokenRefused)
		names, err := listNamespaces(t, c)
		if err != nil || !slices.Equal(names, []string{"default"}) {
			t.Errorf("the list a second later: %q, %v; want [default]", names, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(auths, []string{"Bearer a", "Bearer b"}) || calls != 2 {
			t.Errorf("the server saw %q, after %d Token calls; want [Bearer a Bearer b] after 2", auths, calls)
		}
		c.rt.Base().CloseIdleConnections()
	})
}

// pipeServer serves HTTPS, HTTP/1.1 only, over in-memory connections, so a
// Client runs inside a synctest bubble: dial hands the server one end of a
// net.Pipe. It stops when t ends.
type pipeServer struct {
	conns chan net.Conn
	done  chan struct{}
}

func servePipes(t *testing.T, pki testPKI, h http.HandlerFunc) *pipeServer {
	s := &pipeServer{conns: make(chan net.Conn), done: make(chan struct{})}
	hs := &http.Server{Handler: h}
	l := tls.NewListener(s, &tls.Config{Certificates: []tls.Certificate{pki.leaf}, NextProtos: []string{"http/1.1"}})
	var served sync.WaitGroup
	served.Go(func() { _ = hs.Serve(l) })
	t.Cleanup(func() {
		_ = hs.Close()
		served.Wait()
	})
	return s
}

func (s *pipeServer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case s.conns <- server:
		return client, nil
	case <-s.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *pipeServer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *pipeServer) Close() error {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	return nil
}

func (s *pipeServer) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func TestClientTokenErrorFailsRequest(t *testing.T) {
	srv := newTestServer(t, nil)
	errNoFile := errors.New("open var/run/secrets/kubernetes.io/serviceaccount/token: file does not exist")
	c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
		Server: srv.Addr(),
		TLS:    &tls.Config{RootCAs: srv.pki.roots},
		Token:  func(context.Context) (string, error) { return "", errNoFile },
	})
	_, err := listNamespaces(t, c)
	if !errors.Is(err, errNoFile) {
		t.Errorf("error = %v, want one wrapping the Token's", err)
	}
	want := `Get "https://` + srv.Addr() + `/api/v1/namespaces": kube: calling Connection.Token for ` + srv.Addr() + ": " + errNoFile.Error()
	assertErrText(t, err, want)
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the server got %d requests without a token, want 0", n)
	}
}

func TestClientTracesRequestsButNotWatches(t *testing.T) {
	var traceparents sync.Map // path and query → traceparent header
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		traceparents.Store(r.URL.RawQuery, r.Header.Get("Traceparent"))
		if r.URL.Query().Get("watch") != "true" {
			serveNamespaces(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"ADDED","object":{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"default","resourceVersion":"8"}}}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // until the client stops the watch
	})
	tel := humustest.NewTelemetry()
	c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host(), Telemetry: tel.Telemetry()}, Connection{
		Server: srv.Addr(),
		TLS:    &tls.Config{RootCAs: srv.pki.roots},
	})
	kc, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := kc.CoreV1().Namespaces().Watch(t.Context(), metav1.ListOptions{ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	w.Stop()
	if ev.Type != "ADDED" {
		t.Fatalf("watch event = %+v, want ADDED", ev)
	}

	spans := tel.Spans()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	if !slices.Equal(names, []string{"GET /api/v1/namespaces"}) {
		t.Fatalf("spans = %q, want only the list's, GET /api/v1/namespaces", names)
	}
	if k := spans[0].SpanKind(); k != trace.SpanKindClient {
		t.Errorf("span kind = %v, want client", k)
	}
	if tp, _ := traceparents.Load(""); tp == "" || !strings.Contains(tp.(string), spans[0].SpanContext().TraceID().String()) {
		t.Errorf("the list's traceparent = %q, want the span's trace %s", tp, spans[0].SpanContext().TraceID())
	}
	traceparents.Range(func(k, v any) bool {
		if strings.Contains(k.(string), "watch=true") && v.(string) != "" {
			t.Errorf("the watch carried a traceparent %q", v)
		}
		return true
	})

	// The watch isn't measured either.
	if count, found := requestsMeasured(t, tel); !found || count != 1 {
		t.Errorf("http.client.request.duration counted %d requests (found %v), want 1: the list", count, found)
	}
}

// requestsMeasured is how many requests otelhttp's
// http.client.request.duration counted in tel, and whether it is there.
func requestsMeasured(t *testing.T, tel *humustest.Telemetry) (count uint64, found bool) {
	t.Helper()
	rm, err := tel.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "http.client.request.duration" {
				continue
			}
			found = true
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				count += dp.Count
			}
		}
	}
	return count, found
}

// TestClientPingsAnIdleConnection runs the transport against an HTTP/2
// server that answers one request and no ping, over an in-memory
// connection, in fake time: the client pings after 30s without a frame,
// and closes the connection 15s later.
func TestClientPingsAnIdleConnection(t *testing.T) {
	pki := newTestPKI(t)
	synctest.Test(t, func(t *testing.T) {
		clientConn, serverConn := net.Pipe()
		host := humustest.NewHost().Host()
		var dials int
		host.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials++
			if dials > 1 {
				return nil, errors.New("dialled twice")
			}
			return clientConn, nil
		}
		c := newTestClient(t, &humus.Setup{Host: host}, Connection{Server: "kube.test:443", TLS: &tls.Config{RootCAs: pki.roots}})

		result := make(chan h2Result, 1)
		go func() { result <- serveH2WithoutPingAcks(serverConn, pki.leaf) }()

		resp, err := (&http.Client{Transport: c.rt}).Get("https://kube.test:443/version")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		answered := time.Now()
		if resp.ProtoMajor != 2 || string(body) != "v1.37.2" {
			t.Fatalf("response: HTTP/%d %q, want HTTP/2 v1.37.2", resp.ProtoMajor, body)
		}

		r := <-result
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.pings) != 1 || r.pings[0].Sub(answered) != 30*time.Second {
			t.Errorf("pings at %v after the answer, want one at 30s", durationsSince(answered, r.pings))
		}
		if got := r.closed.Sub(answered); got != 45*time.Second {
			t.Errorf("the client closed the connection %v after the answer, want 45s: 30s idle and 15s for the ping", got)
		}
	})
}

type h2Result struct {
	pings  []time.Time
	closed time.Time
	err    error
}

// serveH2WithoutPingAcks serves HTTP/2 on conn: every request gets 200
// "v1.37.2", and no ping an answer. It returns when the client closes conn.
func serveH2WithoutPingAcks(conn net.Conn, cert tls.Certificate) h2Result {
	tc := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	defer func() { _ = tc.Close() }()
	if err := tc.Handshake(); err != nil {
		return h2Result{err: err}
	}
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(tc, preface); err != nil || string(preface) != http2.ClientPreface {
		return h2Result{err: errors.New("no HTTP/2 preface")}
	}

	// Writes go through their own goroutine: a net.Pipe doesn't buffer, and
	// the client writes while the server does.
	writes := make(chan func(*http2.Framer), 8)
	var writer sync.WaitGroup
	writer.Go(func() {
		fw := http2.NewFramer(tc, nil)
		for w := range writes {
			w(fw)
		}
	})
	defer writer.Wait()
	defer close(writes)

	writes <- func(fw *http2.Framer) { _ = fw.WriteSettings() }
	fr := http2.NewFramer(nil, tc)
	var res h2Result
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			res.closed = time.Now()
			return res
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				writes <- func(fw *http2.Framer) { _ = fw.WriteSettingsAck() }
			}
		case *http2.HeadersFrame:
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "text/plain"})
			id := f.StreamID
			writes <- func(fw *http2.Framer) {
				_ = fw.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true})
				_ = fw.WriteData(id, true, []byte("v1.37.2"))
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				res.pings = append(res.pings, time.Now())
			}
		}
	}
}

func durationsSince(t0 time.Time, ts []time.Time) []time.Duration {
	var ds []time.Duration
	for _, t := range ts {
		ds = append(ds, t.Sub(t0))
	}
	return ds
}
