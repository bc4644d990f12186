package telemetry

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// The attributes the kube module's records name their object with.
const (
	attrNamespace  = "k8s.namespace.name"
	attrObjectName = "humus.kube.object.name"
)

// NewLineProcessor returns a log processor that writes each record to w
// at once, on one line a person can read: its time in UTC, its level, its
// message, its object as namespace/name, and then its other attributes as
// key=value, in the record's order, such as the error:
//
//	2026-12-03T18:30:00.123Z WARN reconcile failed default/sessions error="app: applying the Deployment: ..."
//
// The object is the pair of attributes the kube module's records carry,
// k8s.namespace.name and humus.kube.object.name: a cluster-scoped object
// has only its name, and a record with only a namespace shows it as
// k8s.namespace.name=<namespace>.
//
// The level is DEBUG, INFO, WARN, ERROR or FATAL, without OpenTelemetry's
// finer steps (DEBUG2 is DEBUG), and TRACE below DEBUG, for a record with
// no severity too.
//
// A value with a space, a quote, an equals sign or a character that isn't
// printable, a stack trace's line breaks say, is quoted as Go quotes it,
// and so is a message with a character that isn't printable, so a record
// is always one line. Lines are written whole, one at a time, so records
// emitted at once don't interleave.
//
// It takes every record: Build puts it behind the Verbosity. The
// OpenTelemetry SDK's stdoutlog exporter writes JSON, for machines; this is
// for the terminal and kubectl logs.
func NewLineProcessor(w io.Writer) sdklog.Processor {
	return &lineProcessor{out: &lineWriter{w: w}}
}

type lineProcessor struct{ out *lineWriter }

func (p *lineProcessor) OnEmit(_ context.Context, r *sdklog.Record) error {
	t := r.Timestamp()
	if t.IsZero() {
		t = r.ObservedTimestamp()
	}
	p.out.write(formatLine(t, r.Severity(), valueString(r.Body()), r.WalkAttributes))
	return nil
}

func (p *lineProcessor) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

func (p *lineProcessor) Shutdown(context.Context) error   { return nil }
func (p *lineProcessor) ForceFlush(context.Context) error { return nil }

// lineWriter writes whole lines to w, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) write(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A stderr that fails can't be told so.
	_, _ = io.WriteString(l.w, line)
}

// formatLine is the line of a record of time t, severity s and message msg,
// with the attributes walk yields, ending in a line break.
func formatLine(t time.Time, s log.Severity, msg string, walk func(func(attribute.KeyValue) bool)) string {
	var b strings.Builder
	b.WriteString(t.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	b.WriteByte(' ')
	b.WriteString(level(s))
	b.WriteByte(' ')
	b.WriteString(message(msg))

	var ns, name string
	var rest []attribute.KeyValue
	walk(func(kv attribute.KeyValue) bool {
		switch kv.Key {
		case attrNamespace:
			ns = valueString(kv.Value)
		case attrObjectName:
			name = valueString(kv.Value)
		default:
			rest = append(rest, kv)
		}
		return true
	})
	switch {
	case name != "" && ns != "":
		b.WriteString(" " + text(ns+"/"+name))
	case name != "":
		b.WriteString(" " + text(name))
	case ns != "":
		b.WriteString(" " + attrNamespace + "=" + text(ns))
	}
	for _, kv := range rest {
		b.WriteString(" " + text(string(kv.Key)) + "=" + text(valueString(kv.Value)))
	}
	b.WriteByte('\n')
	return b.String()
}

// level is s's name, without the SDK's finer steps: DEBUG, INFO, WARN or
// ERROR, FATAL above it, and TRACE below, a record without a severity
// included, as the Verbosity counts it.
func level(s log.Severity) string {
	switch {
	case s >= log.SeverityFatal1:
		return "FATAL"
	case s >= log.SeverityError1:
		return "ERROR"
	case s >= log.SeverityWarn1:
		return "WARN"
	case s >= log.SeverityInfo1:
		return "INFO"
	case s >= log.SeverityDebug1:
		return "DEBUG"
	default:
		return "TRACE"
	}
}

func valueString(v attribute.Value) string {
	switch v.Type() {
	case attribute.STRING:
		return v.AsString()
	case attribute.EMPTY:
		return ""
	default:
		return v.String()
	}
}

// message is s as it is, or quoted when it has a character that isn't
// printable, such as a line break.
func message(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// text is s as it is, or quoted when it has a space, a quote, an equals
// sign or a character that isn't printable, or is empty.
func text(s string) string {
	if s == "" {
		return `""`
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return r == ' ' || r == '"' || r == '=' || !unicode.IsPrint(r)
	}) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
