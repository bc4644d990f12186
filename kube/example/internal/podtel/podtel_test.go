package podtel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/example/internal/podtel"
)

func TestLineProcessor(t *testing.T) {
	var out strings.Builder
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(podtel.NewLineProcessor(&out)))
	log := slog.New(otelslog.NewHandler("test", otelslog.WithLoggerProvider(lp)))

	// As the kube module records a failed reconcile, and a panic's stack.
	log.Warn("reconcile failed",
		slog.String("k8s.namespace.name", "default"),
		slog.String("humus.kube.object.name", "sessions"),
		slog.String("error", `applying "sessions": the server is down`))
	log.Info("Successfully acquired lease")
	log.Error("reconcile panicked",
		slog.String("humus.kube.object.name", "shop"),
		slog.String("exception.stacktrace", "goroutine 1:\n\tmain.go:12"),
		slog.Int("attempt", 3))

	lines := strings.Split(out.String(), "\n")
	want := []string{
		`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARN reconcile failed default/sessions error="applying \\"sessions\\": the server is down"$`,
		`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO Successfully acquired lease$`,
		`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ERROR reconcile panicked shop exception.stacktrace="goroutine 1:\\n\\tmain.go:12" attempt=3$`,
		`^$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d: one a record:\n%s", len(lines)-1, len(want)-1, out.String())
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d = %q, want it to match %s", i+1, lines[i], re)
		}
	}
	// The time is UTC, and now.
	ts, err := time.Parse(time.RFC3339Nano, strings.Fields(lines[0])[0])
	if err != nil || time.Since(ts).Abs() > time.Minute {
		t.Errorf("the time %q is not now: %v", strings.Fields(lines[0])[0], err)
	}
}

// The eight instruments of the kube module's controller, under their names
// in docs/kubernetes-controllers.md's table, come out of Build's /metrics
// with the names in its "in Prometheus" column. The whole-App test of the
// memcached example checks the same names on a real controller's.
func TestBuildServesPrometheusNames(t *testing.T) {
	h := humustest.NewHost()
	tel, err := podtel.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tel.MeterProvider.(*podtel.MeterProvider).Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if tel.TracerProvider != nil {
		t.Error("a TracerProvider without OTEL_EXPORTER_OTLP_ENDPOINT: nothing would read its spans")
	}
	m := tel.MeterProvider.Meter("github.com/z5labs/humus/kube")
	ctx := t.Context()
	depth, _ := m.Int64UpDownCounter("humus.kube.controller.queue.depth", metric.WithUnit("{object}"))
	depth.Add(ctx, 1)
	adds, _ := m.Int64Counter("humus.kube.controller.queue.adds", metric.WithUnit("{object}"))
	adds.Add(ctx, 1)
	queued, _ := m.Float64Histogram("humus.kube.controller.queue.duration", metric.WithUnit("s"))
	queued.Record(ctx, 0.1)
	rec, _ := m.Float64Histogram("humus.kube.controller.reconcile.duration", metric.WithUnit("s"))
	rec.Record(ctx, 0.1)
	unfinished, _ := m.Float64Gauge("humus.kube.controller.reconcile.unfinished_duration", metric.WithUnit("s"))
	unfinished.Record(ctx, 0.1)
	longest, _ := m.Float64Gauge("humus.kube.controller.reconcile.longest_unfinished_duration", metric.WithUnit("s"))
	longest.Record(ctx, 0.1)
	oldest, _ := m.Float64Gauge("humus.kube.controller.queue.oldest_wait", metric.WithUnit("s"))
	oldest.Record(ctx, 0.1)
	changed, _ := m.Float64Histogram("humus.kube.controller.reconcile.change_latency", metric.WithUnit("s"))
	changed.Record(ctx, 0.1)

	handler, ok := podtel.Handler(tel)
	if !ok {
		t.Fatal("Build's Telemetry has no metrics handler")
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	body := get(t, srv.URL)
	for _, name := range controllerMetrics {
		if !regexp.MustCompile(`(?m)^# TYPE ` + name + ` `).MatchString(body) {
			t.Errorf("/metrics has no %s:\n%s", name, body)
		}
	}
}

// controllerMetrics are the names of the controller's eight instruments in
// Prometheus, as docs/kubernetes-controllers.md's table has them.
var controllerMetrics = []string{
	"humus_kube_controller_queue_depth",
	"humus_kube_controller_queue_adds_total",
	"humus_kube_controller_queue_duration_seconds",
	"humus_kube_controller_reconcile_duration_seconds",
	"humus_kube_controller_reconcile_unfinished_duration_seconds",
	"humus_kube_controller_reconcile_longest_unfinished_duration_seconds",
	"humus_kube_controller_queue_oldest_wait_seconds",
	"humus_kube_controller_reconcile_change_latency_seconds",
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s %v", url, res.Status, err)
	}
	return string(b)
}

func TestBuildRefusesABadEndpoint(t *testing.T) {
	h := humustest.NewHost()
	h.Env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "otel-collector:4318"
	_, err := podtel.Build(t.Context(), h.Host(), "test-controller")
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("Build = %v, want an error naming OTEL_EXPORTER_OTLP_ENDPOINT", err)
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT, the spans, metrics and records reach
// the collector at its /v1/ paths, dialled through the Host.
func TestBuildExportsOTLP(t *testing.T) {
	paths := make(chan string, 10)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		paths <- r.URL.Path
	}))
	defer collector.Close()
	h := humustest.NewHost()
	h.Env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.URL + "/"
	tel, err := podtel.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.TracerProvider.Tracer("test").Start(t.Context(), "reconcile Memcached")
	span.End()
	c, _ := tel.MeterProvider.Meter("test").Int64Counter("test.adds")
	c.Add(t.Context(), 1)
	slog.New(otelslog.NewHandler("test", otelslog.WithLoggerProvider(tel.LoggerProvider))).Info("hello")

	type shutdowner interface{ Shutdown(context.Context) error }
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, p := range []any{tel.TracerProvider, tel.MeterProvider, tel.LoggerProvider} {
		errs = append(errs, p.(shutdowner).Shutdown(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(paths) > 0 {
		got[<-paths] = true
	}
	for _, p := range []string{"/v1/traces", "/v1/metrics", "/v1/logs"} {
		if !got[p] {
			t.Errorf("nothing was exported to %s: got %v", p, got)
		}
	}
	if d := h.Dials(); len(d) == 0 {
		t.Error("the exporters didn't dial through the Host")
	}
	if s := h.Stderr(); !strings.Contains(s, " INFO hello\n") {
		t.Errorf("stderr = %q, want the record's line there too", s)
	}
}
