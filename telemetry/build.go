package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/z5labs/humus"
)

// Option configures Build.
type Option func(*options)

type options struct {
	verbosity int
}

// New returns the function humus.WithTelemetry takes, which calls Build
// with the App's Host, service and opts:
//
//	humus.Main(app.Init, humus.WithTelemetry(telemetry.New("memcached-controller")))
func New(service string, opts ...Option) func(ctx context.Context, h humus.Host) (humus.Telemetry, error) {
	return func(ctx context.Context, h humus.Host) (humus.Telemetry, error) {
		return Build(ctx, h, service, opts...)
	}
}

// Build returns the Telemetry of an App named service, read from h: its
// log records as lines on h.Stderr, its metrics for MetricsHandler's
// handler, and OTLP exports where the OTEL_* variables h.LookupEnv answers
// ask for them, keeping the log records LOG_VERBOSITY (or opts' Verbosity)
// says; see the package doc for the whole of it. service is
// service.name, unless OTEL_SERVICE_NAME, or service.name in
// OTEL_RESOURCE_ATTRIBUTES, names another.
//
// Every bad variable is named in the one error Build returns, and a Build
// that fails starts nothing. humus.Run shuts the providers down, so
// flushing them, once the App's Services have ended; a program that calls
// Build itself shuts down each provider that has a
// Shutdown(context.Context) error method.
func Build(ctx context.Context, h humus.Host, service string, opts ...Option) (humus.Telemetry, error) {
	o := options{verbosity: DefaultVerbosity}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := checkHost(h); err != nil {
		return humus.Telemetry{}, err
	}
	c, err := readConfig(h, service)
	if err != nil {
		return humus.Telemetry{}, err
	}
	if c.hasVerbosity {
		Verbosity(c.verbosity)(&o)
	}

	// What can fail comes first, before the SDK's batch processors and
	// periodic reader, which start goroutines: a Build that fails leaves
	// nothing running.
	prom, metricsHandler, err := newPrometheus()
	if err != nil {
		return humus.Telemetry{}, err
	}
	out := &lineWriter{w: h.Stderr}
	exp, err := newExporters(ctx, h, c, out)
	if err != nil {
		return humus.Telemetry{}, err
	}
	res := newResource(c)
	tel := humus.Telemetry{
		MeterProvider: &meterProvider{
			MeterProvider: newMeterProvider(res, prom, exp.metrics),
			metrics:       metricsHandler,
		},
		LoggerProvider: newLoggerProvider(res, out, exp.logs, minSeverity(o.verbosity)),
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	if exp.spans != nil {
		tel.TracerProvider = newTracerProvider(res, exp.spans)
	}
	return tel, nil
}

// checkHost returns one error naming every field of h that Build uses and
// that isn't set.
func checkHost(h humus.Host) error {
	var errs []error
	if h.LookupEnv == nil {
		errs = append(errs, errors.New("telemetry: Host.LookupEnv is nil"))
	}
	if h.Dial == nil {
		errs = append(errs, errors.New("telemetry: Host.Dial is nil"))
	}
	if h.Stderr == nil {
		errs = append(errs, errors.New("telemetry: Host.Stderr is nil"))
	}
	return errors.Join(errs...)
}

// newResource is service.name, the attributes of OTEL_RESOURCE_ATTRIBUTES,
// and the SDK's own, telemetry.sdk.*.
func newResource(c config) *resource.Resource {
	attrs := append([]attribute.KeyValue{
		attribute.String("telemetry.sdk.language", "go"),
		attribute.String("telemetry.sdk.name", "opentelemetry"),
		attribute.String("telemetry.sdk.version", sdk.Version()),
	}, c.attrs...)
	return resource.NewSchemaless(append(attrs, attribute.String("service.name", c.service))...)
}

// The SDK's defaults follow, each passed as an option: without it, the SDK
// would take it from an OTEL_* variable of the process's environment.

func newLoggerProvider(res *resource.Resource, out *lineWriter, exp sdklog.Exporter, floor log.Severity) *sdklog.LoggerProvider {
	opts := []sdklog.LoggerProviderOption{
		sdklog.WithResource(res),
		sdklog.WithAttributeCountLimit(128),
		sdklog.WithAttributeValueLengthLimit(-1),
		sdklog.WithProcessor(severityFloor{Processor: &lineProcessor{out: out}, min: floor}),
	}
	if exp != nil {
		batch := sdklog.NewBatchProcessor(exp,
			sdklog.WithMaxQueueSize(2048),
			sdklog.WithExportInterval(time.Second),
			sdklog.WithExportTimeout(30*time.Second),
			sdklog.WithExportMaxBatchSize(512),
		)
		opts = append(opts, sdklog.WithProcessor(severityFloor{Processor: batch, min: floor}))
	}
	return sdklog.NewLoggerProvider(opts...)
}

func newMeterProvider(res *resource.Resource, prom sdkmetric.Reader, exp sdkmetric.Exporter) *sdkmetric.MeterProvider {
	opts := []sdkmetric.Option{
		sdkmetric.WithResource(res),
		sdkmetric.WithCardinalityLimit(2000),
		sdkmetric.WithExemplarFilter(exemplar.TraceBasedFilter),
		sdkmetric.WithReader(prom),
	}
	if exp != nil {
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp,
			sdkmetric.WithInterval(time.Minute),
			sdkmetric.WithTimeout(30*time.Second),
		)))
	}
	return sdkmetric.NewMeterProvider(opts...)
}

func newTracerProvider(res *resource.Resource, exp sdktrace.SpanExporter) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{
			AttributeValueLengthLimit:   sdktrace.DefaultAttributeValueLengthLimit,
			AttributeValueDepthLimit:    sdktrace.DefaultAttributeValueDepthLimit,
			AttributeCountLimit:         sdktrace.DefaultAttributeCountLimit,
			EventCountLimit:             sdktrace.DefaultEventCountLimit,
			LinkCountLimit:              sdktrace.DefaultLinkCountLimit,
			AttributePerEventCountLimit: sdktrace.DefaultAttributePerEventCountLimit,
			AttributePerLinkCountLimit:  sdktrace.DefaultAttributePerLinkCountLimit,
		}),
		sdktrace.WithBatcher(exp,
			sdktrace.WithMaxQueueSize(sdktrace.DefaultMaxQueueSize),
			sdktrace.WithMaxExportBatchSize(sdktrace.DefaultMaxExportBatchSize),
			sdktrace.WithBatchTimeout(sdktrace.DefaultScheduleDelay*time.Millisecond),
			sdktrace.WithExportTimeout(sdktrace.DefaultExportTimeout*time.Millisecond),
		),
	)
}

// meterProvider is the SDK's, with the handler that serves its metrics in
// Prometheus' text format, which MetricsHandler finds.
type meterProvider struct {
	*sdkmetric.MeterProvider
	metrics http.Handler
}

// newPrometheus returns the Prometheus exporter, a reader of the
// MeterProvider's metrics, and the handler that serves what it reads.
func newPrometheus() (*otelprom.Exporter, http.Handler, error) {
	// A registry of its own, never Prometheus' global one.
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		// Prometheus' names, such as humus_kube_controller_queue_adds_total,
		// whatever the global name validation scheme of
		// prometheus/common/model says.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: the Prometheus exporter: %w", err)
	}
	return exp, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}

// MetricsHandler returns the handler that serves the metrics of t's
// MeterProvider in Prometheus' text format, and true, when t is Build's;
// and nil and false otherwise, such as for a test's Telemetry. An App
// serves it beside its probes:
//
//	if h, ok := telemetry.MetricsHandler(s.Telemetry); ok {
//		opts = append(opts, health.Handle("GET /metrics", h))
//	}
func MetricsHandler(t humus.Telemetry) (http.Handler, bool) {
	mp, ok := t.MeterProvider.(*meterProvider)
	if !ok || mp == nil {
		return nil, false
	}
	return mp.metrics, true
}
