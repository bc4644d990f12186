package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"golang.org/x/net/netutil"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/health"
)

// scope is the instrumentation scope of everything the package records.
const scope = "github.com/z5labs/humus/webhook"

// The names of the files in Settings.CertDir unless Settings names others:
// those of a kubernetes.io/tls Secret's keys, as a cert-manager Certificate
// writes them.
const (
	DefaultCertName = "tls.crt"
	DefaultKeyName  = "tls.key"
)

// DefaultCheckEvery is how often, at most, a Service reads its certificate
// and key again unless Settings.CheckEvery says otherwise. A kubelet
// updates a Secret volume a minute or so after the Secret changes, and
// cert-manager renews a certificate a third of its life before it expires:
// 10s is soon enough for both, and two small files read that often cost
// nothing.
const DefaultCheckEvery = 10 * time.Second

// The bounds a Service serves within, from what the API server needs of
// a webhook: it calls one with a timeout of at most 30s (an admission
// webhook's timeoutSeconds, 10s by default, at most 30; every webhook
// call's, a conversion's included, 30s in k8s.io/apiserver), sending each
// review whole at once, over a few connections it keeps open. A client slower than that is no API server,
// and is cut off, so that nobody who reaches the port holds it.
const (
	// ReadHeaderTimeout is how long a connection has for its TLS
	// handshake, and then for each request's headers: 10s. The API
	// server, on the cluster's network, takes milliseconds.
	ReadHeaderTimeout = 10 * time.Second

	// ReadTimeout is how long a request has, from its start, for its
	// headers and its body: 30s, the most the API server waits for the
	// answer. A body still arriving then is cut off: the handler's read
	// of it fails, and the connection is closed (over HTTP/2, the
	// request's stream).
	ReadTimeout = 30 * time.Second

	// WriteTimeout is how long a request has, from its headers read, for
	// its answer to be written: 30s, as ReadTimeout. A handler still
	// working then works for nobody: the API server has given up, and the
	// handler's context is done.
	WriteTimeout = 30 * time.Second

	// IdleTimeout is how long a connection is kept open with no request
	// in flight: 60s. The API server's client keeps an idle connection
	// 90s, Go's default, and retries a request on one the server has
	// closed meanwhile; a connection used by a stream of reviews is
	// never idle that long, and one that is closes.
	IdleTimeout = 60 * time.Second

	// MaxConnections is the most connections served at once: 128. One
	// more waits, unaccepted, until one closes. A few API server replicas
	// each keep one HTTP/2 connection, or a pool of HTTP/1.1 ones, up to
	// 25 idle each in client-go's transport: 128 is room for them all.
	MaxConnections = 128

	// MaxConcurrentStreams is the most requests an HTTP/2 connection
	// carries at once: 32, where Go's default is 250. An API server
	// starting converts a watch cache's first list with up to 10 reviews
	// at once; more wait for a stream, or go on another connection.
	MaxConcurrentStreams = 32

	// shutdownBodyGrace is how long, once Shutdown is called, a request
	// still sending its body has to finish it: a second. The API server
	// sends a review whole at once; a body still arriving is a slow
	// client's, and Shutdown doesn't wait out its context for it.
	shutdownBodyGrace = time.Second
)

// Settings are where a Service listens, and where its certificate is.
type Settings struct {
	// Addr is the address it listens on, such as ":9443": the port the
	// webhook's Kubernetes Service, or its URL, names.
	Addr string

	// CertDir is the folder of the certificate and key files, such as the
	// mount path of the Secret volume a cert-manager Certificate writes:
	// "/etc/webhook/tls". A relative path is taken against Host.Dir.
	CertDir string

	// CertName and KeyName are the files' names in CertDir: the
	// certificate (its chain after it, PEM) and its private key (PEM).
	// They are DefaultCertName, tls.crt, and DefaultKeyName, tls.key, when
	// empty.
	CertName string
	KeyName  string

	// CheckEvery is how often, at most, the files are read again, on a
	// TLS handshake, to see whether they were renewed: DefaultCheckEvery,
	// 10s, when zero.
	CheckEvery time.Duration
}

// Service serves an http.Handler over HTTPS. It is a humus.Service.
type Service struct {
	host     humus.Host
	addr     string
	server   *http.Server
	ready    *health.Binary
	inflight *inflight

	mu        sync.Mutex
	served    bool
	listener  net.Listener
	listening chan struct{}
}

// NewService returns a Service that serves h over HTTPS on settings.Addr,
// listening through s.Host once it serves, with the certificate and key
// that it reads now from settings.CertDir through s.Host, and again once
// they are renewed (see Settings.CheckEvery).
//
// Every mistake in settings and in the files is returned in one error,
// each naming the value and what is wrong: an Addr that isn't a host and
// port, an empty CertDir, a file that is missing or can't be read, a
// certificate or key that isn't PEM, a key that isn't the certificate's, a
// certificate that has expired or isn't valid yet, a negative CheckEvery,
// a nil h.
func NewService(s *humus.Setup, settings Settings, h http.Handler) (*Service, error) {
	var errs []error
	errs = append(errs, checkAddr(settings.Addr))
	if settings.CheckEvery < 0 {
		errs = append(errs, fmt.Errorf("webhook: Settings.CheckEvery %s is negative: it is how often the certificate is read again, such as 10s", settings.CheckEvery))
	}
	if h == nil {
		errs = append(errs, errors.New("webhook: NewService: a nil handler"))
	}
	if s.Host.FS == nil || s.Host.Listen == nil {
		// Run checks its Host before Init; a Setup made by hand may not.
		return nil, errors.Join(append(errs, errors.New("webhook: NewService: the Setup's Host has no FS or no Listen"))...)
	}

	tel := s.Telemetry.Resolved()
	log := slog.New(otelslog.NewHandler(scope, otelslog.WithLoggerProvider(tel.LoggerProvider)))
	var certs *certificates
	if settings.CertDir == "" {
		errs = append(errs, errors.New(`webhook: Settings.CertDir is empty: it is the folder of the certificate and key, such as a Secret volume's mount path, "/etc/webhook/tls"`))
	} else {
		certs = &certificates{
			host:     s.Host,
			certPath: filepath.Join(settings.CertDir, orDefault(settings.CertName, DefaultCertName)),
			keyPath:  filepath.Join(settings.CertDir, orDefault(settings.KeyName, DefaultKeyName)),
			every:    orDefault(settings.CheckEvery, DefaultCheckEvery),
			now:      time.Now,
			log:      log,
		}
		errs = append(errs, certs.load())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	in := newInflight()
	return &Service{
		host: s.Host,
		addr: settings.Addr,
		server: &http.Server{
			Handler:           in.track(traced(tel, h)),
			TLSConfig:         certs.tlsConfig(),
			ReadHeaderTimeout: ReadHeaderTimeout,
			ReadTimeout:       ReadTimeout,
			WriteTimeout:      WriteTimeout,
			IdleTimeout:       IdleTimeout,
			HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxConcurrentStreams},
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ready:     health.NewBinary(errors.New("webhook: not serving yet")),
		inflight:  in,
		listening: make(chan struct{}),
	}, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// checkAddr returns why addr isn't an address to listen on, or nil.
func checkAddr(addr string) error {
	if addr == "" {
		return errors.New(`webhook: Settings.Addr is empty: it is the address to listen on, such as ":9443"`)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Errorf(`webhook: Settings.Addr %q isn't a host and port, such as ":9443": %w`, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("webhook: Settings.Addr %q: the port %q isn't a number from 0 to 65535", addr, port)
	}
	return nil
}

// Ready is healthy while the Service serves: from when it listens until its
// context is done or Shutdown is called. It is for health.Readiness, so a
// replica's pod is among the webhook's endpoints only while it answers.
func (s *Service) Ready() health.Monitor { return s.ready }

// Addr returns the address the Service listens on, once Serve has opened
// its listener, such as "127.0.0.1:43127" for an Addr of "127.0.0.1:0". It
// waits for the listener until ctx is done.
func (s *Service) Addr(ctx context.Context) (net.Addr, error) {
	select {
	case <-s.listening:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return nil, errors.New("webhook: the Service isn't listening")
	}
	return s.listener.Addr(), nil
}

// Serve listens on the Service's address and serves its handler over
// HTTPS until ctx is done. Then it stops accepting connections and returns
// nil, leaving the requests in flight to finish within Shutdown's grace.
// An error listening or accepting is returned, naming the address. A
// Service serves once: a second Serve returns an error.
func (s *Service) Serve(ctx context.Context) error {
	l, err := s.listen(ctx)
	if err != nil {
		return err
	}
	return s.serve(ctx, l)
}

// listen opens the Service's listener, once. From its return, the Service
// is ready: the listener takes connections, which serve accepts as soon
// as it runs, with the certificate NewService loaded.
func (s *Service) listen(ctx context.Context) (net.Listener, error) {
	s.mu.Lock()
	if s.served {
		s.mu.Unlock()
		return nil, fmt.Errorf("webhook: the Service on %s has already served", s.addr)
	}
	s.served = true
	s.mu.Unlock()

	l, err := s.host.Listen(ctx, "tcp", s.addr)
	if err != nil {
		close(s.listening)
		return nil, fmt.Errorf("webhook: listening on %s: %w", s.addr, err)
	}
	// Closed by serve on ctx's end and by the server's Shutdown, in either
	// order: only the first closes it. A connection past MaxConnections
	// waits in the listener's backlog until one closes.
	l = &onceCloseListener{Listener: netutil.LimitListener(l, MaxConnections)}
	s.mu.Lock()
	s.listener = l
	s.mu.Unlock()
	s.ready.MarkHealthy()
	close(s.listening)
	return l, nil
}

// serve serves on l, which listen opened, until ctx is done.
func (s *Service) serve(ctx context.Context, l net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- s.server.ServeTLS(l, "", "") }()
	defer s.ready.MarkUnhealthy(errors.New("webhook: stopped serving"))

	select {
	case err := <-errc:
		// A Shutdown called before or while Serve runs, as Run calls it
		// when another Service ends the App at once, closes the server:
		// that is no failure.
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("webhook: serving on %s: %w", l.Addr(), err)
	case <-ctx.Done():
		s.ready.MarkUnhealthy(errors.New("webhook: stopped serving"))
		_ = l.Close()
		// An accept on the closed listener is the end asked for.
		if err := <-errc; err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("webhook: serving on %s: %w", l.Addr(), err)
		}
		return nil
	}
}

// Shutdown stops accepting connections, if Serve hasn't already, closes
// the idle ones, and waits within ctx for the requests in flight to
// finish, closing each connection once its request has. A request still
// sending its body has a second more to send it, then its handler's read
// of it fails: a slow client doesn't hold Shutdown for its context. It
// returns an error wrapping ctx's when ctx ends first, leaving the
// requests still in flight be.
func (s *Service) Shutdown(ctx context.Context) error {
	s.ready.MarkUnhealthy(errors.New("webhook: shutting down"))
	s.inflight.shutdown(time.Now().Add(shutdownBodyGrace))
	if err := s.server.Shutdown(ctx); err != nil {
		return fmt.Errorf("webhook: shutting down the server on %s: %w", s.addr, err)
	}
	return nil
}

// onceCloseListener is a net.Listener whose Close closes it once, and
// returns nil after.
type onceCloseListener struct {
	net.Listener
	once sync.Once
}

func (l *onceCloseListener) Close() error {
	var err error
	l.once.Do(func() { err = l.Listener.Close() })
	return err
}
