package humustest

import (
	"context"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/z5labs/humus"
)

// Telemetry is a humus.Telemetry whose spans, metric data and log records a
// test reads back. Every span and record is kept as it ends or is emitted,
// with no batching, so a test sees it at once; it is safe for concurrent
// use, and creates no goroutine, so it works inside a synctest bubble.
//
// Shutting its providers down, as humus.Run does once the App has stopped,
// keeps what they recorded readable: Spans and Records go on answering,
// and Metrics answers the data collected at the MeterProvider's shutdown.
type Telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	logs   *logRecorder
	tel    humus.Telemetry

	mu    sync.Mutex
	final *metricdata.ResourceMetrics // collected at shutdown
}

// NewTelemetry returns a Telemetry with the SDK's providers, recording into
// memory, and the W3C trace context propagator.
func NewTelemetry() *Telemetry {
	t := &Telemetry{
		spans:  tracetest.NewSpanRecorder(),
		reader: sdkmetric.NewManualReader(),
		logs:   &logRecorder{},
	}
	t.tel = humus.Telemetry{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(t.spans)),
		MeterProvider:  &meterProvider{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(t.reader)), t: t},
		LoggerProvider: sdklog.NewLoggerProvider(sdklog.WithProcessor(t.logs)),
		Propagator:     propagation.TraceContext{},
	}
	return t
}

// Telemetry returns the humus.Telemetry to hand the code under test.
func (t *Telemetry) Telemetry() humus.Telemetry { return t.tel }

// Spans returns the spans that have ended, in the order they ended.
func (t *Telemetry) Spans() []sdktrace.ReadOnlySpan { return t.spans.Ended() }

// Metrics collects the metric data recorded so far; once the MeterProvider
// is shut down, it returns the data collected then.
func (t *Telemetry) Metrics(ctx context.Context) (metricdata.ResourceMetrics, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.final != nil {
		return *t.final, nil
	}
	var rm metricdata.ResourceMetrics
	err := t.reader.Collect(ctx, &rm)
	return rm, err
}

// meterProvider is the SDK's, collecting the data one last time before it
// shuts down.
type meterProvider struct {
	*sdkmetric.MeterProvider
	t *Telemetry
}

func (p *meterProvider) Shutdown(ctx context.Context) error {
	p.t.mu.Lock()
	if p.t.final == nil {
		var rm metricdata.ResourceMetrics
		if err := p.t.reader.Collect(ctx, &rm); err == nil {
			p.t.final = &rm
		}
	}
	p.t.mu.Unlock()
	return p.MeterProvider.Shutdown(ctx)
}

// Records returns the log records emitted so far, in order.
func (t *Telemetry) Records() []sdklog.Record { return t.logs.records() }

type logRecorder struct {
	mu   sync.Mutex
	recs []sdklog.Record
}

func (r *logRecorder) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

func (r *logRecorder) OnEmit(_ context.Context, rec *sdklog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

func (r *logRecorder) records() []sdklog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

func (r *logRecorder) Shutdown(context.Context) error   { return nil }
func (r *logRecorder) ForceFlush(context.Context) error { return nil }
