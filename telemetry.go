package humus

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/log"
	lognoop "go.opentelemetry.io/otel/log/noop"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Telemetry is the OpenTelemetry providers an App records with. They are
// passed in: nothing in humus reads or sets an OpenTelemetry global.
//
// The zero value records nothing. A nil provider is a no-op one; a nil
// Propagator carries no context.
type Telemetry struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	LoggerProvider log.LoggerProvider
	Propagator     propagation.TextMapPropagator
}

// Resolved returns t with every nil provider replaced by a no-op one, and a
// nil Propagator by one that carries nothing, so each field can be used as
// it is.
func (t Telemetry) Resolved() Telemetry {
	if t.TracerProvider == nil {
		t.TracerProvider = tracenoop.NewTracerProvider()
	}
	if t.MeterProvider == nil {
		t.MeterProvider = metricnoop.NewMeterProvider()
	}
	if t.LoggerProvider == nil {
		t.LoggerProvider = lognoop.NewLoggerProvider()
	}
	if t.Propagator == nil {
		t.Propagator = propagation.NewCompositeTextMapPropagator()
	}
	return t
}

// shutdowner is a provider that can be flushed and stopped, as the SDK's
// are; no-op ones can't.
type shutdowner interface{ Shutdown(context.Context) error }

// shutsDown reports whether any of t's providers can be shut down.
func (t Telemetry) shutsDown() bool {
	for _, p := range t.providers() {
		if _, ok := p.(shutdowner); ok {
			return true
		}
	}
	return false
}

// shutdown flushes and stops every provider that can be, and returns every
// error they return, joined.
func (t Telemetry) shutdown(ctx context.Context) error {
	var errs []error
	for _, p := range t.providers() {
		if s, ok := p.(shutdowner); ok {
			if err := s.Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (t Telemetry) providers() []any {
	return []any{t.TracerProvider, t.MeterProvider, t.LoggerProvider}
}
