package humus

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	// Telemetry is the providers the App records with. Run hands Init one
	// that is Resolved, so every field is set; without WithTelemetry, it
	// records nothing.
	Telemetry Telemetry
}

// Init builds an App's Services. It is called once, before any Service
// serves; an error from it ends the App with exit code 1, and the Services
// it returned with the error are neither served nor shut down.
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

// WithGracePeriod sets how long the App has once it stops, for the
// Services' Shutdown and then the telemetry's flush together, overriding
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
// while that shutdown runs, writes so to stderr and exits at once with
// code 1, without waiting for the Services or flushing the telemetry: it is
// how a person at a terminal stops an App whose shutdown hangs.
func Main(init Init, opts ...Option) {
	host := OSHost()
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		sig := <-sigs
		_, _ = fmt.Fprintf(host.Stderr, "humus: a second signal (%v) during the shutdown: exiting at once\n", sig)
		os.Exit(1)
	}()
	os.Exit(Run(ctx, host, init, opts...))
}

// Run runs the App on host until ctx is done or one of its Services
// returns, and returns the process's exit code. Main calls it with a
// context that the first signal cancels; a test calls it directly, or
// through humustest.Start.
//
// Run checks host, builds the Telemetry (see WithTelemetry), and calls init
// with a Setup whose Telemetry is Resolved, so every field is set. Then it
// runs every Service's Serve, each in a goroutine of its own. When ctx is
// done, or when any Serve returns, the App stops: Run cancels every Serve's
// context, and calls every Service's Shutdown with a context that ends
// after the grace period. Once every Serve and Shutdown has returned, Run
// shuts the telemetry down within what is left of the same grace period.
// So Run returns within the grace period of the App's stop, even when a
// Service or a provider ignores its context; a Serve or Shutdown still
// running then is left behind, and what it returns later is ignored. When
// init returns no Service, the App stops at once.
//
// The exit code is 0 when every Serve and Shutdown returned nil, and 1
// otherwise: an error from init or from any Service, a Service that is nil,
// a shutdown that outlasted the grace period, or an error flushing the
// telemetry. Each such error is written once, on a line of its own, to
// host.Stderr: an error that both Serve and Shutdown return, or that two
// Services return, is written once.
func Run(ctx context.Context, host Host, init Init, opts ...Option) int {
	o := options{grace: DefaultGracePeriod}
	for _, opt := range opts {
		opt(&o)
	}
	if err := host.check(); err != nil {
		// Without a Stderr there is nowhere to say so.
		if host.Stderr != nil {
			_, _ = fmt.Fprintln(host.Stderr, err)
		}
		return 1
	}
	log := &errorLog{w: host.Stderr}
	defer log.close()

	var tel Telemetry
	if o.telemetry != nil {
		t, err := o.telemetry(ctx, host)
		if err != nil {
			log.add(fmt.Errorf("humus: building the telemetry: %w", err))
			return log.code()
		}
		tel = t
	}
	setup := &Setup{Host: host, Telemetry: tel.Resolved()}

	svcs, err := init(ctx, setup)
	if err == nil {
		err = checkServices(svcs)
	}
	var served *sync.WaitGroup
	if err != nil {
		log.add(err)
		svcs = nil
	} else {
		served = serve(ctx, svcs, log)
	}

	// The App has stopped: the grace period starts now, for the Services'
	// shutdown and the telemetry's flush together.
	graceCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.grace)
	defer cancel()
	if len(svcs) > 0 {
		shutdown(graceCtx, svcs, served, o.grace, log)
	}
	flush(graceCtx, tel, o.grace, log)
	return log.code()
}

// checkServices returns one error naming every nil Service in svcs.
func checkServices(svcs []Service) error {
	var errs []error
	for i, svc := range svcs {
		if svc == nil {
			errs = append(errs, fmt.Errorf("humus: Init returned a nil Service at index %d", i))
		}
	}
	return errors.Join(errs...)
}

// serve runs every Service's Serve until ctx is done or one of them
// returns, then cancels the others' context and returns the WaitGroup that
// their Serves are in.
func serve(ctx context.Context, svcs []Service, log *errorLog) *sync.WaitGroup {
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()

	served := &sync.WaitGroup{}
	returned := make(chan struct{}, len(svcs))
	for _, svc := range svcs {
		served.Go(func() {
			defer func() { returned <- struct{}{} }()
			log.add(svc.Serve(serveCtx))
		})
	}
	if len(svcs) > 0 {
		select {
		case <-ctx.Done():
		case <-returned:
		}
	}
	return served
}

// shutdown calls every Service's Shutdown with ctx, and waits for those and
// for the Serves in served to return, until ctx is done.
func shutdown(ctx context.Context, svcs []Service, served *sync.WaitGroup, grace time.Duration, log *errorLog) {
	var all sync.WaitGroup
	all.Go(served.Wait)
	for _, svc := range svcs {
		all.Go(func() { log.add(svc.Shutdown(ctx)) })
	}
	if !waitFor(ctx, all.Wait) {
		log.add(fmt.Errorf("humus: the Services did not shut down within the grace period of %s", grace))
	}
}

// flush shuts the telemetry's providers down, until ctx is done.
func flush(ctx context.Context, tel Telemetry, grace time.Duration, log *errorLog) {
	if !tel.shutsDown() {
		return
	}
	var err error
	if !waitFor(ctx, func() { err = tel.shutdown(ctx) }) {
		log.add(fmt.Errorf("humus: the telemetry did not shut down within the grace period of %s", grace))
		return
	}
	if err != nil {
		log.add(fmt.Errorf("humus: shutting the telemetry down: %w", err))
	}
}

// waitFor runs f in a goroutine, and reports whether it returned before
// ctx was done. When both happened, f's return wins.
func waitFor(ctx context.Context, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// errorLog writes each distinct error once to the Host's stderr, and
// remembers whether there was any. Once closed, it ignores what it is
// given: Run has returned its code.
type errorLog struct {
	w      io.Writer
	mu     sync.Mutex
	seen   map[string]bool
	closed bool
}

func (l *errorLog) add(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if msg := err.Error(); !l.seen[msg] {
		l.seen[msg] = true
		// A Stderr that fails can't be told so.
		_, _ = fmt.Fprintln(l.w, msg)
	}
}

func (l *errorLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

func (l *errorLog) code() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) > 0 {
		return 1
	}
	return 0
}
