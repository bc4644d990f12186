package humustest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
)

// record records a span, a counter's add and a log record with tel.
func record(ctx context.Context, tel humus.Telemetry) error {
	ctx, span := tel.TracerProvider.Tracer("test").Start(ctx, "reconcile")
	span.SetAttributes(attribute.String("k8s.namespace.name", "default"))
	defer span.End()

	counter, err := tel.MeterProvider.Meter("test").Int64Counter("humus.test.reconciles")
	if err != nil {
		return err
	}
	counter.Add(ctx, 3)

	var rec log.Record
	rec.SetSeverity(log.SeverityInfo)
	rec.SetBody(attribute.StringValue("reconciled"))
	tel.LoggerProvider.Logger("test").Emit(ctx, rec)
	return nil
}

func TestTelemetryRecordsSpansMetricsAndRecords(t *testing.T) {
	// In a bubble: the Telemetry starts no goroutine of its own.
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		if err := record(context.Background(), tel.Telemetry()); err != nil {
			t.Fatal(err)
		}

		spans := tel.Spans()
		if len(spans) != 1 || spans[0].Name() != "reconcile" {
			t.Fatalf("Spans() = %v, want the one span reconcile", spans)
		}
		if attrs := spans[0].Attributes(); len(attrs) != 1 || attrs[0] != attribute.String("k8s.namespace.name", "default") {
			t.Errorf("the span's attributes = %v, want k8s.namespace.name=default", attrs)
		}

		if got := counterValue(t, tel, "humus.test.reconciles"); got != 3 {
			t.Errorf("humus.test.reconciles = %d, want 3", got)
		}

		recs := tel.Records()
		if len(recs) != 1 || recs[0].Body().AsString() != "reconciled" || recs[0].Severity() != log.SeverityInfo {
			t.Fatalf("Records() = %v, want one INFO record reconciled", recs)
		}
		if recs[0].SpanID() != spans[0].SpanContext().SpanID() {
			t.Errorf("the record's span is %s, want the span it was emitted in, %s", recs[0].SpanID(), spans[0].SpanContext().SpanID())
		}

		carrier := propagation.MapCarrier{}
		tel.Telemetry().Propagator.Inject(context.Background(), carrier)
		if fields := tel.Telemetry().Propagator.Fields(); len(fields) == 0 || fields[0] != "traceparent" {
			t.Errorf("the Propagator's fields = %q, want W3C trace context's", fields)
		}
	})
}

func TestTelemetryKeepsWhatItRecordedAfterRunShutsItDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		tel := humustest.NewTelemetry()
		init := func(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
			return nil, record(ctx, s.Telemetry)
		}
		build := func(context.Context, humus.Host) (humus.Telemetry, error) { return tel.Telemetry(), nil }
		if code := humus.Run(t.Context(), h.Host(), init, humus.WithTelemetry(build)); code != 0 {
			t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, h.Stderr())
		}

		if got := counterValue(t, tel, "humus.test.reconciles"); got != 3 {
			t.Errorf("humus.test.reconciles after the shutdown = %d, want 3", got)
		}
		if got := len(tel.Spans()); got != 1 {
			t.Errorf("%d spans after the shutdown, want 1", got)
		}
		if got := len(tel.Records()); got != 1 {
			t.Errorf("%d records after the shutdown, want 1", got)
		}
	})
}

// counterValue is the sum of the Int64 counter name's data points.
func counterValue(t *testing.T, tel *humustest.Telemetry, name string) int64 {
	t.Helper()
	rm, err := tel.Metrics(context.Background())
	if err != nil {
		t.Fatalf("Metrics: %v", err)
	}
	found := errors.New("no such instrument")
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s's data is %T, want an int64 sum", name, m.Data)
			}
			found = nil
			for _, dp := range sum.DataPoints {
				total += dp.Value
			}
		}
	}
	if found != nil {
		t.Fatalf("Metrics has no %s", name)
	}
	return total
}
