package telemetry_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/z5labs/humus/telemetry"
)

func TestLineProcessor(t *testing.T) {
	var out strings.Builder
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(telemetry.NewLineProcessor(&out)))
	log := slog.New(otelslog.NewHandler("test", otelslog.WithLoggerProvider(lp)))

	// As the kube module records a failed reconcile, and a panic's stack.
	log.Warn("reconcile failed",
		slog.String("k8s.namespace.name", "default"),
		slog.String("humus.kube.object.name", "sessions"),
		slog.String("error", `applying "sessions": the server is down`))
	log.Info("Successfully acquired lease")
	log.Error("reconcile panicked",
		slog.String("humus.kube.object.name", "shop"),
		slog.String("exception.stacktrace", "goroutine 1:\n\tmain.go:12"),
		slog.Int("attempt", 3))
	log.Info("namespace only", slog.String("k8s.namespace.name", "kube system"), slog.String("empty", ""))
	log.Info("a message\non two lines", slog.String("a=b", "c"))

	lines := strings.Split(out.String(), "\n")
	const ts = `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z `
	want := []string{
		ts + `WARN reconcile failed default/sessions error="applying \\"sessions\\": the server is down"$`,
		ts + `INFO Successfully acquired lease$`,
		ts + `ERROR reconcile panicked shop exception.stacktrace="goroutine 1:\\n\\tmain.go:12" attempt=3$`,
		ts + `INFO namespace only k8s.namespace.name="kube system" empty=""$`,
		ts + `INFO "a message\\non two lines" "a=b"=c$`,
		`^$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d: one a record:\n%s", len(lines)-1, len(want)-1, out.String())
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d = %q, want it to match %s", i+1, lines[i], re)
		}
	}
	// The time is UTC, and now.
	stamp, err := time.Parse(time.RFC3339Nano, strings.Fields(lines[0])[0])
	if err != nil || time.Since(stamp).Abs() > time.Minute {
		t.Errorf("the time %q is not now: %v", strings.Fields(lines[0])[0], err)
	}
}

// Each severity shows as its level, without OpenTelemetry's finer steps;
// a record without a severity shows as TRACE, as the Verbosity counts it.
func TestLineProcessorLevels(t *testing.T) {
	var out strings.Builder
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(telemetry.NewLineProcessor(&out)))
	logger := lp.Logger("test")
	at := time.Date(2026, 12, 3, 18, 30, 0, 123456789, time.FixedZone("CET", 3600))
	for _, s := range []log.Severity{
		log.SeverityUndefined, log.SeverityTrace1, log.SeverityTrace4, log.SeverityDebug1, log.SeverityDebug4,
		log.SeverityInfo1, log.SeverityInfo3, log.SeverityWarn1, log.SeverityError2, log.SeverityFatal4, -1,
	} {
		var r log.Record
		r.SetTimestamp(at)
		r.SetSeverity(s)
		r.SetBody(attribute.StringValue(s.String()))
		logger.Emit(context.Background(), r)
	}
	want := strings.Join([]string{
		"2026-12-03T17:30:00.123Z TRACE UNDEFINED",
		"2026-12-03T17:30:00.123Z TRACE TRACE",
		"2026-12-03T17:30:00.123Z TRACE TRACE4",
		"2026-12-03T17:30:00.123Z DEBUG DEBUG",
		"2026-12-03T17:30:00.123Z DEBUG DEBUG4",
		"2026-12-03T17:30:00.123Z INFO INFO",
		"2026-12-03T17:30:00.123Z INFO INFO3",
		"2026-12-03T17:30:00.123Z WARN WARN",
		"2026-12-03T17:30:00.123Z ERROR ERROR2",
		"2026-12-03T17:30:00.123Z FATAL FATAL4",
		"2026-12-03T17:30:00.123Z TRACE Severity(-1)",
	}, "\n") + "\n"
	if got := out.String(); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// Records emitted at once are written one at a time, a whole line each.
func TestLineProcessorWritesWholeLines(t *testing.T) {
	w := &overlapWriter{}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(telemetry.NewLineProcessor(w)))
	log := slog.New(otelslog.NewHandler("test", otelslog.WithLoggerProvider(lp)))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				log.Info("reconciled", slog.String("humus.kube.object.name", strings.Repeat("x", 200)))
			}
		})
	}
	wg.Wait()
	if w.writes.Load() != 800 || w.broken.Load() != 0 || w.overlaps.Load() != 0 {
		t.Errorf("%d writes, %d of them not one whole line, %d while another was under way; want 800 whole lines, one at a time",
			w.writes.Load(), w.broken.Load(), w.overlaps.Load())
	}
}

// overlapWriter counts its writes, those that aren't one whole line, and
// those made while another was under way.
type overlapWriter struct {
	inside                   atomic.Bool
	writes, broken, overlaps atomic.Int64
}

func (w *overlapWriter) Write(p []byte) (int, error) {
	if !w.inside.CompareAndSwap(false, true) {
		w.overlaps.Add(1)
	} else {
		defer w.inside.Store(false)
	}
	w.writes.Add(1)
	if strings.Count(string(p), "\n") != 1 || p[len(p)-1] != '\n' {
		w.broken.Add(1)
	}
	time.Sleep(10 * time.Microsecond) // long enough for another write to come
	return len(p), nil
}
