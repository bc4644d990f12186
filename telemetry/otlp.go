package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/z5labs/humus"
)

// exportTimeout is how long one export request may take, the exporters'
// own default.
const exportTimeout = 10 * time.Second

// exporters are the OTLP exporters of the signals exported; nil for the
// others.
type exporters struct {
	spans   sdktrace.SpanExporter
	metrics sdkmetric.Exporter
	logs    sdklog.Exporter
}

// newExporters returns the exporters c's targets ask for, dialling through
// h, and reporting a failed export on out. It starts no goroutine.
//
// Each exporter reads OpenTelemetry's OTEL_EXPORTER_OTLP_* variables from
// the process's environment itself, and takes what they say unless an
// option says otherwise; so every setting a variable can change is passed
// here, and none falls back to the process's environment. See the package
// doc for what still reads it.
func newExporters(ctx context.Context, h humus.Host, c config, out *lineWriter) (exporters, error) {
	var e exporters
	client := httpClient(h)
	if t := c.otlp[traces]; t != nil {
		exp, err := otlptracehttp.New(ctx,
			otlptracehttp.WithEndpointURL(t.url),
			otlptracehttp.WithHeaders(headers(t)),
			otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf),
			otlptracehttp.WithCompression(otlptracehttp.NoCompression),
			otlptracehttp.WithTimeout(exportTimeout),
			otlptracehttp.WithTLSClientConfig(nil),
			otlptracehttp.WithHTTPClient(client),
		)
		if err != nil {
			return exporters{}, fmt.Errorf("telemetry: the OTLP trace exporter: %w", err)
		}
		e.spans = spanExporter{SpanExporter: exp, report: failures(out, traces, t.url)}
	}
	if t := c.otlp[metrics]; t != nil {
		exp, err := otlpmetrichttp.New(ctx,
			otlpmetrichttp.WithEndpointURL(t.url),
			otlpmetrichttp.WithHeaders(headers(t)),
			otlpmetrichttp.WithCompression(otlpmetrichttp.NoCompression),
			otlpmetrichttp.WithTimeout(exportTimeout),
			otlpmetrichttp.WithTLSClientConfig(nil),
			otlpmetrichttp.WithHTTPClient(client),
			otlpmetrichttp.WithTemporalitySelector(sdkmetric.DefaultTemporalitySelector),
			otlpmetrichttp.WithAggregationSelector(sdkmetric.DefaultAggregationSelector),
		)
		if err != nil {
			return exporters{}, fmt.Errorf("telemetry: the OTLP metric exporter: %w", err)
		}
		e.metrics = metricExporter{Exporter: exp, report: failures(out, metrics, t.url)}
	}
	if t := c.otlp[logs]; t != nil {
		exp, err := otlploghttp.New(ctx,
			otlploghttp.WithEndpointURL(t.url),
			otlploghttp.WithHeaders(headers(t)),
			otlploghttp.WithCompression(otlploghttp.NoCompression),
			otlploghttp.WithTimeout(exportTimeout),
			otlploghttp.WithTLSClientConfig(nil),
			otlploghttp.WithHTTPClient(client),
		)
		if err != nil {
			return exporters{}, fmt.Errorf("telemetry: the OTLP log exporter: %w", err)
		}
		e.logs = logExporter{Exporter: exp, report: failures(out, logs, t.url)}
	}
	return e, nil
}

// headers is t's headers, never nil: a nil map would leave the exporter
// free to take OTEL_EXPORTER_OTLP_HEADERS from the process's environment.
func headers(t *target) map[string]string {
	if t.headers == nil {
		return map[string]string{}
	}
	return t.headers
}

// httpClient is the exporters' client: it dials through h, and takes no
// proxy from the process's environment.
func httpClient(h humus.Host) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         h.Dial,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        10,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		},
		Timeout: exportTimeout,
	}
}

// failures returns the function that reports a failed export of s to url
// as an ERROR line on out, and returns nil. The SDK hands an export's error
// to OpenTelemetry's global error handler, which writes to the process's
// stderr, not the Host's; the data is dropped either way.
func failures(out *lineWriter, s signal, url string) func(error) error {
	return func(err error) error {
		if err == nil {
			return nil
		}
		attrs := []attribute.KeyValue{attribute.String("url", url), attribute.String("error", err.Error())}
		out.write(formatLine(time.Now(), log.SeverityError1, "telemetry: exporting "+s.String()+" failed", slices.Values(attrs)))
		return nil
	}
}

type spanExporter struct {
	sdktrace.SpanExporter
	report func(error) error
}

func (e spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	return e.report(e.SpanExporter.ExportSpans(ctx, spans))
}

type metricExporter struct {
	sdkmetric.Exporter
	report func(error) error
}

func (e metricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	return e.report(e.Exporter.Export(ctx, rm))
}

type logExporter struct {
	sdklog.Exporter
	report func(error) error
}

func (e logExporter) Export(ctx context.Context, records []sdklog.Record) error {
	return e.report(e.Exporter.Export(ctx, records))
}
