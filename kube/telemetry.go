package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus"
)

// scope is the instrumentation scope of everything the module records.
const scope = "github.com/z5labs/humus/kube"

// The names of the attributes the module records. The first two are
// OpenTelemetry's own; the rest are humus's, and start with humus.
const (
	attrNamespace     = "k8s.namespace.name"
	attrObjectName    = "humus.kube.object.name"
	attrController    = "humus.kube.controller.name"
	attrOutcome       = "humus.kube.controller.reconcile.outcome"
	attrShard         = "humus.kube.controller.shard"
	attrPriority      = "humus.kube.controller.queue.priority"
	attrExcType       = "exception.type"
	attrExcMessage    = "exception.message"
	attrExcStacktrace = "exception.stacktrace"
)

// telemetry is what a controller records with, all from s.Telemetry under
// the module's scope.
type telemetry struct {
	tracer      trace.Tracer
	log         *slog.Logger
	logr        logr.Logger // client-go's records, through the logger in their context
	instruments *instruments
	controller  attribute.KeyValue
}

func newTelemetry(t humus.Telemetry, name string) (*telemetry, error) {
	t = t.Resolved()
	handler := otelslog.NewHandler(scope, otelslog.WithLoggerProvider(t.LoggerProvider))
	inst, err := newInstruments(t.MeterProvider.Meter(scope))
	if err != nil {
		return nil, err
	}
	return &telemetry{
		tracer:      t.TracerProvider.Tracer(scope),
		log:         slog.New(handler),
		logr:        logr.FromSlogHandler(verbosity{Handler: handler}),
		instruments: inst,
		controller:  attribute.String(attrController, name),
	}, nil
}

// verbosity keeps client-go's records up to its V(2), "useful steady state
// information", and drops its debugging levels, such as leader election's
// V(5) record of every renewal, for a LoggerProvider that takes records of
// every severity, as the SDK's does with its batch processor. A
// LoggerProvider that turns records away by severity chooses itself, for
// each level: such as telemetry.Build's, by its Verbosity option, or one
// with contrib's minsev processor. That is one that takes no record below
// every severity (anySeverity).
type verbosity struct{ slog.Handler }

// anySeverity is a level below any that a record has: V(1048576).
const anySeverity = slog.Level(-1 << 20)

func (v verbosity) Enabled(ctx context.Context, l slog.Level) bool {
	if !v.Handler.Enabled(ctx, l) {
		return false
	}
	return l >= slog.Level(-2) || !v.Handler.Enabled(ctx, anySeverity)
}

func (v verbosity) WithAttrs(attrs []slog.Attr) slog.Handler {
	return verbosity{Handler: v.Handler.WithAttrs(attrs)}
}

func (v verbosity) WithGroup(name string) slog.Handler {
	return verbosity{Handler: v.Handler.WithGroup(name)}
}

// reconcileRecord is one reconcile's span, and what is recorded at its
// end.
type reconcileRecord struct {
	tel   *telemetry
	ctx   context.Context
	span  trace.Span
	start time.Time
	attrs []any // the object, for the log records
	shard []attribute.KeyValue
}

// start begins the reconcile of u: a root span, reconcile <Kind>, which
// the Reconciler's context carries.
func (t *telemetry) start(ctx context.Context, kind string, u metav1.Object, shard []attribute.KeyValue) (context.Context, *reconcileRecord) {
	attrs := slices.Clone(shard)
	var logAttrs []any
	for _, a := range shard {
		logAttrs = append(logAttrs, slog.String(string(a.Key), a.Value.String()))
	}
	if ns := u.GetNamespace(); ns != "" {
		attrs = append(attrs, attribute.String(attrNamespace, ns))
		logAttrs = append(logAttrs, slog.String(attrNamespace, ns))
	}
	attrs = append(attrs, attribute.String(attrObjectName, u.GetName()))
	logAttrs = append(logAttrs, slog.String(attrObjectName, u.GetName()))
	now := time.Now()
	ctx, span := t.tracer.Start(ctx, "reconcile "+kind, trace.WithNewRoot(), trace.WithTimestamp(now),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, &reconcileRecord{tel: t, ctx: ctx, span: span, start: now, attrs: logAttrs, shard: shard}
}

func (r *reconcileRecord) succeeded() { r.end(success) }

// stale records a write refused because the object it was computed from is
// gone: one INFO record and a span event, and the outcome success, since
// nothing retries it.
func (r *reconcileRecord) stale(err error) {
	r.span.AddEvent("stale object", trace.WithAttributes(attribute.String(attrExcMessage, err.Error())))
	r.tel.log.InfoContext(r.ctx, "reconcile skipped a stale object", append(r.attrs, slog.String("error", err.Error()))...)
	r.end(success)
}

// failed records an error that retries the key: Reconcile's own, or a
// failed decode, status apply or finalizer add or remove.
func (r *reconcileRecord) failed(err error) {
	r.span.RecordError(err)
	r.span.SetStatus(codes.Error, err.Error())
	r.tel.log.WarnContext(r.ctx, "reconcile failed", append(r.attrs, slog.String("error", err.Error()))...)
	r.end(failure)
}

// panicked records a recovered panic: an exception event on the span, an
// Error status, and one ERROR record, each with the exception's type,
// message and stack.
func (r *reconcileRecord) panicked(pv *panicValue) {
	typ, msg, stack := fmt.Sprintf("%T", pv.value), fmt.Sprint(pv.value), string(pv.stack)
	if err, ok := pv.value.(error); ok {
		msg = err.Error()
	}
	r.span.AddEvent("exception", trace.WithAttributes(
		attribute.String(attrExcType, typ),
		attribute.String(attrExcMessage, msg),
		attribute.String(attrExcStacktrace, stack),
	))
	r.span.SetStatus(codes.Error, "panic: "+msg)
	r.tel.log.ErrorContext(r.ctx, "reconcile panicked", append(r.attrs,
		slog.String(attrExcType, typ),
		slog.String(attrExcMessage, msg),
		slog.String(attrExcStacktrace, stack),
	)...)
	r.end(panicked)
}

// end ends the span, and records reconcile.duration over the same time.
func (r *reconcileRecord) end(o outcome) {
	now := time.Now()
	r.span.End(trace.WithTimestamp(now))
	r.tel.instruments.reconcileDuration.Record(context.WithoutCancel(r.ctx), now.Sub(r.start).Seconds(),
		metric.WithAttributes(append([]attribute.KeyValue{r.tel.controller, attribute.String(attrOutcome, string(o))}, r.shard...)...))
}

// outcome is how a reconcile ended, for step 7 of How one key is
// reconciled (package doc) and the telemetry.
type outcome string

const (
	success  outcome = "success"
	failure  outcome = "error"
	panicked outcome = "panic"
)

// panicValue is a recovered panic, and where it happened.
type panicValue struct {
	value any
	stack []byte
}
