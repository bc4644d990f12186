package telemetry_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/metric"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/telemetry"
)

// The six instruments of the kube module's controller, under their names
// in docs/kubernetes-controllers.md's table, come out of MetricsHandler's
// handler with the names in its "in Prometheus" column. The whole-App test
// of the memcached example checks the same names on a real controller's.
func TestBuildServesPrometheusNames(t *testing.T) {
	h := humustest.NewHost()
	tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, tel)
	if tel.TracerProvider != nil {
		t.Error("a TracerProvider without an OTLP endpoint: nothing would read its spans")
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

	body := scrape(t, tel)
	for _, name := range []string{
		"humus_kube_controller_queue_depth",
		"humus_kube_controller_queue_adds_total",
		"humus_kube_controller_queue_duration_seconds",
		"humus_kube_controller_reconcile_duration_seconds",
		"humus_kube_controller_reconcile_unfinished_duration_seconds",
		"humus_kube_controller_reconcile_longest_unfinished_duration_seconds",
		"humus_kube_controller_queue_oldest_wait_seconds",
		"humus_kube_controller_reconcile_change_latency_seconds",
	} {
		if !regexp.MustCompile(`(?m)^# TYPE ` + name + ` `).MatchString(body) {
			t.Errorf("/metrics has no %s:\n%s", name, body)
		}
	}
	if !strings.Contains(body, `target_info{service_name="test-controller",telemetry_sdk_language="go",telemetry_sdk_name="opentelemetry",telemetry_sdk_version="`) {
		t.Errorf("/metrics has no target_info of test-controller:\n%s", body)
	}
}

// Two Builds have a registry each: neither serves the other's metrics.
func TestBuildHasARegistryOfItsOwn(t *testing.T) {
	a, err := telemetry.Build(t.Context(), humustest.NewHost().Host(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, a)
	b, err := telemetry.Build(t.Context(), humustest.NewHost().Host(), "b")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, b)
	c, _ := a.MeterProvider.Meter("test").Int64Counter("only.in.a")
	c.Add(t.Context(), 1)
	if body := scrape(t, a); !strings.Contains(body, "only_in_a_total") {
		t.Errorf("a's /metrics has no only_in_a_total:\n%s", body)
	}
	if body := scrape(t, b); strings.Contains(body, "only_in_a") {
		t.Errorf("b's /metrics has a's only_in_a_total:\n%s", body)
	}
}

func TestMetricsHandlerOfAnotherTelemetry(t *testing.T) {
	for _, tel := range []humus.Telemetry{{}, humustest.NewTelemetry().Telemetry()} {
		if h, ok := telemetry.MetricsHandler(tel); ok || h != nil {
			t.Errorf("MetricsHandler(%T) = %v, %v, want nil, false", tel.MeterProvider, h, ok)
		}
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT, the spans, metrics and records reach
// the collector at its /v1/ paths, with the headers, dialled through the
// Host, and the resource has the service's name and the attributes.
func TestBuildExportsOTLP(t *testing.T) {
	col := newCollector(t, http.StatusOK)
	h := humustest.NewHost()
	h.Env["OTEL_EXPORTER_OTLP_ENDPOINT"] = col.URL + "/"
	h.Env["OTEL_EXPORTER_OTLP_HEADERS"] = "api-key=s%20cret, tenant=shop"
	h.Env["OTEL_EXPORTER_OTLP_LOGS_HEADERS"] = "tenant=logs"
	h.Env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
	h.Env["OTEL_SERVICE_NAME"] = "shop-controller"
	h.Env["OTEL_RESOURCE_ATTRIBUTES"] = "service.name=not-this,team=pay%2Dments"
	tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	record(t, tel)
	shutdown(t, tel)

	got := map[string]request{}
	for _, r := range col.requests() {
		got[r.path] = r
	}
	for path, tenant := range map[string]string{"/v1/traces": "shop", "/v1/metrics": "shop", "/v1/logs": "logs"} {
		r, ok := got[path]
		if !ok {
			t.Errorf("nothing was exported to %s: got %v", path, col.paths())
			continue
		}
		if r.header.Get("Tenant") != tenant || r.header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("%s: tenant %q, content type %q, want %q and application/x-protobuf", path, r.header.Get("Tenant"), r.header.Get("Content-Type"), tenant)
		}
		if want := map[string]string{"shop": "s cret", "logs": ""}[tenant]; r.header.Get("Api-Key") != want {
			t.Errorf("%s: api-key %q, want %q: a signal's own headers replace the shared ones", path, r.header.Get("Api-Key"), want)
		}
	}
	if r, ok := got["/v1/traces"]; ok {
		attrs := spanResource(t, r.body)
		if attrs["service.name"] != "shop-controller" || attrs["team"] != "pay-ments" {
			t.Errorf("the spans' resource = %v, want service.name shop-controller and team pay-ments", attrs)
		}
	}
	if d := h.Dials(); len(d) == 0 || d[0] != strings.TrimPrefix(col.URL, "http://") {
		t.Errorf("dialled through the Host: %v, want the collector's address", d)
	}
	if s := h.Stderr(); !strings.Contains(s, " INFO hello\n") || strings.Contains(s, "failed") {
		t.Errorf("stderr = %q, want the record's line there too, and no failure", s)
	}
}

// A signal's own endpoint is used as it is, and a signal without one, and
// without OTEL_EXPORTER_OTLP_ENDPOINT, isn't exported.
func TestBuildExportsASignalToItsOwnEndpoint(t *testing.T) {
	col := newCollector(t, http.StatusOK)
	h := humustest.NewHost()
	h.Env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = col.URL + "/custom/spans"
	h.Env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] = col.URL
	tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	record(t, tel)
	shutdown(t, tel)
	if got := col.paths(); !slices.Equal(got, []string{"/", "/custom/spans"}) {
		t.Errorf("exported to %v, want the logs to / and the spans to /custom/spans, and no metrics", got)
	}
}

// A failed export is one ERROR line on the Host's stderr, and neither the
// App nor the shutdown fails for it.
func TestBuildReportsAFailedExport(t *testing.T) {
	col := newCollector(t, http.StatusBadRequest)
	h := humustest.NewHost()
	h.Env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = col.URL + "/v1/traces"
	tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.TracerProvider.Tracer("test").Start(t.Context(), "reconcile Memcached")
	span.End()
	shutdown(t, tel)
	want := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ERROR telemetry: exporting traces failed url=` +
		regexp.QuoteMeta(col.URL) + `/v1/traces error=".*400 Bad Request.*"\n$`)
	if got := h.Stderr(); !want.MatchString(got) {
		t.Errorf("stderr = %q, want it to match %s", got, want)
	}
}

// With OTEL_SDK_DISABLED, nothing is exported and the OTLP variables go
// unread; the lines and the metrics stay.
func TestBuildSDKDisabled(t *testing.T) {
	h := humustest.NewHost()
	h.Env["OTEL_SDK_DISABLED"] = "TRUE"
	h.Env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:1"
	h.Env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
	tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	if tel.TracerProvider != nil {
		t.Error("a TracerProvider with the SDK disabled")
	}
	record(t, tel)
	if body := scrape(t, tel); !strings.Contains(body, "test_adds_total") {
		t.Errorf("/metrics has no test_adds_total:\n%s", body)
	}
	shutdown(t, tel)
	if d := h.Dials(); len(d) != 0 {
		t.Errorf("dialled %v, want nothing", d)
	}
	if s := h.Stderr(); !strings.HasSuffix(s, " INFO hello\n") {
		t.Errorf("stderr = %q, want the record's line", s)
	}
}

// Every bad variable is named, in one error, and a header's value never.
func TestBuildRefusesBadVariables(t *testing.T) {
	h := humustest.NewHost()
	h.Env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "otel-collector:4318"
	h.Env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = "ftp://otel-collector"
	h.Env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
	h.Env["OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"] = "http/json"
	h.Env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "thrift"
	h.Env["OTEL_EXPORTER_OTLP_HEADERS"] = "api-key=hunter2,hunter3,bad key=x,tenant=%zz"
	h.Env["OTEL_RESOURCE_ATTRIBUTES"] = "team=payments,=x,zone"
	h.Env["OTEL_SDK_DISABLED"] = "no"
	h.Env["LOG_VERBOSITY"] = "debug"
	_, err := telemetry.Build(t.Context(), h.Host(), "")
	want := strings.Join([]string{
		`telemetry: OTEL_RESOURCE_ATTRIBUTES: "=x": want key=value pairs, separated by commas and percent-encoded, such as deployment.environment.name=production,team=payments`,
		`telemetry: OTEL_RESOURCE_ATTRIBUTES: "zone": want key=value pairs, separated by commas and percent-encoded, such as deployment.environment.name=production,team=payments`,
		`telemetry: no service name: pass one to Build, or set OTEL_SERVICE_NAME`,
		`telemetry: LOG_VERBOSITY "debug": want a V level, an integer such as 2 (the default: INFO and client-go's messages of note), 4 (and DEBUG), 0 (INFO and above) or -4 (WARN and above)`,
		`telemetry: OTEL_SDK_DISABLED "no": want true or false`,
		`telemetry: OTEL_EXPORTER_OTLP_ENDPOINT "otel-collector:4318": want an http or https URL, such as http://otel-collector:4318`,
		`telemetry: OTEL_EXPORTER_OTLP_HEADERS: header 2 has no "=": want name=value pairs, separated by commas, such as api-key=secret,tenant=a`,
		`telemetry: OTEL_EXPORTER_OTLP_HEADERS: header 3's name "bad key" isn't an HTTP header name`,
		`telemetry: OTEL_EXPORTER_OTLP_HEADERS: the value of header tenant isn't percent-encoded correctly`,
		`telemetry: OTEL_EXPORTER_OTLP_PROTOCOL "grpc": OTLP over gRPC isn't supported, only http/protobuf: set it to http/protobuf, or unset it, and point the endpoint at the collector's OTLP/HTTP port (4318 by default, where gRPC's is 4317)`,
		`telemetry: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL "thrift": want http/protobuf`,
		`telemetry: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT "ftp://otel-collector": want an http or https URL, such as http://otel-collector:4318`,
		`telemetry: OTEL_EXPORTER_OTLP_LOGS_PROTOCOL "http/json": OTLP with JSON isn't supported, only http/protobuf: set it to http/protobuf, or unset it`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Build = %v\nwant %s", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "hunter") {
		t.Error("the error has a header's value")
	}
}

func TestBuildChecksTheHost(t *testing.T) {
	_, err := telemetry.Build(t.Context(), humus.Host{}, "test-controller")
	want := "telemetry: Host.LookupEnv is nil\ntelemetry: Host.Dial is nil\ntelemetry: Host.Stderr is nil"
	if err == nil || err.Error() != want {
		t.Errorf("Build = %v, want %q", err, want)
	}
}

// New is Build, for humus.WithTelemetry.
func TestNew(t *testing.T) {
	h := humustest.NewHost()
	tel, err := telemetry.New("test-controller", telemetry.Verbosity(0))(t.Context(), h.Host())
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, tel)
	if body := scrape(t, tel); !strings.Contains(body, `service_name="test-controller"`) {
		t.Errorf("/metrics has no target_info of test-controller:\n%s", body)
	}
	log := slog.New(otelslog.NewHandler("test", otelslog.WithLoggerProvider(tel.LoggerProvider)))
	log.Debug("dropped")
	log.Info("kept")
	if s := h.Stderr(); !strings.HasSuffix(s, " INFO kept\n") || strings.Contains(s, "dropped") {
		t.Errorf("stderr = %q, want only the INFO record, at Verbosity(0)", s)
	}
}

// record records a span, a metric and a log record on tel.
func record(t *testing.T, tel humus.Telemetry) {
	t.Helper()
	if tel.TracerProvider != nil {
		_, span := tel.TracerProvider.Tracer("test").Start(t.Context(), "reconcile Memcached")
		span.End()
	}
	c, _ := tel.MeterProvider.Meter("test").Int64Counter("test.adds")
	c.Add(t.Context(), 1)
	slog.New(otelslog.NewHandler("test", otelslog.WithLoggerProvider(tel.LoggerProvider))).Info("hello")
}

// shutdown shuts every provider of tel down, as humus.Run does, and fails
// t on an error.
func shutdown(t *testing.T, tel humus.Telemetry) {
	t.Helper()
	type shutdowner interface{ Shutdown(context.Context) error }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, p := range []any{tel.TracerProvider, tel.MeterProvider, tel.LoggerProvider} {
		if s, ok := p.(shutdowner); ok {
			errs = append(errs, s.Shutdown(ctx))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("shutting the providers down: %v", err)
	}
}

// scrape returns what MetricsHandler's handler serves for tel.
func scrape(t *testing.T, tel humus.Telemetry) string {
	t.Helper()
	handler, ok := telemetry.MetricsHandler(tel)
	if !ok {
		t.Fatal("Build's Telemetry has no metrics handler")
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// collector is an OTLP/HTTP collector that keeps every request and answers
// each with its status.
type collector struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
}

type request struct {
	path   string
	header http.Header
	body   []byte
}

func newCollector(t *testing.T, status int) *collector {
	return newSlowCollector(t, status, 0)
}

// newSlowCollector returns a collector that takes delay to answer.
func newSlowCollector(t *testing.T, status int, delay time.Duration) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.reqs = append(c.reqs, request{path: r.URL.Path, header: r.Header.Clone(), body: body})
		c.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) requests() []request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs)
}

// paths are the paths of the requests, sorted.
func (c *collector) paths() []string {
	var paths []string
	for _, r := range c.requests() {
		paths = append(paths, r.path)
	}
	slices.Sort(paths)
	return paths
}

// spanResource is the resource's attributes of an OTLP trace export.
func spanResource(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil || len(req.ResourceSpans) == 0 {
		t.Fatalf("the trace export: %v, %d resources", err, len(req.ResourceSpans))
	}
	attrs := map[string]string{}
	for _, kv := range req.ResourceSpans[0].GetResource().GetAttributes() {
		attrs[kv.Key] = kv.Value.GetStringValue()
	}
	return attrs
}
