package humus_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
)

// fake is a Service that records what Run does to it. Its Serve runs serve,
// or waits for its context; its Shutdown runs shutdown, or returns nil.
type fake struct {
	serve    func(ctx context.Context) error
	shutdown func(ctx context.Context) error

	mu          sync.Mutex
	serves      int
	shutdowns   int
	serveErr    error     // the Serve context's Err once Serve returned
	shutdownDL  time.Time // the Shutdown context's deadline
	shutdownHas bool
}

func (f *fake) Serve(ctx context.Context) error {
	f.mu.Lock()
	f.serves++
	f.mu.Unlock()
	var err error
	if f.serve != nil {
		err = f.serve(ctx)
	} else {
		<-ctx.Done()
	}
	f.mu.Lock()
	f.serveErr = ctx.Err()
	f.mu.Unlock()
	return err
}

func (f *fake) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	f.shutdowns++
	f.shutdownDL, f.shutdownHas = ctx.Deadline()
	f.mu.Unlock()
	if f.shutdown != nil {
		return f.shutdown(ctx)
	}
	return nil
}

func (f *fake) counts() (serves, shutdowns int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.serves, f.shutdowns
}

func (f *fake) servedUntil() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.serveErr
}

func services(svcs ...humus.Service) humus.Init {
	return func(context.Context, *humus.Setup) ([]humus.Service, error) { return svcs, nil }
}

func TestRunExitsZeroWhenAServiceReturnsNilAndShutsTheOthersDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		done := &fake{serve: func(context.Context) error {
			time.Sleep(time.Second)
			return nil
		}}
		other := &fake{}

		start := time.Now()
		code := humus.Run(t.Context(), h.Host(), services(done, other))

		if code != 0 {
			t.Errorf("exit code = %d, want 0; stderr:\n%s", code, h.Stderr())
		}
		if got := h.Stderr(); got != "" {
			t.Errorf("stderr = %q, want nothing", got)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("Run returned after %s, want 1s: when the first Service returned", got)
		}
		if err := other.servedUntil(); !errors.Is(err, context.Canceled) {
			t.Errorf("the other Service's Serve context ended with %v, want context.Canceled", err)
		}
		for name, f := range map[string]*fake{"the returning Service": done, "the other Service": other} {
			if serves, shutdowns := f.counts(); serves != 1 || shutdowns != 1 {
				t.Errorf("%s: Serve called %d times, Shutdown %d times; want once each", name, serves, shutdowns)
			}
		}
	})
}

func TestRunExitsOneAndWritesTheErrorOfAFailingService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		failing := &fake{serve: func(context.Context) error {
			return errors.New("queue: dialling 127.0.0.1:5672: connection refused")
		}}
		other := &fake{}

		code := humus.Run(t.Context(), h.Host(), services(failing, other))

		if code != 1 {
			t.Errorf("exit code = %d, want 1", code)
		}
		if got, want := h.Stderr(), "queue: dialling 127.0.0.1:5672: connection refused\n"; got != want {
			t.Errorf("stderr = %q, want %q", got, want)
		}
		if _, shutdowns := other.counts(); shutdowns != 1 {
			t.Errorf("the other Service's Shutdown was called %d times, want once", shutdowns)
		}
		if err := other.servedUntil(); !errors.Is(err, context.Canceled) {
			t.Errorf("the other Service's Serve context ended with %v, want context.Canceled", err)
		}
	})
}

func TestRunExitsOneOnAFailingInitAndStartsNoService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		svc := &fake{}
		init := func(context.Context, *humus.Setup) ([]humus.Service, error) {
			return []humus.Service{svc}, errors.New(`app: environment variable "POD_NAME" is not set`)
		}

		code := humus.Run(t.Context(), h.Host(), init)

		if code != 1 {
			t.Errorf("exit code = %d, want 1", code)
		}
		if got, want := h.Stderr(), "app: environment variable \"POD_NAME\" is not set\n"; got != want {
			t.Errorf("stderr = %q, want %q", got, want)
		}
		if serves, shutdowns := svc.counts(); serves != 0 || shutdowns != 0 {
			t.Errorf("the Service Init returned with its error: Serve called %d times, Shutdown %d; want neither", serves, shutdowns)
		}
	})
}

func TestRunOnASignalCancelsServeAndShutsDownWithTheGracePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		svc := &fake{}
		p := humustest.Start(t, h.Host(), services(svc), humus.WithGracePeriod(7*time.Second))

		time.Sleep(time.Minute)
		synctest.Wait()
		if serves, shutdowns := svc.counts(); serves != 1 || shutdowns != 0 {
			t.Fatalf("before the signal: Serve called %d times, Shutdown %d; want Serve once and no Shutdown", serves, shutdowns)
		}
		select {
		case <-p.Done():
			t.Fatal("the App exited before its signal")
		default:
		}

		signalled := time.Now()
		p.Signal()
		code := p.Wait()

		if code != 0 {
			t.Errorf("exit code = %d, want 0; stderr:\n%s", code, h.Stderr())
		}
		if got := h.Stderr(); got != "" {
			t.Errorf("stderr = %q, want nothing", got)
		}
		if err := svc.servedUntil(); !errors.Is(err, context.Canceled) {
			t.Errorf("Serve's context ended with %v, want context.Canceled", err)
		}
		svc.mu.Lock()
		defer svc.mu.Unlock()
		if svc.shutdowns != 1 {
			t.Errorf("Shutdown called %d times, want once", svc.shutdowns)
		}
		if !svc.shutdownHas {
			t.Errorf("Shutdown's context has no deadline, want one 7s after the signal")
		} else if got := svc.shutdownDL.Sub(signalled); got != 7*time.Second {
			t.Errorf("Shutdown's deadline is %s after the signal, want the grace period of 7s", got)
		}
	})
}

func TestRunUsesTheDefaultGracePeriodOf20s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		svc := &fake{}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		stopped := time.Now()
		if code := humus.Run(ctx, h.Host(), services(svc), humus.WithGracePeriod(-time.Second)); code != 0 {
			t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, h.Stderr())
		}
		if got := svc.shutdownDL.Sub(stopped); humus.DefaultGracePeriod != 20*time.Second || got != 20*time.Second {
			t.Errorf("Shutdown's deadline is %s after the stop, want 20s: a grace period that isn't positive keeps the default", got)
		}
	})
}

func TestRunExitsOneWhenShutdownOutlastsTheGracePeriod(t *testing.T) {
	tests := []struct {
		name string
		svc  *fake
	}{
		{
			name: "a Shutdown that ignores its context",
			svc: &fake{shutdown: func(context.Context) error {
				time.Sleep(time.Hour)
				return errors.New("app: finished late")
			}},
		},
		{
			name: "a Serve that ignores its context",
			svc: &fake{serve: func(context.Context) error {
				time.Sleep(time.Hour)
				return errors.New("app: finished late")
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := humustest.NewHost()
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(time.Second, cancel)

				start := time.Now()
				code := humus.Run(ctx, h.Host(), services(tt.svc), humus.WithGracePeriod(3*time.Second))

				if code != 1 {
					t.Errorf("exit code = %d, want 1", code)
				}
				if got := time.Since(start); got != 4*time.Second {
					t.Errorf("Run returned %s after it started, want 4s: the signal at 1s and the grace period of 3s", got)
				}
				want := "humus: the Services did not shut down within the grace period of 3s\n"
				if got := h.Stderr(); got != want {
					t.Errorf("stderr = %q, want %q", got, want)
				}
				// What the Service returns after Run has returned is
				// ignored: the exit code is already decided.
				time.Sleep(2 * time.Hour)
				if got := h.Stderr(); got != want {
					t.Errorf("stderr once the late Service returned = %q, want only %q", got, want)
				}
			})
		})
	}
}

func TestRunWritesAnErrorOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		broken := errors.New("app: the connection is broken")
		a := &fake{
			serve:    func(context.Context) error { return broken },
			shutdown: func(context.Context) error { return broken },
		}
		b := &fake{
			serve:    func(ctx context.Context) error { <-ctx.Done(); return broken },
			shutdown: func(context.Context) error { return errors.New("app: b: closing: broken pipe") },
		}

		code := humus.Run(t.Context(), h.Host(), services(a, b))

		if code != 1 {
			t.Errorf("exit code = %d, want 1", code)
		}
		lines := linesOf(h.Stderr())
		slices.Sort(lines)
		want := []string{"app: b: closing: broken pipe", "app: the connection is broken"}
		if !slices.Equal(lines, want) {
			t.Errorf("stderr's lines = %q, want each error once: %q", lines, want)
		}
	})
}

func TestRunRefusesAHostWithMissingFields(t *testing.T) {
	h := humustest.NewHost()
	host := h.Host()
	host.Dial = nil
	host.FS = nil
	called := false
	init := func(context.Context, *humus.Setup) ([]humus.Service, error) {
		called = true
		return nil, nil
	}

	code := humus.Run(t.Context(), host, init)

	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if got, want := h.Stderr(), "humus: Host.Dial is nil\nhumus: Host.FS is nil\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	if called {
		t.Error("Init was called on a Host with missing fields")
	}

	// Without a Stderr there is nowhere to write, but the code still says so.
	if code := humus.Run(t.Context(), humus.Host{}, init); code != 1 {
		t.Errorf("exit code on the zero Host = %d, want 1", code)
	}
}

func TestRunRefusesANilService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		svc := &fake{}
		code := humus.Run(t.Context(), h.Host(), services(svc, nil))
		if code != 1 {
			t.Errorf("exit code = %d, want 1", code)
		}
		if got, want := h.Stderr(), "humus: Init returned a nil Service at index 1\n"; got != want {
			t.Errorf("stderr = %q, want %q", got, want)
		}
		if serves, _ := svc.counts(); serves != 0 {
			t.Errorf("Serve called %d times beside a nil Service, want 0", serves)
		}
	})
}

func TestRunWithNoServiceExitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		start := time.Now()
		if code := humus.Run(t.Context(), h.Host(), services()); code != 0 {
			t.Errorf("exit code = %d, want 0", code)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("Run took %s, want no time", got)
		}
	})
}

func TestRunHandsInitTheHostAndAResolvedTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		h.Env["POD_NAME"] = "memcached-0"
		var got humus.Setup
		init := func(_ context.Context, s *humus.Setup) ([]humus.Service, error) {
			got = *s
			return nil, nil
		}
		humus.Run(t.Context(), h.Host(), init)

		if v, ok := got.Host.LookupEnv("POD_NAME"); !ok || v != "memcached-0" {
			t.Errorf("Setup.Host.LookupEnv(POD_NAME) = %q, %v; want the test Host's memcached-0", v, ok)
		}
		tel := got.Telemetry
		if tel.TracerProvider == nil || tel.MeterProvider == nil || tel.LoggerProvider == nil || tel.Propagator == nil {
			t.Errorf("Setup.Telemetry = %+v, want every field set", tel)
		}
	})
}

// recordingExporter is a span exporter that writes what it is given, and
// its shutdown, into a shared log of events.
type recordingExporter struct{ events *events }

func (e recordingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	for _, s := range spans {
		e.events.add("exported span " + s.Name())
	}
	return nil
}

func (e recordingExporter) Shutdown(context.Context) error {
	e.events.add("exporter shut down")
	return nil
}

type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, s)
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

func TestRunFlushesTheTelemetryAfterTheServicesEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		ev := &events{}
		build := func(context.Context, humus.Host) (humus.Telemetry, error) {
			// A batch that only a flush sends.
			bsp := sdktrace.NewBatchSpanProcessor(recordingExporter{ev}, sdktrace.WithBatchTimeout(time.Hour))
			return humus.Telemetry{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(bsp))}, nil
		}
		init := func(_ context.Context, s *humus.Setup) ([]humus.Service, error) {
			tracer := s.Telemetry.TracerProvider.Tracer("test")
			return []humus.Service{&fake{
				serve: func(ctx context.Context) error {
					_, span := tracer.Start(ctx, "serving")
					span.End()
					<-ctx.Done()
					time.Sleep(time.Second)
					ev.add("Serve returned")
					return nil
				},
				shutdown: func(context.Context) error {
					time.Sleep(2 * time.Second)
					ev.add("Shutdown returned")
					return nil
				},
			}}, nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Minute, cancel)

		code := humus.Run(ctx, h.Host(), init, humus.WithTelemetry(build))

		if code != 0 {
			t.Errorf("exit code = %d, want 0; stderr:\n%s", code, h.Stderr())
		}
		want := []string{"Serve returned", "Shutdown returned", "exported span serving", "exporter shut down"}
		if got := ev.all(); !slices.Equal(got, want) {
			t.Errorf("events = %q, want %q: the span flushed only after the Service ended", got, want)
		}
	})
}

// deadlineProvider is a TracerProvider whose Shutdown records its context's
// deadline.
type deadlineProvider struct {
	tracenoop.TracerProvider
	mu       sync.Mutex
	deadline time.Time
	calls    int
}

func (p *deadlineProvider) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	p.deadline, _ = ctx.Deadline()
	return nil
}

func TestRunFlushesTheTelemetryWithinTheSameGracePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		tp := &deadlineProvider{}
		build := func(context.Context, humus.Host) (humus.Telemetry, error) {
			return humus.Telemetry{TracerProvider: tp}, nil
		}
		svc := &fake{shutdown: func(context.Context) error {
			time.Sleep(5 * time.Second)
			return nil
		}}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		stopped := time.Now()

		code := humus.Run(ctx, h.Host(), services(svc), humus.WithTelemetry(build), humus.WithGracePeriod(8*time.Second))

		if code != 0 {
			t.Errorf("exit code = %d, want 0; stderr:\n%s", code, h.Stderr())
		}
		tp.mu.Lock()
		defer tp.mu.Unlock()
		if tp.calls != 1 {
			t.Fatalf("the TracerProvider was shut down %d times, want once", tp.calls)
		}
		if got := tp.deadline.Sub(stopped); got != 8*time.Second {
			t.Errorf("the telemetry's shutdown deadline is %s after the stop, want 8s: the end of the one grace period", got)
		}
	})
}

func TestRunFlushesTheTelemetryWhenInitFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		tp := &deadlineProvider{}
		build := func(context.Context, humus.Host) (humus.Telemetry, error) {
			return humus.Telemetry{TracerProvider: tp}, nil
		}
		init := func(context.Context, *humus.Setup) ([]humus.Service, error) {
			return nil, errors.New("app: no settings")
		}
		if code := humus.Run(t.Context(), h.Host(), init, humus.WithTelemetry(build)); code != 1 {
			t.Errorf("exit code = %d, want 1", code)
		}
		if tp.calls != 1 {
			t.Errorf("the TracerProvider was shut down %d times after Init failed, want once", tp.calls)
		}
	})
}

func TestRunExitsOneWhenTheTelemetryCantBeBuilt(t *testing.T) {
	h := humustest.NewHost()
	build := func(_ context.Context, h humus.Host) (humus.Telemetry, error) {
		_, ok := h.LookupEnv("OTEL_EXPORTER_OTLP_ENDPOINT")
		if !ok {
			return humus.Telemetry{}, errors.New(`environment variable "OTEL_EXPORTER_OTLP_ENDPOINT" is not set`)
		}
		return humus.Telemetry{}, nil
	}
	called := false
	init := func(context.Context, *humus.Setup) ([]humus.Service, error) {
		called = true
		return nil, nil
	}

	code := humus.Run(t.Context(), h.Host(), init, humus.WithTelemetry(build))

	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	want := "humus: building the telemetry: environment variable \"OTEL_EXPORTER_OTLP_ENDPOINT\" is not set\n"
	if got := h.Stderr(); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	if called {
		t.Error("Init was called without its telemetry")
	}
}

func TestRunHandsInitTheBuiltTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		tel := humustest.NewTelemetry()
		init := func(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
			_, span := s.Telemetry.TracerProvider.Tracer("test").Start(ctx, "init")
			span.End()
			return nil, nil
		}
		build := func(context.Context, humus.Host) (humus.Telemetry, error) { return tel.Telemetry(), nil }
		if code := humus.Run(t.Context(), h.Host(), init, humus.WithTelemetry(build)); code != 0 {
			t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, h.Stderr())
		}
		spans := tel.Spans()
		if len(spans) != 1 || spans[0].Name() != "init" {
			t.Errorf("spans = %v, want the one Init recorded", tracetest.SpanStubsFromReadOnlySpans(spans))
		}
	})
}

// linesOf returns s's lines, without their newlines.
func linesOf(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
