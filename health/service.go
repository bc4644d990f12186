package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/z5labs/humus"
)

// Probe is one of the probes a Service serves, and the monitors it answers
// with.
type Probe struct {
	path     string
	monitors []Monitor
}

// Readiness is the readiness probe, served at /readyz: healthy when every
// one of ms is. A Kubernetes controller's is health.Readiness(ctrl.Synced()).
func Readiness(ms ...Monitor) Probe { return Probe{path: "/readyz", monitors: ms} }

// Liveness is the liveness probe, served at /livez: healthy when every one
// of ms is.
func Liveness(ms ...Monitor) Probe { return Probe{path: "/livez", monitors: ms} }

// Service serves the probes over HTTP. It is a humus.Service.
type Service struct {
	host   humus.Host
	addr   string
	server *http.Server

	mu       sync.Mutex
	listener net.Listener
	ready    chan struct{}
}

// NewService returns a Service that serves probes on addr, such as ":8081",
// listening with s.Host.Listen once it serves. Both /readyz and /livez are
// always served; a probe not given, or given with no monitors, is healthy.
// A probe given twice answers with the monitors of both.
func NewService(s *humus.Setup, addr string, probes ...Probe) *Service {
	byPath := map[string][]Monitor{"/readyz": nil, "/livez": nil}
	for _, p := range probes {
		byPath[p.path] = append(byPath[p.path], p.monitors...)
	}
	mux := http.NewServeMux()
	for path, ms := range byPath {
		mux.Handle("GET "+path, probeHandler(All(ms...)))
	}
	return &Service{
		host:   s.Host,
		addr:   addr,
		server: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		ready:  make(chan struct{}),
	}
}

func probeHandler(m Monitor) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := m.Healthy(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
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
// done, then closes the listener and returns nil. An error listening or
// serving is returned, naming the address.
func (s *Service) Serve(ctx context.Context) error {
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
		return fmt.Errorf("health: serving on %s: %w", l.Addr(), err)
	case <-ctx.Done():
		// Probes are short: closing at once loses nothing a kubelet
		// doesn't ask again.
		_ = s.server.Close()
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("health: serving on %s: %w", l.Addr(), err)
		}
		return nil
	}
}

// Shutdown stops the server, finishing the probes in flight within ctx.
func (s *Service) Shutdown(ctx context.Context) error {
	if err := s.server.Shutdown(ctx); err != nil {
		return fmt.Errorf("health: shutting down: %w", err)
	}
	return nil
}
