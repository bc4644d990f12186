package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// DefaultVerbosity is the Verbosity Build keeps without the option or
// LOG_VERBOSITY: V(2),
// which Kubernetes' logging conventions call "useful steady state
// information about the service", the level they recommend for most
// systems. It keeps INFO and above, and client-go's V(1) and V(2): the
// reflector's, the cache's and leader election's messages of note. It
// drops slog's Debug (V(4)) and client-go's debugging levels, such as
// leader election's V(5) line for every renewal of its Lease.
const DefaultVerbosity = 2

// Verbosity sets which log records Build's LoggerProvider takes: those of
// client-go's V(v) and below, and the same for every other record by its
// severity, overriding the default of DefaultVerbosity (2). The Host's
// LOG_VERBOSITY, when set, overrides both: Verbosity is the program's
// choice, the variable its Deployment's.
//
// client-go logs through logr, and the kube module hands its records to
// slog, so V(n) is slog's level -n: slog's Info is V(0), and its Debug
// V(4). The OpenTelemetry slog bridge adds 9 to a level to make its
// severity, so V(v) keeps the records of severity 9-v and above:
//
//	Verbosity(0)   INFO and above: slog's Info, Warn and Error, client-go's V(0)
//	Verbosity(2)   and client-go's V(1) and V(2) (DEBUG4 and DEBUG3): the default
//	Verbosity(4)   and slog's Debug, V(4) (DEBUG)
//	Verbosity(5)   and V(5) (TRACE4), such as leader election's line for each
//	               renewal of its Lease
//	Verbosity(8)   and V(8) (TRACE1), such as client-go's request and
//	               response bodies, cut at 1 KiB
//	Verbosity(10)  and V(9) and V(10), with whole bodies, which the bridge
//	               gives a severity below any OpenTelemetry defines, as a
//	               record without a severity has: they show as TRACE
//
// A negative v keeps less: Verbosity(-4) keeps WARN and above, and
// Verbosity(-8) ERROR and above. v is taken between -24 and 24, where
// every severity is kept or none.
//
// The Verbosity applies to every record the LoggerProvider takes: the
// lines on the Host's stderr and the OTLP export of logs alike. The kube
// module asks the LoggerProvider before it hands it a record of client-go's
// below V(2), and this one answers by its Verbosity, so client-go's
// debugging levels reach it too when v is above 2.
func Verbosity(v int) Option {
	return func(o *options) { o.verbosity = min(max(v, -24), 24) }
}

// minSeverity is the lowest severity Verbosity(v) keeps.
func minSeverity(v int) log.Severity {
	return log.Severity(int(log.SeverityInfo1) - v)
}

// severityFloor hands its Processor only the records of min and above.
type severityFloor struct {
	sdklog.Processor
	min log.Severity
}

func (f severityFloor) Enabled(ctx context.Context, p sdklog.EnabledParameters) bool {
	return p.Severity >= f.min && f.Processor.Enabled(ctx, p)
}

// OnEmit drops a record below min: the SDK calls a Processor's OnEmit
// whatever its Enabled said.
func (f severityFloor) OnEmit(ctx context.Context, r *sdklog.Record) error {
	if r.Severity() < f.min {
		return nil
	}
	return f.Processor.OnEmit(ctx, r)
}
