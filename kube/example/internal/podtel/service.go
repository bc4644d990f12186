package podtel

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

// MetricsService serves /metrics, in Prometheus' text format, over HTTP.
// It is a humus.Service.
//
// It listens on an address of its own, METRICS_ADDR, beside the probes'
// Service rather than on it: health.Service's routes are fixed, /readyz
// and /livez, and a separate port is also how kubebuilder's controllers
// serve their metrics, so a scrape never waits behind a probe.
type MetricsService struct {
	host   humus.Host
	addr   string
	server *http.Server

	mu       sync.Mutex
	served   bool
	listener net.Listener
	ready    chan struct{}
}

// NewMetricsService returns a Service that serves metrics, such as
// Handler's, at /metrics on addr, such as ":8080", listening with
// s.Host.Listen once it serves.
func NewMetricsService(s *humus.Setup, addr string, metrics http.Handler) *MetricsService {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	return &MetricsService{
		host:   s.Host,
		addr:   addr,
		server: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		ready:  make(chan struct{}),
	}
}

// Addr returns the address the Service listens on, once Serve has opened
// its listener. It waits for the listener until ctx is done.
func (s *MetricsService) Addr(ctx context.Context) (net.Addr, error) {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return nil, errors.New("podtel: the metrics Service isn't listening")
	}
	return s.listener.Addr(), nil
}

// Serve listens on the Service's address and serves /metrics until ctx is
// done, then closes the server at once and returns nil: a scrape is short,
// and Prometheus asks again. An error listening or serving is returned,
// naming the address. A Service serves once.
func (s *MetricsService) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.served {
		s.mu.Unlock()
		return fmt.Errorf("podtel: the metrics Service on %s has already served", s.addr)
	}
	s.served = true
	s.mu.Unlock()

	l, err := s.host.Listen(ctx, "tcp", s.addr)
	if err != nil {
		close(s.ready)
		return fmt.Errorf("podtel: listening on %s: %w", s.addr, err)
	}
	s.mu.Lock()
	s.listener = l
	s.mu.Unlock()
	close(s.ready)

	errc := make(chan error, 1)
	go func() { errc <- s.server.Serve(l) }()
	select {
	case err := <-errc:
		// A Shutdown before Serve got this far closed the server.
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("podtel: serving metrics on %s: %w", l.Addr(), err)
	case <-ctx.Done():
		_ = s.server.Close()
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("podtel: serving metrics on %s: %w", l.Addr(), err)
		}
		return nil
	}
}

// Shutdown stops the server, if Serve hasn't already, waiting within ctx
// for the scrapes in flight.
func (s *MetricsService) Shutdown(ctx context.Context) error {
	if err := s.server.Shutdown(ctx); err != nil {
		return fmt.Errorf("podtel: shutting down the metrics on %s: %w", s.addr, err)
	}
	return nil
}
