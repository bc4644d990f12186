// Package podtel is the examples' shared telemetry: the OpenTelemetry
// providers an App's BuildTelemetry returns, built from what its Host
// gives it, and the handler that serves their metrics to Prometheus. Like
// podenv, an operator author who copies an example copies this package
// with it.
//
// With no configuration, [Build] writes every log record to the Host's
// stderr, one line a record (see [NewLineProcessor]), and keeps the
// metrics for [Handler]'s handler to serve in Prometheus' text format,
// which the examples serve at /metrics on the probes' Service, with
// health.Handle. With OTEL_EXPORTER_OTLP_ENDPOINT set, it exports traces, metrics
// and logs over OTLP/HTTP too.
//
// Nothing here reads or sets an OpenTelemetry or Prometheus global: the
// providers are the App's, through humus.Setup, and the metrics have a
// Prometheus registry of their own.
package podtel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/z5labs/humus"
)

// Build returns the Telemetry of an App named service, from h:
//
//   - a LoggerProvider writing every record to h.Stderr, one line a record
//     (NewLineProcessor);
//   - a MeterProvider, a *MeterProvider, whose metrics Handler's handler
//     serves in Prometheus' text format, from a registry of its own;
//   - with OTEL_EXPORTER_OTLP_ENDPOINT set, such as
//     "http://otel-collector:4318", a TracerProvider, and OTLP/HTTP exports of
//     the traces, metrics and logs to its /v1/traces, /v1/metrics and
//     /v1/logs, dialled through h.Dial; without it, no traces are recorded;
//   - the W3C trace context and baggage propagator.
//
// The resource is service.name, OTEL_SERVICE_NAME when it is set and
// service otherwise. humus shuts every provider down, and so flushes it,
// once the App's Services have ended.
func Build(ctx context.Context, h humus.Host, service string) (humus.Telemetry, error) {
	endpoint, err := otlpEndpoint(h)
	if err != nil {
		return humus.Telemetry{}, err
	}
	if name, ok := h.LookupEnv("OTEL_SERVICE_NAME"); ok && name != "" {
		service = name
	}
	res := resource.NewSchemaless(attribute.String("service.name", service))

	// What can fail comes first, before anything that starts a goroutine:
	// a Build that fails leaves nothing running.
	prom, metricsHandler, err := newPrometheus()
	if err != nil {
		return humus.Telemetry{}, err
	}

	logOpts := []sdklog.LoggerProviderOption{
		sdklog.WithResource(res),
		sdklog.WithProcessor(NewLineProcessor(h.Stderr)),
	}
	metricOpts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	var traceOpts []sdktrace.TracerProviderOption

	if endpoint != "" {
		client := httpClient(h)
		logs, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(endpoint+"/v1/logs"), otlploghttp.WithHTTPClient(client))
		if err != nil {
			return humus.Telemetry{}, fmt.Errorf("podtel: the OTLP log exporter: %w", err)
		}
		metrics, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint+"/v1/metrics"), otlpmetrichttp.WithHTTPClient(client))
		if err != nil {
			return humus.Telemetry{}, fmt.Errorf("podtel: the OTLP metric exporter: %w", err)
		}
		traces, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"), otlptracehttp.WithHTTPClient(client))
		if err != nil {
			return humus.Telemetry{}, fmt.Errorf("podtel: the OTLP trace exporter: %w", err)
		}
		logOpts = append(logOpts, sdklog.WithProcessor(sdklog.NewBatchProcessor(logs)))
		metricOpts = append(metricOpts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)))
		traceOpts = append(traceOpts, sdktrace.WithResource(res), sdktrace.WithBatcher(traces))
	}

	tel := humus.Telemetry{
		MeterProvider: &MeterProvider{
			MeterProvider: sdkmetric.NewMeterProvider(append(metricOpts, sdkmetric.WithReader(prom))...),
			metrics:       metricsHandler,
		},
		LoggerProvider: sdklog.NewLoggerProvider(logOpts...),
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	if traceOpts != nil {
		tel.TracerProvider = sdktrace.NewTracerProvider(traceOpts...)
	}
	return tel, nil
}

// otlpEndpoint is OTEL_EXPORTER_OTLP_ENDPOINT, read through h, without a
// trailing slash, or "" when it is unset or empty.
func otlpEndpoint(h humus.Host) (string, error) {
	v, ok := h.LookupEnv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if !ok || v == "" {
		return "", nil
	}
	u, err := url.Parse(v)
	if err == nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
		err = errors.New("want an http or https URL, such as http://otel-collector:4318")
	}
	if err != nil {
		return "", fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q: %w", v, err)
	}
	return strings.TrimSuffix(v, "/"), nil
}

// httpClient is the OTLP exporters' client: it dials through h, and takes
// no proxy from the process's environment.
func httpClient(h humus.Host) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         h.Dial,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        10,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		},
		Timeout: 10 * time.Second,
	}
}

// MeterProvider is the SDK's, with the handler that serves its metrics in
// Prometheus' text format. It is how the metrics reach Init: Build returns
// it in the Telemetry, and Init finds it in its Setup, with Handler.
type MeterProvider struct {
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
		return nil, nil, fmt.Errorf("podtel: the Prometheus exporter: %w", err)
	}
	return exp, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}

// Handler returns the handler that serves the metrics of t's MeterProvider
// in Prometheus' text format, and true, when it is a *MeterProvider, as
// Build's is; and nil and false otherwise, such as for a test's Telemetry.
func Handler(t humus.Telemetry) (http.Handler, bool) {
	mp, ok := t.MeterProvider.(*MeterProvider)
	if !ok || mp == nil {
		return nil, false
	}
	return mp.metrics, true
}
