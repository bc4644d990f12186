package app

import (
	"context"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/telemetry"
)

// BuildTelemetry is the App's telemetry, for humus.WithTelemetry:
// telemetry.Build's, named Name. Its log records are lines on the Host's
// stderr, its metrics are served at /metrics beside the probes (see Init),
// and with OTEL_EXPORTER_OTLP_ENDPOINT set, traces, metrics and logs are
// exported over OTLP/HTTP too.
func BuildTelemetry(ctx context.Context, h humus.Host) (humus.Telemetry, error) {
	return telemetry.Build(ctx, h, Name)
}
