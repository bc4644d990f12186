package app

import (
	"context"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/example/internal/podtel"
)

// BuildTelemetry is the App's telemetry, for humus.WithTelemetry; humus
// calls it with the Host before Init, and shuts its providers down, so
// flushing them, once the App's Services have ended. With no
// configuration, every log record is a line on the Host's stderr: its
// time, level and message, the object's namespace/name, and the error.
// The metrics are served at /metrics on PROBES_ADDR (":8081" unless set),
// beside the probes, in Prometheus' text format, when Init finds this
// MeterProvider in its Setup. With OTEL_EXPORTER_OTLP_ENDPOINT set, traces,
// metrics and logs are exported over OTLP/HTTP too. See podtel.Build.
func BuildTelemetry(ctx context.Context, h humus.Host) (humus.Telemetry, error) {
	return podtel.Build(ctx, h, Name)
}
