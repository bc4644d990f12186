package podtel

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
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
// key=value, such as the error:
//
//	2026-12-03T18:30:00.123Z WARN reconcile failed default/sessions error="app: applying the Deployment: ..."
//
// A value with a space, a quote, an equals sign or a character that isn't
// printable, a stack trace's line breaks say, is quoted as Go quotes it,
// so a record is always one line.
//
// The OpenTelemetry SDK's stdoutlog exporter writes JSON, for machines;
// this is for the terminal and kubectl logs.
func NewLineProcessor(w io.Writer) sdklog.Processor {
	return &lineProcessor{w: w}
}

type lineProcessor struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *lineProcessor) OnEmit(_ context.Context, r *sdklog.Record) error {
	line := formatLine(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	// A stderr that fails can't be told so.
	_, _ = io.WriteString(p.w, line)
	return nil
}

func (p *lineProcessor) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

func (p *lineProcessor) Shutdown(context.Context) error   { return nil }
func (p *lineProcessor) ForceFlush(context.Context) error { return nil }

// formatLine is r's line, ending in a line break.
func formatLine(r *sdklog.Record) string {
	var b strings.Builder
	t := r.Timestamp()
	if t.IsZero() {
		t = r.ObservedTimestamp()
	}
	b.WriteString(t.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	b.WriteByte(' ')
	b.WriteString(level(r.Severity()))
	b.WriteByte(' ')
	b.WriteString(message(valueString(r.Body())))

	var ns, name string
	var rest []attribute.KeyValue
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
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
// ERROR, FATAL above it, and TRACE below.
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
	case s == log.SeverityUndefined:
		return "INFO"
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
