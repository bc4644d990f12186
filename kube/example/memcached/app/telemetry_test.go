package app_test

import (
	"context"
	"log/slog"
	"regexp"
	"testing"

	"go.opentelemetry.io/contrib/bridges/otelslog"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/example/internal/podtel"
	"github.com/z5labs/humus/kube/example/memcached/app"
)

// With no configuration, BuildTelemetry's records are lines on the Host's
// stderr, its metrics are for /metrics, and it records no traces.
func TestBuildTelemetry(t *testing.T) {
	h := humustest.NewHost()
	tel, err := app.BuildTelemetry(t.Context(), h.Host())
	if err != nil {
		t.Fatalf("BuildTelemetry: %v", err)
	}
	defer func() {
		if err := tel.MeterProvider.(*podtel.MeterProvider).Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()

	log := slog.New(otelslog.NewHandler("test", otelslog.WithLoggerProvider(tel.LoggerProvider)))
	log.Warn("reconcile failed",
		slog.String("k8s.namespace.name", "shop"), slog.String("humus.kube.object.name", "sessions"),
		slog.String("error", "the server is down"))

	want := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARN reconcile failed shop/sessions error="the server is down"\n$`)
	if got := h.Stderr(); !want.MatchString(got) {
		t.Errorf("stderr = %q, want it to match %s", got, want)
	}
	if _, ok := podtel.Handler(tel); !ok {
		t.Error("no metrics handler: Init would serve no /metrics")
	}
	if tel.TracerProvider != nil {
		t.Error("a TracerProvider without OTEL_EXPORTER_OTLP_ENDPOINT")
	}
}
