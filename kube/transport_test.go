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
	"net/url"
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
)

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
			if got := c.base.TLSClientConfig.ServerName; got != tt.wantConfig {
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

func TestClientUsesNoProxy(t *testing.T) {
	srv := newTestServer(t, nil)

	// A proxy that counts the connections it is offered.
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var proxied sync.WaitGroup
	var proxiedN int
	var mu sync.Mutex
	proxied.Go(func() {
		for {
			conn, err := proxy.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			proxiedN++
			mu.Unlock()
			_ = conn.Close()
		}
	})
	t.Cleanup(func() {
		_ = proxy.Close()
		proxied.Wait()
	})
	proxyURL := "http://" + proxy.Addr().String()
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
	if c.base.Proxy != nil {
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
	if proxiedN != 0 {
		t.Errorf("the proxy got %d connections, want 0", proxiedN)
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
		time.Sleep(tokenRefused)
		names, err := listNamespaces(t, c)
		if err != nil || !slices.Equal(names, []string{"default"}) {
			t.Errorf("the list a second later: %q, %v; want [default]", names, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(auths, []string{"Bearer a", "Bearer b"}) || calls != 2 {
			t.Errorf("the server saw %q, after %d Token calls; want [Bearer a Bearer b] after 2", auths, calls)
		}
		c.base.CloseIdleConnections()
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
	rm, err := tel.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	var found bool
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
	if !found || count != 1 {
		t.Errorf("http.client.request.duration counted %d requests (found %v), want 1: the list", count, found)
	}
}

func TestPathTemplate(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/api", "/api"},
		{"/apis", "/apis"},
		{"/version", "/version"},
		{"/openapi/v3/apis/apps/v1", "/openapi/v3/apis/apps/v1"},
		{"/api/v1", "/api/v1"},
		{"/apis/apps/v1", "/apis/apps/v1"},
		{"/apis/apps", "/apis/apps"},
		{"/api/v1/namespaces", "/api/v1/namespaces"},
		{"/api/v1/namespaces/kube-system", "/api/v1/namespaces/{name}"},
		{"/api/v1/nodes/node-1", "/api/v1/nodes/{name}"},
		{"/api/v1/namespaces/default/pods", "/api/v1/namespaces/{namespace}/pods"},
		{"/api/v1/namespaces/default/pods/web-0", "/api/v1/namespaces/{namespace}/pods/{name}"},
		{"/api/v1/namespaces/default/pods/web-0/status", "/api/v1/namespaces/{namespace}/pods/{name}/status"},
		{"/apis/cache.example.com/v1alpha1/namespaces/ns/memcacheds/m/status", "/apis/cache.example.com/v1alpha1/namespaces/{namespace}/memcacheds/{name}/status"},
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/memcacheds.cache.example.com", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"},
		{"/apis/authentication.k8s.io/v1/selfsubjectreviews", "/apis/authentication.k8s.io/v1/selfsubjectreviews"},
	}
	for _, tt := range tests {
		if got := pathTemplate(tt.path); got != tt.want {
			t.Errorf("pathTemplate(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestIsWatch(t *testing.T) {
	tests := []struct {
		url  string
		want bool
	}{
		{"https://k/api/v1/namespaces?watch=true&resourceVersion=7", true},
		{"https://k/apis/apps/v1/namespaces/ns/deployments?watch=1", true},
		{"https://k/api/v1/watch/namespaces", true},
		{"https://k/apis/apps/v1/watch/deployments", true},
		{"https://k/api/v1/namespaces", false},
		{"https://k/api/v1/namespaces?watch=false", false},
		{"https://k/api/v1/namespaces/watch", false}, // the Namespace named watch
		{"https://k/apis/apps/v1/namespaces/watch/deployments", false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := isWatch(&http.Request{URL: u}); got != tt.want {
			t.Errorf("isWatch(%s) = %v, want %v", tt.url, got, tt.want)
		}
	}
}

func TestClientConfiguresHTTP2Pings(t *testing.T) {
	c := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{Server: "h:443", TLS: &tls.Config{}})
	if p := c.base.Protocols; p == nil || !p.HTTP2() || !p.HTTP1() {
		t.Errorf("Protocols = %v, want HTTP/1 and HTTP/2", p)
	}
	if h2 := c.base.HTTP2; h2 == nil || h2.SendPingTimeout != 30*time.Second || h2.PingTimeout != 15*time.Second {
		t.Errorf("HTTP2 = %+v, want a ping after 30s idle with 15s for its answer", h2)
	}
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
