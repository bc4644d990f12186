package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/telemetry"
)

// An App's telemetry, for humus.WithTelemetry: here on humustest's Host,
// whose stderr the example prints, each line without its time.
func ExampleNew() {
	h := humustest.NewHost()
	init := func(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
		log := slog.New(otelslog.NewHandler("example", otelslog.WithLoggerProvider(s.Telemetry.LoggerProvider)))
		log.Warn("reconcile failed",
			slog.String("k8s.namespace.name", "shop"),
			slog.String("humus.kube.object.name", "sessions"),
			slog.String("error", "the server is down"))
		log.Debug("kept from V(4) up")
		return nil, nil // no Service: the App stops at once
	}
	code := humus.Run(context.Background(), h.Host(), init, humus.WithTelemetry(telemetry.New("memcached-controller")))
	fmt.Println("exit code", code)
	printUntimed(h.Stderr())
	// Output:
	// exit code 0
	// WARN reconcile failed shop/sessions error="the server is down"
}

// The metrics, served as an App's Init serves them at /metrics beside its
// probes, with health.Handle("GET /metrics", h).
func ExampleMetricsHandler() {
	tel, err := telemetry.Build(context.Background(), humustest.NewHost().Host(), "memcached-controller")
	if err != nil {
		fmt.Println(err)
		return
	}
	adds, _ := tel.MeterProvider.Meter("example").Int64Counter("memcached.reconciles")
	adds.Add(context.Background(), 3)

	h, ok := telemetry.MetricsHandler(tel)
	fmt.Println("served:", ok)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, "memcached_") {
			fmt.Print(line)
		}
	}
	// Output:
	// served: true
	// memcached_reconciles_total{otel_scope_name="example",otel_scope_schema_url="",otel_scope_version=""} 3
}

// client-go's V(5), such as leader election's line for each renewal of
// its Lease, reaches stderr from Verbosity(5) up.
func ExampleVerbosity() {
	h := humustest.NewHost()
	tel, err := telemetry.Build(context.Background(), h.Host(), "memcached-controller", telemetry.Verbosity(5))
	if err != nil {
		fmt.Println(err)
		return
	}
	// As the kube module hands client-go's records to the LoggerProvider.
	log := logr.FromSlogHandler(otelslog.NewHandler("example", otelslog.WithLoggerProvider(tel.LoggerProvider)))
	log.V(5).Info("Successfully renewed lease", "lock", "kube-system/memcached-controller")
	log.V(6).Info("not kept at Verbosity(5)")
	printUntimed(h.Stderr())
	// Output:
	// TRACE Successfully renewed lease lock=kube-system/memcached-controller
}

// A record, as a line on stderr.
func ExampleNewLineProcessor() {
	var out strings.Builder
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(telemetry.NewLineProcessor(&out)))

	var r log.Record
	r.SetTimestamp(time.Date(2026, 12, 3, 18, 30, 0, 123e6, time.UTC))
	r.SetSeverity(log.SeverityError)
	r.SetBody(attribute.StringValue("reconcile panicked"))
	r.AddAttributes(
		attribute.String("k8s.namespace.name", "shop"),
		attribute.String("humus.kube.object.name", "sessions"),
		attribute.String("exception.message", "index out of range [3] with length 3"),
		attribute.String("exception.stacktrace", "goroutine 7:\n\tapp/reconciler.go:42"),
	)
	lp.Logger("example").Emit(context.Background(), r)
	fmt.Print(out.String())
	// Output:
	// 2026-12-03T18:30:00.123Z ERROR reconcile panicked shop/sessions exception.message="index out of range [3] with length 3" exception.stacktrace="goroutine 7:\n\tapp/reconciler.go:42"
}

// printUntimed prints each line of s without its first field, the time.
func printUntimed(s string) {
	for line := range strings.Lines(s) {
		_, rest, _ := strings.Cut(line, " ")
		fmt.Print(rest)
	}
}
