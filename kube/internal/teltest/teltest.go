// Package teltest reads what a humustest.Telemetry recorded, for the
// tests of kube and of its engine (kube/internal/control) alike: the
// spans by name, the log records by body, their attributes as strings,
// and the metrics of kube's instrumentation scope by name. It imports
// nothing of kube, so the engine's own tests can import it.
package teltest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/z5labs/humus/humustest"
)

// Scope is kube's instrumentation scope, whose metrics Instruments returns.
const Scope = "github.com/z5labs/humus/kube"

// SpansNamed returns the ended spans named name, in the order they ended.
func SpansNamed(tel *humustest.Telemetry, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.Spans() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// SpanAttrs returns s's attributes, each as its value's string.
func SpanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	return AttrStrings(s.Attributes())
}

// AttrStrings returns kvs by key, each as its value's string.
func AttrStrings(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// RecordsWithBody returns the log records whose body is body.
func RecordsWithBody(tel *humustest.Telemetry, body string) []sdklog.Record {
	var out []sdklog.Record
	for _, r := range tel.Records() {
		if r.Body().AsString() == body {
			out = append(out, r)
		}
	}
	return out
}

// RecordAttrs returns r's attributes, each as its value's string.
func RecordAttrs(r sdklog.Record) map[string]string {
	m := map[string]string{}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		m[string(kv.Key)] = kv.Value.String()
		return true
	})
	return m
}

// Instruments returns the metrics tel collected under kube's scope, by
// name.
func Instruments(t testing.TB, tel *humustest.Telemetry) map[string]metricdata.Metrics {
	t.Helper()
	rm, err := tel.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != Scope {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// HistogramPoints returns the Float64 histogram name's data points in ms;
// none when nothing was recorded.
func HistogramPoints(t testing.TB, ms map[string]metricdata.Metrics, name string) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return nil
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a metricdata.Histogram[float64]", name, m.Data)
	}
	return h.DataPoints
}

// SpanNames are the names of tel's ended spans, in the order they ended.
func SpanNames(tel *humustest.Telemetry) []string {
	var names []string
	for _, s := range tel.Spans() {
		names = append(names, s.Name())
	}
	return names
}

// HistogramBy returns the Float64 histogram name's data points in tel by
// their value of the attribute key, failing t on a point without it or
// two with one value.
func HistogramBy(t testing.TB, tel *humustest.Telemetry, name, key string) map[string]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	out := map[string]metricdata.HistogramDataPoint[float64]{}
	for _, dp := range HistogramPoints(t, Instruments(t, tel), name) {
		v, ok := dp.Attributes.Value(attribute.Key(key))
		if !ok {
			t.Fatalf("a %s point has no %s: %v", name, key, dp.Attributes.ToSlice())
		}
		if _, dup := out[v.AsString()]; dup {
			t.Fatalf("two %s points of %s %s", name, key, v.AsString())
		}
		out[v.AsString()] = dp
	}
	return out
}

// CheckAttr fails t unless set, metric name's point's, has key = want.
func CheckAttr(t testing.TB, name string, set attribute.Set, key, want string) {
	t.Helper()
	if v, ok := set.Value(attribute.Key(key)); !ok || v.AsString() != want {
		t.Errorf("%s's point has %s = %q, want %s", name, key, v.String(), want)
	}
}
