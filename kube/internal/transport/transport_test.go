package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

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

func TestNewConfiguresHTTP2Pings(t *testing.T) {
	base := New(Config{Server: "h:443", TLS: &tls.Config{}}).Base()
	if p := base.Protocols; p == nil || !p.HTTP2() || !p.HTTP1() {
		t.Errorf("Protocols = %v, want HTTP/1 and HTTP/2", p)
	}
	if h2 := base.HTTP2; h2 == nil || h2.SendPingTimeout != 30*time.Second || h2.PingTimeout != 15*time.Second {
		t.Errorf("HTTP2 = %+v, want a ping after 30s idle with 15s for its answer", h2)
	}
}

// The Transport asks for every answer uncompressed, over HTTP/2 as over
// HTTP/1: a watch-list's stream, which the API server gzips a flush at a
// time for each watcher that accepts it, and a long list.
func TestTheTransportAsksForAnswersUncompressed(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		var mu sync.Mutex
		var accepts []string
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			accepts = append(accepts, r.Proto+" "+r.Header.Get("Accept-Encoding"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{}`)
		}))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		tr := New(Config{Server: srv.Listener.Addr().String(), TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig, Dial: (&net.Dialer{}).DialContext})
		for _, path := range []string{"/api/v1/namespaces", "/api/v1/namespaces?watch=true&sendInitialEvents=true"} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		tr.CloseIdleConnections()
		srv.Close()
		proto := "HTTP/1.1 "
		if h2 {
			proto = "HTTP/2.0 "
		}
		if want := []string{proto, proto}; strings.Join(accepts, "|") != strings.Join(want, "|") {
			t.Errorf("protocol and Accept-Encoding of each request = %q, want %q", accepts, want)
		}
	}
}

// logged is a slog.Handler that keeps each record's message and its
// attributes, as key=value.
type logged struct {
	mu      sync.Mutex
	records []string
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logged) WithGroup(string) slog.Handler            { return l }

func (l *logged) Handle(_ context.Context, r slog.Record) error {
	s := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		s += " " + a.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, s)
	return nil
}

func (l *logged) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.records...)
}

// The Transport says what it can't do as asked, in Config.Log: a
// connection it can't abort, at its first dial, and a token the API
// server refused with a 401, whose request fails with an error naming the
// server. A controller's operator reads these texts: they don't change.
func TestTheTransportSaysWhatItCannotDo(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(refuse))
	defer srv.Close()
	var log logged
	var d net.Dialer
	tr := New(Config{
		Server: srv.Listener.Addr().String(),
		TLS:    srv.Client().Transport.(*http.Transport).TLSClientConfig,
		Token:  func(context.Context) (string, error) { return "tok-1", nil },
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			return opaqueConn{conn}, err
		},
		Log: slog.New(&log),
	})
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+srv.Listener.Addr().String()+"/api/v1/namespaces", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	want := "kube: the API server " + srv.Listener.Addr().String() + " refused the client's credentials: Unauthorized"
	if err == nil || err.Error() != want || !apierrors.IsUnauthorized(err) {
		t.Errorf("error = %v, want %q, which apierrors.IsUnauthorized recognises", err, want)
	}
	server := "server=" + srv.Listener.Addr().String()
	wantLogs := []string{
		"WARN the Host's connections have no SetLinger, nor a NetConn that has: a controller that loses its Lease closes them gracefully, and what they queued may still be sent " +
			server + " conn=transport.opaqueConn",
		"WARN the API server refused the token with a 401: the next request calls Connection.Token again " + server,
	}
	if got := log.all(); strings.Join(got, "\n") != strings.Join(wantLogs, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLogs, "\n"))
	}
}

// FuzzAPIErrorBody reads a 401's body, which the API server, or whatever
// answers in its place, writes: statusMessage never panics, closes the
// body, and returns a non-empty message no longer than the body, or
// "Unauthorized"; a message other than "Unauthorized" comes from a JSON
// body.
func FuzzAPIErrorBody(f *testing.F) {
	f.Add("application/json", []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
	f.Add("application/json; charset=utf-8", []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"token expired","reason":"Unauthorized","code":401}`))
	f.Add("application/json", []byte(`{"kind":"Status","message":""}`))
	f.Add("application/json", []byte(`{"kind":"Status","message":"\u00e9\ud83d\ude00"}`))
	f.Add("application/json", []byte(`{"kind":"Status","message":7}`))
	f.Add("text/plain", []byte("go away"))
	f.Add("application/vnd.kubernetes.protobuf", []byte("k8s\x00"))
	f.Add("application/json;;", []byte(`{"kind":"Status","message":"x"}`))
	f.Add("", []byte{})
	// Each byte that isn't UTF-8 decodes to U+FFFD, three bytes: a message
	// of them would be longer than the body.
	f.Add("application/json", []byte(`{"kind":"Status","message":"`+strings.Repeat("\xff", 16)+`"}`))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		b := &closeRecorder{Reader: bytes.NewReader(body)}
		resp := &http.Response{
			StatusCode: http.StatusUnauthorized,
			Header:     http.Header{"Content-Type": {contentType}},
			Body:       b,
		}
		msg := statusMessage(resp)
		if msg == "" {
			t.Errorf("statusMessage(%q, %q) is empty", contentType, body)
		}
		if len(msg) > max(len(body), len("Unauthorized")) {
			t.Errorf("statusMessage(%q, %q) = %q, longer than the body", contentType, body, msg)
		}
		if msg != "Unauthorized" && !strings.Contains(strings.ToLower(contentType), "json") {
			t.Errorf("statusMessage(%q, %q) = %q from a body that isn't JSON", contentType, body, msg)
		}
		if !b.closed {
			t.Errorf("statusMessage(%q, %q) didn't close the body", contentType, body)
		}
	})
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error {
	c.closed = true
	return nil
}
