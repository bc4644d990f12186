package humus_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/z5labs/humus"
)

func TestTelemetryResolvedFillsOnlyTheNilFields(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	got := humus.Telemetry{TracerProvider: tp}.Resolved()

	if got.TracerProvider != tp {
		t.Errorf("Resolved replaced a set TracerProvider with %T", got.TracerProvider)
	}
	if got.MeterProvider == nil || got.LoggerProvider == nil || got.Propagator == nil {
		t.Fatalf("Resolved() = %+v, want every field set", got)
	}
	if fields := got.Propagator.Fields(); len(fields) != 0 {
		t.Errorf("the zero Telemetry's Propagator carries %q, want nothing", fields)
	}

	// The zero value's providers record nothing, and can be used as they are.
	zero := humus.Telemetry{}.Resolved()
	_, span := zero.TracerProvider.Tracer("test").Start(context.Background(), "nothing")
	if span.SpanContext().IsValid() {
		t.Errorf("the zero Telemetry's span has a valid context %v, want a no-op span", span.SpanContext())
	}
	span.End()
	carrier := propagation.MapCarrier{}
	zero.Propagator.Inject(context.Background(), carrier)
	if len(carrier) != 0 {
		t.Errorf("the zero Telemetry's Propagator injected %v, want nothing", carrier)
	}
}
