package transport

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/z5labs/humus"
)

// The transport's durations. The pings' are client-go's, which its own
// transports read from HTTP2_READ_IDLE_TIMEOUT_SECONDS and
// HTTP2_PING_TIMEOUT_SECONDS; the rest are the ones client-go's transports
// take from http.DefaultTransport.
const (
	pingAfter        = 30 * time.Second // without a frame, before a ping
	pingTimeout      = 15 * time.Second // for the ping's answer
	handshakeTimeout = 10 * time.Second
	idleConnTimeout  = 90 * time.Second
	idleConnsPerHost = 25 // client-go's
)

// Config is what New builds a Transport from.
type Config struct {
	// Server is the API server's address, host:port, as kube.CheckServer
	// accepts it.
	Server string
	// TLS is the config the API server is dialled with; New clones it.
	TLS *tls.Config
	// Token returns the bearer token every request carries; nil sends none.
	Token func(ctx context.Context) (string, error)
	// Dial dials every connection: the Host's.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Telemetry traces and measures the requests; a nil provider records
	// nothing.
	Telemetry humus.Telemetry
	// Log says what the Transport can't do as asked: a connection it can't
	// abort, a token the API server refused. nil says nothing.
	Log *slog.Logger
	// Writes records every write of a resource it Owns, whatever the
	// context it was sent with, deletes included: the Client's Ledger,
	// which its Readers read their App's own writes through. nil records
	// none.
	Writes WriteRecorder
}

// New returns the Transport for c: the chain of round trippers every
// request goes through, the 401's error, then otelhttp, then recording a
// reconcile's writes, then the token, then the connections. It opens no
// connection.
func New(c Config) *Transport {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	tlsConfig := c.TLS.Clone()
	if tlsConfig.ServerName == "" {
		host, _, _ := net.SplitHostPort(c.Server) // CheckServer has passed
		tlsConfig.ServerName = host
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	conns := newConns(c.Dial)
	conns.graceful = func(conn net.Conn) {
		c.Log.Warn("the Host's connections have no SetLinger, nor a NetConn that has: a controller that loses its Lease closes them gracefully, and what they queued may still be sent",
			"server", c.Server, "conn", fmt.Sprintf("%T", conn))
	}
	base := &http.Transport{
		// No proxy: http.ProxyFromEnvironment, client-go's default, reads
		// the real process's environment.
		Proxy:               nil,
		DialContext:         conns.Dial,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: handshakeTimeout,
		IdleConnTimeout:     idleConnTimeout,
		MaxIdleConnsPerHost: idleConnsPerHost,
		// No Accept-Encoding: gzip, which Go's transport adds by default:
		// kube-apiserver would gzip a watch-list's stream a flush at a
		// time for this watcher alone (its encoding of an event is shared
		// by every watcher, the compression isn't), and a list over 128
		// KiB, spending its CPU and ours on a cluster's network.
		DisableCompression: true,
		Protocols:          &protocols,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: pingAfter,
			PingTimeout:     pingTimeout,
		},
	}

	var rt http.RoundTripper = base
	if c.Token != nil {
		tokens := newTokenCache(c.Server, c.Token)
		tokens.refused401 = func() {
			c.Log.Warn("the API server refused the token with a 401: the next request calls Connection.Token again", "server", c.Server)
		}
		rt = &tokenTransport{tokens: tokens, next: rt}
	}
	rt = &writesTransport{next: rt, all: c.Writes}
	tel := c.Telemetry.Resolved()
	rt = otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(tel.TracerProvider),
		otelhttp.WithMeterProvider(tel.MeterProvider),
		otelhttp.WithPropagators(tel.Propagator),
		otelhttp.WithFilter(func(r *http.Request) bool { return !isWatch(r) }),
		otelhttp.WithSpanNameFormatter(spanName),
	)
	return &Transport{server: c.Server, next: rt, base: base, conns: conns}
}

// isWatch reports whether r is a watch, which lasts as long as an
// informer runs: client-go asks for one with the query watch=true, and the
// deprecated paths /api/v1/watch/... and /apis/<group>/<version>/watch/...
// are one too. A watch is neither traced nor measured: its span and its
// duration would be the informer's lifetime, not a request's.
func isWatch(r *http.Request) bool {
	if w, err := strconv.ParseBool(r.URL.Query().Get("watch")); err == nil && w {
		return true
	}
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(segs) > 2 && segs[0] == "api":
		return segs[2] == "watch"
	case len(segs) > 3 && segs[0] == "apis":
		return segs[3] == "watch"
	}
	return false
}

// spanName names a request's span by its method and its path, with the
// namespace and the object's name replaced, so the names are few:
// "GET /api/v1/namespaces/{namespace}/pods/{name}",
// "PATCH /apis/cache.example.com/v1alpha1/namespaces/{namespace}/memcacheds/{name}/status",
// "GET /api/v1/namespaces/{name}". A path outside /api and /apis, such as
// /version, is kept whole.
func spanName(_ string, r *http.Request) string {
	return r.Method + " " + pathTemplate(r.URL.Path)
}

func pathTemplate(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var i int // the index of the first segment after the group version
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		i = 2
	case len(segs) >= 3 && segs[0] == "apis":
		i = 3
	default:
		return path
	}
	rest := segs[i:]
	if len(rest) >= 2 && rest[0] == "namespaces" {
		if len(rest) == 2 {
			rest[1] = "{name}" // the Namespace itself
		} else {
			rest[1] = "{namespace}"
			rest = rest[2:]
		}
	}
	if len(rest) >= 2 && rest[1] != "{name}" {
		rest[1] = "{name}" // rest[0] is the resource, rest[2:] its subresource
	}
	return "/" + strings.Join(segs, "/")
}

// Transport is the whole chain New builds, as an http.RoundTripper for
// client-go, and the connections under it. Its own round trip, the chain's
// top, turns a 401 into an error naming the server. client-go's own error
// for it says only "Unauthorized", and a
// caller with several clusters, or a controller's log, can't tell which one
// refused. The error is an *apierrors.StatusError underneath, so
// apierrors.IsUnauthorized still recognises it, and http.Client wraps it in
// a *url.Error naming the request.
type Transport struct {
	server string
	next   http.RoundTripper
	base   *http.Transport
	conns  *conns
}

// maxStatusBytes bounds how much of a 401's body is read for its message.
const maxStatusBytes = 64 << 10

// RoundTrip sends r down the chain.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	msg := statusMessage(resp)
	return nil, fmt.Errorf("kube: the API server %s refused the client's credentials: %w", t.server, apierrors.NewUnauthorized(msg))
}

// statusMessage reads and closes a 401's body, and returns the message of
// the metav1.Status in it when it is JSON, or "Unauthorized". A body that
// isn't UTF-8, as JSON always is, isn't read: encoding/json would turn each
// of its stray bytes into a three-byte U+FFFD, so the message is never
// longer than the body.
func statusMessage(resp *http.Response) string {
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && mt == "application/json" && utf8.Valid(body) {
		var status struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &status) == nil && status.Kind == "Status" && status.Message != "" {
			return status.Message
		}
	}
	return http.StatusText(http.StatusUnauthorized)
}

// CloseIdleConnections closes the connections no request is using, as
// http.Client.CloseIdleConnections asks of its transport.
func (t *Transport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// AbortConnections closes every connection at once, abortively, in use or
// not: what a controller that lost its Lease does, so nothing it queued is
// sent late. Requests in flight fail; the next ones dial again.
func (t *Transport) AbortConnections() {
	t.base.CloseIdleConnections()
	t.conns.abort()
}

// OpenConnections is how many connections are open, in use or idle.
func (t *Transport) OpenConnections() int { return t.conns.count() }

// Base is the connections' transport, under the chain: its settings are
// the ones New gave it.
func (t *Transport) Base() *http.Transport { return t.base }

// WrappedRoundTripper is how client-go's net utilities see through the
// chain.
func (t *Transport) WrappedRoundTripper() http.RoundTripper { return t.next }
