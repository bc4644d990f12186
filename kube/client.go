package kube

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"k8s.io/client-go/rest"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/internal/transport"
)

// Connection is how a Client reaches an API server. Every field is a plain
// value.
type Connection struct {
	// Server is the API server's address, host:port. In a pod, it is
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, joined.
	// Required: a host and a port from 1 to 65535 (CheckServer).
	Server string

	// TLS is the config the API server is dialled with: the cluster's CA in
	// RootCAs, and a client certificate when the client authenticates with
	// one. ServerName defaults to Server's host. Required (CheckTLS). The
	// Client dials with a clone, so TLS is never changed.
	TLS *tls.Config

	// Token returns the bearer token every request carries, such as the
	// pod's service account token, read through the Host's FS. nil sends
	// none, for a client that authenticates with a certificate. The Client
	// calls it at most once a minute, and keeps its last token while a call
	// fails, so a token the kubelet rotates is picked up within a minute.
	// When the API server answers 401 to a request that carried the last
	// token (it was revoked or rotated), Token is called again sooner: by
	// the next request at least a second after the last call, so however
	// many requests get a 401, it is called at most once a second. A 401 to
	// a request that carried an older token, or an Authorization header of
	// its own, changes nothing.
	//
	// A call is handed the context of the request that needs the token, and
	// never runs twice at once. A call that returns an empty token fails. A
	// failed call is retried a minute later, or a second later when the
	// last token was refused: until then the requests carry the last token,
	// or, before there is one, fail with the call's error. A call that
	// fails because its request's context ended doesn't count, so the next
	// request calls Token again.
	Token func(ctx context.Context) (string, error)
}

// CheckServer returns an error unless addr is host:port, with a host and a
// port from 1 to 65535, such as "10.96.0.1:443" or "[fd00::1]:6443". A
// URL, such as a kubeconfig's server "https://127.0.0.1:6443", is refused
// with the host:port to write instead: the Client always speaks HTTPS. The
// error shows a URL without its credentials: its password, its query's
// values and its fragment are replaced with xxxxx.
func CheckServer(addr string) error {
	shown := transport.RedactURL(addr)
	if scheme, rest, ok := strings.Cut(addr, "://"); ok {
		hostPort := rest
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			hostPort = rest[:i]
		}
		if at := strings.LastIndexByte(hostPort, '@'); at >= 0 {
			hostPort = hostPort[at+1:]
		}
		if hostPort == "" || strings.ContainsAny(scheme, "/:[") {
			return fmt.Errorf("kube: server %q: want host:port, not a URL", shown)
		}
		if _, _, err := net.SplitHostPort(hostPort); err != nil && scheme == "https" {
			hostPort = net.JoinHostPort(strings.Trim(hostPort, "[]"), "443")
		}
		return fmt.Errorf("kube: server %q: want host:port, such as %s, not a URL", shown, hostPort)
	}
	if strings.ContainsAny(addr, "@?#") {
		return fmt.Errorf("kube: server %q isn't host:port: it has a userinfo, a query or a fragment, as only a URL has", shown)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("kube: server %q isn't host:port: %w", addr, err)
	}
	var errs []error
	if host == "" {
		errs = append(errs, fmt.Errorf("kube: server %q has no host", addr))
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		errs = append(errs, fmt.Errorf("kube: server %q has port %q, which isn't a number from 1 to 65535", addr, port))
	}
	return errors.Join(errs...)
}

// CheckTLS returns an error if c is nil. A Client always speaks TLS: c
// holds at least the cluster's CA in RootCAs, unless the system's roots
// trust the API server.
func CheckTLS(c *tls.Config) error {
	if c == nil {
		return errors.New("kube: TLS config is nil: it needs at least the cluster's CA in RootCAs")
	}
	return nil
}

// Client reaches one API server through the Host.
//
// Its transport, which every client built from Config shares:
//   - dials Server with s.Host.Dial, and never through a proxy, whatever
//     the environment says;
//   - speaks TLS with a clone of Connection.TLS, whose ServerName defaults
//     to Server's host, and HTTP/2 when the server offers it, with a ping
//     after 30s without a frame and 15s for its answer, as client-go's own
//     transports do, so a watch on a dead connection ends within 45s;
//   - asks for every answer uncompressed (no Accept-Encoding: gzip, which
//     Go's transport adds): kube-apiserver would gzip a watch-list's
//     events a flush at a time for each watcher, and each list over 128
//     KiB, CPU on both sides for bandwidth a cluster's network doesn't
//     lack;
//   - adds Connection.Token's token, as Connection.Token describes;
//   - records a client span and otelhttp's client metrics for every request
//     but a watch, with s.Telemetry's providers and propagator;
//   - turns a 401 from the API server into an error that names the server,
//     and that apierrors.IsUnauthorized recognises.
type Client struct {
	server string
	rt     *clientTransport
	// cache is the informers of the resources its controllers own and
	// read, which they share.
	cache *cache.Shared
	// log is the Client's, for what an index or mapping function does
	// wrong.
	log *slog.Logger
	// ledger is the writes made through its transport of what its
	// Readers read, which their reads wait for.
	ledger *control.Ledger
}

// NewClient returns a Client that dials c.Server with s.Host.Dial, and
// traces and measures every request with s.Telemetry. It opens no
// connection. It returns one error naming every mistake in s and c.
func NewClient(s *humus.Setup, c Connection) (*Client, error) {
	var errs []error
	if s == nil {
		errs = append(errs, errors.New("kube: the humus.Setup is nil"))
	} else if s.Host.Dial == nil {
		errs = append(errs, errors.New("kube: the humus.Setup's Host.Dial is nil"))
	}
	errs = append(errs, CheckServer(c.Server), CheckTLS(c.TLS))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	log := slog.New(otelslog.NewHandler(control.InstrumentationScope, otelslog.WithLoggerProvider(s.Telemetry.Resolved().LoggerProvider)))
	logFor := func(k cache.Key) logr.Logger { return control.InformerLogger(log.Handler(), k) }
	ledger := control.NewLedger()
	return &Client{server: c.Server, rt: newTransport(s, c, log, ledger), cache: cache.NewShared(logFor), log: log, ledger: ledger}, nil
}

// clientTransport is the Client's transport: internal/transport's, whose
// package doc states what it does, with what a Controller asks of it
// besides requests: to abort the connections of a replica that lost its
// Lease, and to count them.
type clientTransport struct{ *transport.Transport }

func newTransport(s *humus.Setup, c Connection, log *slog.Logger, writes transport.WriteRecorder) *clientTransport {
	return &clientTransport{transport.New(transport.Config{
		Server:    c.Server,
		TLS:       c.TLS,
		Token:     c.Token,
		Dial:      s.Host.Dial,
		Telemetry: s.Telemetry,
		Log:       log,
		Writes:    writes,
	})}
}

func (t *clientTransport) abortConnections()    { t.AbortConnections() }
func (t *clientTransport) openConnections() int { return t.OpenConnections() }

// userAgent is the User-Agent of every request from Config's clients. The
// API server takes an update's or a patch's default field manager from it.
const userAgent = "humus-kube"

// Config returns a rest.Config for client-go's clients, such as the
// clientset kubernetes.NewForConfig returns. They share the Client's
// transport: its dialler, its credentials and its telemetry.
//
// Each call returns a new rest.Config, which the caller may change. Its
// Host is "https://" and Server, and its Transport the Client's, which
// holds the TLS config and the token, so TLSClientConfig and BearerToken
// are empty: client-go refuses TLS options beside a Transport. QPS is -1,
// so client-go limits no rate: the API server's priority and fairness
// does. UserAgent is "humus-kube". Warnings from the API server go to
// rest.WarningLogger, which logs through the logger in the request's
// context, not to a handler set process-wide.
func (c *Client) Config() *rest.Config {
	return &rest.Config{
		Host:                      "https://" + c.server,
		Transport:                 c.rt,
		UserAgent:                 userAgent,
		QPS:                       -1,
		WarningHandlerWithContext: rest.WarningLogger{},
	}
}
