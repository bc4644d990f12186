package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/z5labs/humus"
)

// Option is what NewService is given: a Probe, or a Handle.
type Option interface {
	apply(*options)
}

// options is what NewService's Options add up to.
type options struct {
	byPath   map[string][]Monitor
	handlers []handle
}

// Probe is one of the probes a Service serves, and the monitors it answers
// with. It is an Option.
type Probe struct {
	path     string
	monitors []Monitor
}

func (p Probe) apply(o *options) {
	if p.path == "" {
		return
	}
	o.byPath[p.path] = append(o.byPath[p.path], p.monitors...)
}

// Readiness is the readiness probe, served at /readyz: healthy when every
// one of ms is. A Kubernetes controller's is health.Readiness(ctrl.Synced()).
func Readiness(ms ...Monitor) Probe { return Probe{path: "/readyz", monitors: ms} }

// Liveness is the liveness probe, served at /livez: healthy when every one
// of ms is.
func Liveness(ms ...Monitor) Probe { return Probe{path: "/livez", monitors: ms} }

// Handle serves h at pattern beside the probes, such as a MeterProvider's
// metrics at "GET /metrics". pattern is an http.ServeMux pattern; it may
// not be empty, nor be the probes' own /readyz or /livez, and h may not be
// nil. NewService can't return an error: a Handle that is refused makes
// the Service's Serve return an error naming its pattern, joined with any
// other Handle's, before it listens.
func Handle(pattern string, h http.Handler) Option {
	return handle{pattern: pattern, handler: h}
}

type handle struct {
	pattern string
	handler http.Handler
}

func (h handle) apply(o *options) { o.handlers = append(o.handlers, h) }

// register adds h to mux, or returns why it can't, naming its pattern.
func (h handle) register(mux *http.ServeMux) (err error) {
	switch {
	case h.pattern == "":
		return errors.New("health: Handle: an empty pattern")
	case h.handler == nil:
		return fmt.Errorf("health: Handle(%q): a nil handler", h.pattern)
	}
	if p := patternPath(h.pattern); p == "/readyz" || p == "/livez" {
		return fmt.Errorf("health: Handle(%q): %s is the probes' own", h.pattern, p)
	}
	// ServeMux panics on a pattern it can't parse, or one that conflicts
	// with another's: that is an error here.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("health: Handle(%q): %v", h.pattern, r)
		}
	}()
	mux.Handle(h.pattern, h.handler)
	return nil
}

// patternPath is the path of an http.ServeMux pattern, "[METHOD ][HOST]/[PATH]":
// "/metrics" for "GET /metrics".
func patternPath(pattern string) string {
	if _, rest, ok := strings.Cut(pattern, " "); ok {
		pattern = strings.TrimLeft(rest, " \t")
	}
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return pattern
}

// Service serves the probes over HTTP. It is a humus.Service.
type Service struct {
	host   humus.Host
	addr   string
	server *http.Server

	err error // the Handles refused, which Serve returns

	mu       sync.Mutex
	served   bool
	listener net.Listener
	ready    chan struct{}
}

// NewService returns a Service that serves probes on addr, such as ":8081",
// listening with s.Host.Listen once it serves. Both /readyz and /livez are
// always served; a probe not given, or given with no monitors, is healthy.
// A probe given twice answers with the monitors of both; a zero Probe is
// ignored. Each Handle serves its handler beside them.
func NewService(s *humus.Setup, addr string, opts ...Option) *Service {
	o := options{byPath: map[string][]Monitor{"/readyz": nil, "/livez": nil}}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	mux := http.NewServeMux()
	for path, ms := range o.byPath {
		mux.Handle("GET "+path, probeHandler(All(ms...)))
	}
	var errs []error
	for _, h := range o.handlers {
		errs = append(errs, h.register(mux))
	}
	return &Service{
		host:   s.Host,
		addr:   addr,
		server: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		err:    errors.Join(errs...),
		ready:  make(chan struct{}),
	}
}

func probeHandler(m Monitor) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := m.Healthy(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintln(w, err)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
}

// Addr returns the address the Service listens on, once Serve has opened
// its listener, such as "127.0.0.1:43127" for an addr of "127.0.0.1:0". It
// waits for the listener until ctx is done.
func (s *Service) Addr(ctx context.Context) (net.Addr, error) {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return nil, errors.New("health: the Service isn't listening")
	}
	return s.listener.Addr(), nil
}

// Serve listens on the Service's address and serves the probes until ctx is
// done, then closes the server at once and returns nil: probes are short,
// and a kubelet asks again. An error listening or serving is returned,
// naming the address, and so are the Handles NewService refused, before
// it listens. A Service serves once: a second Serve returns an error.
func (s *Service) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.served {
		s.mu.Unlock()
		return fmt.Errorf("health: the Service on %s has already served", s.addr)
	}
	s.served = true
	s.mu.Unlock()

	if s.err != nil {
		close(s.ready)
		return s.err
	}

	l, err := s.host.Listen(ctx, "tcp", s.addr)
	if err != nil {
		close(s.ready)
		return fmt.Errorf("health: listening on %s: %w", s.addr, err)
	}
	s.mu.Lock()
	s.listener = l
	s.mu.Unlock()
	close(s.ready)

	errc := make(chan error, 1)
	go func() { errc <- s.server.Serve(l) }()
	select {
	case err := <-errc:
		// A Shutdown called before Serve got this far, as Run calls
		// it when another Service ends the App at once, closes the
		// server: that is no failure.
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("health: serving on %s: %w", l.Addr(), err)
	case <-ctx.Done():
		_ = s.server.Close()
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("health: serving on %s: %w", l.Addr(), err)
		}
		return nil
	}
}

// Shutdown stops the server, if Serve hasn't already, waiting within ctx
// for the probes in flight. It returns an error wrapping ctx's when ctx
// ends first.
func (s *Service) Shutdown(ctx context.Context) error {
	if err := s.server.Shutdown(ctx); err != nil {
		return fmt.Errorf("health: shutting down the probes on %s: %w", s.addr, err)
	}
	return nil
}
