package telemetry_test

import (
	"context"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/telemetry"
)

// processEnv sets, in the real process's environment, every OTEL_*
// variable OpenTelemetry's SDK and exporters read themselves, each to a
// value that would show if it were taken: endpoints at decoy, a header,
// JSON, gzip, a 1ms timeout, delta temporality, no sampling, batches of
// one, exports every millisecond, no attributes.
func processEnv(t *testing.T, decoy string) {
	for key, v := range map[string]string{
		"OTEL_SDK_DISABLED":                                        "true",
		"OTEL_SERVICE_NAME":                                        "process-service",
		"OTEL_EXPORTER_OTLP_ENDPOINT":                              decoy,
		"OTEL_EXPORTER_OTLP_INSECURE":                              "false",
		"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE":        "delta",
		"OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": "base2_exponential_bucket_histogram",
		"OTEL_TRACES_SAMPLER":                                      "always_off",
		"OTEL_BSP_SCHEDULE_DELAY":                                  "1",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE":                           "1",
		"OTEL_BLRP_SCHEDULE_DELAY":                                 "1",
		"OTEL_BLRP_MAX_EXPORT_BATCH_SIZE":                          "1",
		"OTEL_METRIC_EXPORT_INTERVAL":                              "1",
		"OTEL_METRICS_EXEMPLAR_FILTER":                             "always_off",
		"OTEL_GO_X_CARDINALITY_LIMIT":                              "1",
		"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT":                          "0",
		"OTEL_ATTRIBUTE_COUNT_LIMIT":                               "0",
		"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT":                     "0",
		"OTEL_LOGRECORD_ATTRIBUTE_VALUE_LENGTH_LIMIT":              "1",
	} {
		t.Setenv(key, v)
	}
	for _, s := range []string{"", "TRACES_", "METRICS_", "LOGS_"} {
		t.Setenv("OTEL_EXPORTER_OTLP_"+s+"HEADERS", "x-leak=process")
		t.Setenv("OTEL_EXPORTER_OTLP_"+s+"PROTOCOL", "http/json")
		t.Setenv("OTEL_EXPORTER_OTLP_"+s+"COMPRESSION", "gzip")
		t.Setenv("OTEL_EXPORTER_OTLP_"+s+"TIMEOUT", "1")
		if s != "" {
			t.Setenv("OTEL_EXPORTER_OTLP_"+s+"ENDPOINT", decoy+"/"+strings.ToLower(s))
		}
	}
}

// The OTEL_* variables of the process's environment, which the SDK and the
// exporters read past the Host, change nothing Build exports: see the
// package doc for the two that do.
func TestBuildTakesNothingFromTheProcessEnvironment(t *testing.T) {
	decoy := newCollector(t, http.StatusOK)
	processEnv(t, decoy.URL)

	t.Run("the Host's exports", func(t *testing.T) {
		col := newSlowCollector(t, http.StatusOK, 50*time.Millisecond)
		h := humustest.NewHost()
		h.Env["OTEL_EXPORTER_OTLP_ENDPOINT"] = col.URL
		tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
		if err != nil {
			t.Fatal(err)
		}
		recordTwice(t, tel)
		body := scrape(t, tel)
		time.Sleep(300 * time.Millisecond)
		if got := col.paths(); len(got) != 0 {
			t.Errorf("exported %v before the shutdown, want nothing: the batches wait 1s (logs), 5s (spans) and 1 minute (metrics)", got)
		}
		shutdown(t, tel)

		if got := decoy.paths(); len(got) != 0 {
			t.Errorf("exported to the process's endpoint: %v", got)
		}
		if got := col.paths(); !slices.Equal(got, []string{"/v1/logs", "/v1/metrics", "/v1/traces"}) {
			t.Errorf("exported %v, want one batch of each signal at the shutdown", got)
		}
		for _, r := range col.requests() {
			if r.header.Get("X-Leak") != "" || r.header.Get("Content-Type") != "application/x-protobuf" || r.header.Get("Content-Encoding") != "" {
				t.Errorf("%s: headers %v, want protobuf, uncompressed, and no X-Leak", r.path, r.header)
			}
			switch r.path {
			case "/v1/traces":
				if got := spanResource(t, r.body)["service.name"]; got != "test-controller" {
					t.Errorf("the spans' service.name = %q, want test-controller", got)
				}
				checkSpans(t, r.body)
			case "/v1/metrics":
				checkCumulative(t, r.body)
			}
		}
		if s := h.Stderr(); strings.Count(s, " INFO hello shop/sessions attempt=1\n") != 2 || strings.Contains(s, "failed") {
			t.Errorf("stderr = %q, want two whole lines, and no failed export", s)
		}
		if !strings.Contains(body, `test_adds_total{otel_scope_name="test",otel_scope_schema_url="",otel_scope_version="",shard="1"} 1`) ||
			!strings.Contains(body, `test_adds_total{otel_scope_name="test",otel_scope_schema_url="",otel_scope_version="",shard="2"} 1`) {
			t.Errorf("/metrics doesn't have both of test.adds' series:\n%s", body)
		}
	})

	t.Run("no exports", func(t *testing.T) {
		h := humustest.NewHost()
		tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
		if err != nil {
			t.Fatal(err)
		}
		if tel.TracerProvider != nil {
			t.Error("a TracerProvider: the process's OTEL_EXPORTER_OTLP_ENDPOINT was taken")
		}
		recordTwice(t, tel)
		shutdown(t, tel)
		if got := decoy.paths(); len(got) != 0 {
			t.Errorf("exported to the process's endpoint: %v", got)
		}
		if d := h.Dials(); len(d) != 0 {
			t.Errorf("dialled %v, want nothing", d)
		}
	})
}

// recordTwice records two spans, two series of a counter, a histogram and
// two log records on tel.
func recordTwice(t *testing.T, tel humus.Telemetry) {
	t.Helper()
	if tel.TracerProvider != nil {
		for range 2 {
			_, span := tel.TracerProvider.Tracer("test").Start(t.Context(), "reconcile Memcached",
				trace.WithAttributes(attribute.String("k8s.namespace.name", "shop")))
			span.End()
		}
	}
	m := tel.MeterProvider.Meter("test")
	c, _ := m.Int64Counter("test.adds")
	c.Add(t.Context(), 1, metric.WithAttributes(attribute.String("shard", "1")))
	c.Add(t.Context(), 1, metric.WithAttributes(attribute.String("shard", "2")))
	hist, _ := m.Float64Histogram("test.duration", metric.WithUnit("s"))
	hist.Record(t.Context(), 0.1)
	log := slog.New(otelslog.NewHandler("test", otelslog.WithLoggerProvider(tel.LoggerProvider)))
	for range 2 {
		log.Info("hello", "k8s.namespace.name", "shop", "humus.kube.object.name", "sessions", "attempt", 1)
	}
}

// checkSpans fails t unless the trace export has two spans, each with its
// attribute.
func checkSpans(t *testing.T, body []byte) {
	t.Helper()
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		t.Fatalf("the trace export: %v", err)
	}
	var spans int
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				spans++
				if a := s.Attributes; len(a) != 1 || a[0].Key != "k8s.namespace.name" || a[0].Value.GetStringValue() != "shop" {
					t.Errorf("the span %s has attributes %v, want k8s.namespace.name shop", s.Name, a)
				}
			}
		}
	}
	if spans != 2 {
		t.Errorf("the trace export has %d spans, want 2", spans)
	}
}

// checkCumulative fails t unless the metric export's sums are cumulative
// and its histograms have explicit buckets, the SDK's defaults.
func checkCumulative(t *testing.T, body []byte) {
	t.Helper()
	var req colmetricspb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		t.Fatalf("the metric export: %v", err)
	}
	var seen int
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch m.Name {
				case "test.adds":
					seen++
					if m.GetSum().GetAggregationTemporality() != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
						t.Errorf("test.adds is %v, want cumulative", m.GetSum().GetAggregationTemporality())
					}
				case "test.duration":
					seen++
					if m.GetHistogram() == nil {
						t.Errorf("test.duration is %T, want a histogram of explicit buckets", m.GetData())
					}
				}
			}
		}
	}
	if seen != 2 {
		t.Errorf("the metric export has %d of test.adds and test.duration, want both", seen)
	}
}

// A Build that fails has started no goroutine, even where the failure is
// an exporter's, after the variables were read.
func TestBuildThatFailsStartsNothing(t *testing.T) {
	col := newCollector(t, http.StatusOK)
	h := humustest.NewHost()
	h.Env["OTEL_EXPORTER_OTLP_ENDPOINT"] = col.URL
	before := otelGoroutines()

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := telemetry.Build(ctx, h.Host(), "test-controller")
	if want := "telemetry: the OTLP trace exporter: context canceled"; err == nil || err.Error() != want {
		t.Fatalf("Build = %v, want %q", err, want)
	}
	if started := startedSince(before); len(started) != 0 {
		t.Errorf("the Build that failed started %d goroutines:\n%s", len(started), strings.Join(started, "\n\n"))
	}

	// The count tells: a Build that succeeds starts the SDK's.
	tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, tel)
	if started := startedSince(before); len(started) == 0 {
		t.Error("a Build that succeeded started no goroutine: the count can't tell")
	}
}

// otelGoroutines are the stacks of the goroutines running OpenTelemetry's
// code, by their first line, which has the goroutine's id.
func otelGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	out := map[string]string{}
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "go.opentelemetry.io/otel/") {
			id, _, _ := strings.Cut(g, " [")
			out[id] = g
		}
	}
	return out
}

// startedSince are the stacks of OpenTelemetry's goroutines that weren't
// running at before.
func startedSince(before map[string]string) []string {
	var started []string
	for id, g := range otelGoroutines() {
		if _, ok := before[id]; !ok {
			started = append(started, g)
		}
	}
	return started
}

// What the package doc says the process's environment still changes:
// the SDK merges its OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME into
// the resource, past the Host. The Host's attributes and Build's service
// win where both have a key; a key only the process has is added.
func TestBuildResourceHasTheProcessAttributes(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "team=process,zone=eu-1")
	t.Setenv("OTEL_SERVICE_NAME", "process-service")
	h := humustest.NewHost()
	h.Env["OTEL_RESOURCE_ATTRIBUTES"] = "team=host"
	tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, tel)
	body := scrape(t, tel)
	for _, want := range []string{`service_name="test-controller"`, `team="host"`, `zone="eu-1"`} {
		if !strings.Contains(body, want) {
			t.Errorf("target_info has no %s:\n%s", want, body)
		}
	}
}
