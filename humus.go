package humus

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Service is one long-running part of an App, such as an HTTP server or a
// Kubernetes controller.
type Service interface {
	// Serve runs until ctx is done, and then returns nil, or until it
	// fails, and then returns why.
	Serve(ctx context.Context) error

	// Shutdown finishes the Service's in-flight work within ctx, and
	// returns an error wrapping ctx's when ctx ends first. Run calls it
	// once, after cancelling Serve's context, even when Serve has already
	// returned.
	Shutdown(ctx context.Context) error
}

// Setup is what an App's Init is handed.
type Setup struct {
	// Host is the process's boundary: everything outside the App is
	// reached through it.
	Host Host

	// Telemetry is the providers the App records with. Its zero value
	// records nothing.
	Telemetry Telemetry
}

// Init builds an App's Services. It is called once, before any Service
// serves; an error from it ends the App with exit code 1.
type Init func(ctx context.Context, s *Setup) ([]Service, error)

// DefaultGracePeriod is how long Run gives the Services' Shutdown, and then
// the telemetry's flush, once the App stops.
const DefaultGracePeriod = 20 * time.Second

type options struct {
	grace     time.Duration
	telemetry func(ctx context.Context, h Host) (Telemetry, error)
}

// Option configures Main and Run.
type Option func(*options)

// WithGracePeriod sets how long the Services have to shut down, overriding
// the default of 20s. A d that isn't positive keeps the default.
func WithGracePeriod(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.grace = d
		}
	}
}

// WithTelemetry builds the App's Telemetry from the Host before Init is
// called, such as OpenTelemetry SDK providers exporting to a collector.
// Every provider with a Shutdown(context.Context) error method, as the
// SDK's have, is shut down, and so flushed, after the Services have ended,
// within the grace period. An error from build ends the App with exit code 1.
func WithTelemetry(build func(ctx context.Context, h Host) (Telemetry, error)) Option {
	return func(o *options) { o.telemetry = build }
}

// Main runs the App as the process, on OSHost, and exits with Run's code.
//
// The first SIGINT or SIGTERM cancels the Services' Serve context and
// starts their shutdown: Run calls every Service's Shutdown with the grace
// period, and never drains anything itself. A second SIGINT or SIGTERM,
// while that shutdown runs, exits at once with code 1, without waiting for
// the Services or flushing the telemetry: it is how a person at a terminal
// stops an App whose shutdown hangs.
func Main(init Init, opts ...Option) {
	host := OSHost()
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(host.Stderr, "humus: a second signal: exiting at once")
		os.Exit(1)
	}()
	os.Exit(Run(ctx, host, init, opts...))
}

// Run runs the App on host until ctx is done or one of its Services
// returns, and returns the process's exit code. Main calls it with a
// context that the first signal cancels; a test calls it directly, or
// through humustest.Start.
//
// Run checks host, builds the Telemetry (see WithTelemetry), calls init,
// and runs every Service's Serve. When ctx is done, or when any Serve
// returns, Run cancels every Serve's context, calls every Service's
// Shutdown with a context that ends after the grace period, and waits for
// every Serve and Shutdown to return, for no longer than the grace period.
// Then it shuts the telemetry down with what is left of it.
//
// The exit code is 0 when every Serve and Shutdown returned nil, and 1
// otherwise: an error from init or from any Service, or a shutdown that
// outlasted the grace period. Each such error is written once, on a line of
// its own, to host.Stderr.
func Run(ctx context.Context, host Host, init Init, opts ...Option) int {
	o := options{grace: DefaultGracePeriod}
	for _, opt := range opts {
		opt(&o)
	}
	if err := host.check(); err != nil {
		// Without a Stderr there is nowhere to say so.
		if host.Stderr != nil {
			fmt.Fprintln(host.Stderr, err)
		}
		return 1
	}
	r := &errorLog{host: host}

	var tel Telemetry
	if o.telemetry != nil {
		t, err := o.telemetry(ctx, host)
		if err != nil {
			r.add(fmt.Errorf("humus: building the telemetry: %w", err))
			return r.code()
		}
		tel = t
	}
	setup := &Setup{Host: host, Telemetry: tel}

	svcs, err := init(ctx, setup)
	if err != nil {
		r.add(err)
	} else {
		serveAndShutdown(ctx, svcs, o.grace, r)
	}

	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.grace)
	defer cancel()
	if err := tel.shutdown(flushCtx); err != nil {
		r.add(fmt.Errorf("humus: shutting the telemetry down: %w", err))
	}
	return r.code()
}

// serveAndShutdown runs every Service until ctx is done or one returns, then
// shuts them all down within grace.
func serveAndShutdown(ctx context.Context, svcs []Service, grace time.Duration, r *errorLog) {
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()

	var served sync.WaitGroup
	returned := make(chan struct{}, len(svcs))
	for _, svc := range svcs {
		served.Go(func() {
			defer func() { returned <- struct{}{} }()
			r.add(svc.Serve(serveCtx))
		})
	}
	if len(svcs) > 0 {
		select {
		case <-ctx.Done():
		case <-returned:
		}
	}
	stop()

	graceCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	var all sync.WaitGroup
	all.Go(served.Wait)
	for _, svc := range svcs {
		all.Go(func() { r.add(svc.Shutdown(graceCtx)) })
	}
	done := make(chan struct{})
	go func() {
		all.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-graceCtx.Done():
		r.add(fmt.Errorf("humus: the Services did not shut down within the grace period of %s", grace))
	}
}

// errorLog writes each distinct error once to the Host's stderr, and
// remembers whether there was any.
type errorLog struct {
	host Host
	mu   sync.Mutex
	seen map[string]bool
}

func (l *errorLog) add(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if msg := err.Error(); !l.seen[msg] {
		l.seen[msg] = true
		fmt.Fprintln(l.host.Stderr, msg)
	}
}

func (l *errorLog) code() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) > 0 {
		return 1
	}
	return 0
}
