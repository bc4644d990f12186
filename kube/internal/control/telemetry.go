package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/internal/priorityqueue"
)

// scope is the instrumentation scope of everything the module records.
const InstrumentationScope = "github.com/z5labs/humus/kube"

// The names of the attributes the module records. The first two are
// OpenTelemetry's own; the rest are humus's, and start with humus.
const (
	AttrNamespace     = "k8s.namespace.name"
	AttrObjectName    = "humus.kube.object.name"
	AttrController    = "humus.kube.controller.name"
	AttrResource      = "humus.kube.resource"
	AttrOutcome       = "humus.kube.controller.reconcile.outcome"
	attrShard         = "humus.kube.controller.shard"
	attrPriority      = "humus.kube.controller.queue.priority"
	AttrExcType       = "exception.type"
	AttrExcMessage    = "exception.message"
	AttrExcStacktrace = "exception.stacktrace"
	AttrFailures      = "failures" // on a failure's record: the failures it counts
	// On a reconcile that succeeded after Settings.ReconcileTimeout: its
	// span event, the bound, and how long it ran.
	eventOverran = "humus.kube.reconcile.overran"
	attrTimeout  = "humus.kube.reconcile.timeout"
	attrTook     = "humus.kube.reconcile.ran"
)

// telemetry is what a controller records with, all from s.Telemetry under
// the module's scope.
type telemetry struct {
	tracer      trace.Tracer
	log         *slog.Logger
	logr        logr.Logger // client-go's records, through the logger in their context
	instruments *instruments
	controller  attribute.KeyValue
	failures    *FailureLog
}

// NewTelemetry returns the telemetry of the controller named name, of
// resource. Every record it writes, and every one client-go writes through
// its logr logger, names both, humus.kube.controller.name and
// humus.kube.resource, so two controllers' records in one App, or of two
// kinds' objects of one name, are told apart.
func NewTelemetry(t humus.Telemetry, name string, resource schema.GroupResource) (*telemetry, error) {
	t = t.Resolved()
	handler := otelslog.NewHandler(InstrumentationScope, otelslog.WithLoggerProvider(t.LoggerProvider)).WithAttrs([]slog.Attr{
		slog.String(AttrController, name),
		slog.String(AttrResource, resource.String()),
	})
	inst, err := newInstruments(t.MeterProvider.Meter(InstrumentationScope))
	if err != nil {
		return nil, err
	}
	return &telemetry{
		tracer:      t.TracerProvider.Tracer(InstrumentationScope),
		log:         slog.New(handler),
		logr:        logr.FromSlogHandler(Verbosity{Handler: handler}),
		instruments: inst,
		controller:  attribute.String(AttrController, name),
		failures:    NewFailureLog(),
	}, nil
}

// InformerLogger is the logger a shared informer of key runs with, from
// the Client's handler: the informer is the Client's, shared by its
// controllers, so its records (the reflector's, its watch errors') name
// its resource, humus.kube.resource, and no one controller.
func InformerLogger(h slog.Handler, key cache.Key) logr.Logger {
	return logr.FromSlogHandler(Verbosity{Handler: h.WithAttrs([]slog.Attr{slog.String(AttrResource, key.GVR.GroupResource().String())})})
}

// Verbosity keeps client-go's records up to its V(2), "useful steady state
// information", and drops its debugging levels, such as leader election's
// V(5) record of every renewal, for a LoggerProvider that takes records of
// every severity, as the SDK's does with its batch processor. A
// LoggerProvider that turns records away by severity chooses itself, for
// each level: such as telemetry.Build's, by its Verbosity option, or one
// with contrib's minsev processor. That is one that takes no record below
// every severity (anySeverity).
type Verbosity struct{ slog.Handler }

// anySeverity is a level below any that a record has: V(1048576).
const anySeverity = slog.Level(-1 << 20)

func (v Verbosity) Enabled(ctx context.Context, l slog.Level) bool {
	if !v.Handler.Enabled(ctx, l) {
		return false
	}
	return l >= slog.Level(-2) || !v.Handler.Enabled(ctx, anySeverity)
}

func (v Verbosity) WithAttrs(attrs []slog.Attr) slog.Handler {
	return Verbosity{Handler: v.Handler.WithAttrs(attrs)}
}

func (v Verbosity) WithGroup(name string) slog.Handler {
	return Verbosity{Handler: v.Handler.WithGroup(name)}
}

// reconcileRecord is one reconcile's span, and what is recorded at its
// end.
type reconcileRecord struct {
	tel   *telemetry
	ctx   context.Context
	span  trace.Span
	start time.Time
	key   string
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
		attrs = append(attrs, attribute.String(AttrNamespace, ns))
		logAttrs = append(logAttrs, slog.String(AttrNamespace, ns))
	}
	attrs = append(attrs, attribute.String(AttrObjectName, u.GetName()))
	logAttrs = append(logAttrs, slog.String(AttrObjectName, u.GetName()))
	now := time.Now()
	ctx, span := t.tracer.Start(ctx, "reconcile "+kind, trace.WithNewRoot(), trace.WithTimestamp(now),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, &reconcileRecord{tel: t, ctx: ctx, span: span, start: now, key: Key(u), attrs: logAttrs, shard: shard}
}

func (r *reconcileRecord) succeeded() { r.end(Success) }

// stale records a write refused because the object it was computed from is
// gone: one INFO record and a span event, and the outcome success, since
// nothing retries it.
func (r *reconcileRecord) stale(err error) {
	r.span.AddEvent("stale object", trace.WithAttributes(attribute.String(AttrExcMessage, err.Error())))
	r.tel.log.DebugContext(r.ctx, "reconcile skipped a stale object", append(r.attrs, slog.String("error", err.Error()))...)
	r.end(Success)
}

// failed records an error that retries the key: Reconcile's own, or a
// failed decode, status apply or finalizer add or remove. Its span and
// reconcile.duration record every failure; its WARN record is written as
// the key's failureLog allows.
func (r *reconcileRecord) failed(err error) {
	r.span.RecordError(err)
	r.span.SetStatus(codes.Error, err.Error())
	r.warn("reconcile failed", err)
	r.end(Failure)
}

// timedOut records a reconcile that Settings.ReconcileTimeout ended: as
// failed does, with the outcome timeout.
func (r *reconcileRecord) timedOut(err error) {
	r.span.RecordError(err)
	r.span.SetStatus(codes.Error, err.Error())
	r.warn("reconcile timed out", err)
	r.end(TimedOut)
}

// overran records a reconcile or a Finalize's f that returned nil after
// Settings.ReconcileTimeout, bound, ended its context: a success, with the
// span event humus.kube.reconcile.overran and a WARN record, each saying
// the bound and how long it ran.
func (t *telemetry) overran(ctx context.Context, bound, took time.Duration) {
	attrs := []attribute.KeyValue{attribute.String(attrTimeout, bound.String()), attribute.String(attrTook, took.String())}
	trace.SpanFromContext(ctx).AddEvent(eventOverran, trace.WithAttributes(attrs...))
	t.log.WarnContext(ctx, "reconcile succeeded after its timeout", slog.String(attrTimeout, bound.String()), slog.String(attrTook, took.String()))
}

// warn writes the WARN record msg of a failure that retries the key, with
// err and the failures it counts, unless the key's failureLog holds it
// back.
func (r *reconcileRecord) warn(msg string, err error) {
	n, ok := r.tel.failures.Failed(r.key, time.Now())
	if !ok {
		return
	}
	r.tel.log.WarnContext(r.ctx, msg, append(r.attrs, slog.String("error", err.Error()), slog.Int(AttrFailures, n))...)
}

// panicked records a recovered panic: an exception event on the span, an
// Error status, and one ERROR record, each with the exception's type,
// message and stack.
func (r *reconcileRecord) panicked(pv *PanicValue) {
	typ, msg, stack := fmt.Sprintf("%T", pv.Value), fmt.Sprint(pv.Value), string(pv.Stack)
	if err, ok := pv.Value.(error); ok {
		msg = err.Error()
	}
	r.span.AddEvent("exception", trace.WithAttributes(
		attribute.String(AttrExcType, typ),
		attribute.String(AttrExcMessage, msg),
		attribute.String(AttrExcStacktrace, stack),
	))
	r.span.SetStatus(codes.Error, "panic: "+msg)
	r.tel.log.ErrorContext(r.ctx, "reconcile panicked", append(r.attrs,
		slog.String(AttrExcType, typ),
		slog.String(AttrExcMessage, msg),
		slog.String(AttrExcStacktrace, stack),
	)...)
	r.end(Panicked)
}

// end ends the span, and records reconcile.duration over the same time.
func (r *reconcileRecord) end(o Outcome) {
	now := time.Now()
	r.span.End(trace.WithTimestamp(now))
	r.tel.instruments.reconcileDuration.Record(context.WithoutCancel(r.ctx), now.Sub(r.start).Seconds(),
		metric.WithAttributes(append([]attribute.KeyValue{r.tel.controller, attribute.String(AttrOutcome, string(o))}, r.shard...)...))
}

// FailureLog keeps a key that keeps failing from flooding the log, as
// client-go keeps its own repeated errors from doing: a key's first failure
// is recorded at once, and each later one only once a wait has passed
// since the key's last record, a wait that doubles from a second with each
// record up to five minutes. A record counts the failures since the one
// before it, itself included, so a failure held back is counted by the
// next record, if the key fails again before it settles. With the default
// backoff from 5ms, a key failing for a minute fails 14 times and gives 6
// records, counting 1, 8, 2, 1, 1 and 1; one failing on each of ten
// changes a second gives 6 too, for its 600 failures. A key is forgotten
// when it settles (a reconcile that succeeds, a panic, a stale write or
// the object gone), so its next failure is recorded at once, and once it
// hasn't failed for an hour, as a key of a shard this replica no longer
// holds.
type FailureLog struct {
	mu    sync.Mutex
	Keys  map[string]*keyFailures
	swept time.Time // when keys last forgot those that stopped failing
}

// keyFailures is one key's failures since it last settled.
type keyFailures struct {
	unsaid int           // the failures since its last record
	next   time.Time     // when its next record may be written
	wait   time.Duration // how long after the next record the one after it may be
	last   time.Time     // its last failure
}

const (
	firstFailureWait = time.Second     // between a key's first record and its second
	maxFailureWait   = 5 * time.Minute // between a key's records, at most
	failureMemory    = time.Hour       // how long a key that stops failing is kept
)

func NewFailureLog() *FailureLog { return &FailureLog{Keys: map[string]*keyFailures{}} }

// Failed counts a failure of key at now, and reports whether to record it,
// and how many failures the record counts: this one, and those since the
// key's last record.
func (l *FailureLog) Failed(key string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	f := l.Keys[key]
	if f == nil {
		f = &keyFailures{wait: firstFailureWait}
		l.Keys[key] = f
	}
	f.unsaid++
	f.last = now
	if now.Before(f.next) {
		return 0, false
	}
	n := f.unsaid
	f.unsaid, f.next, f.wait = 0, now.Add(f.wait), min(2*f.wait, maxFailureWait)
	return n, true
}

// forget forgets key's failures: it settled.
func (l *FailureLog) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.Keys, key)
}

// sweep forgets, at most once every failureMemory, the keys that haven't
// failed for that long: those that stopped failing without settling here.
func (l *FailureLog) sweep(now time.Time) {
	if now.Sub(l.swept) < failureMemory {
		return
	}
	l.swept = now
	for k, f := range l.Keys {
		if now.Sub(f.last) >= failureMemory {
			delete(l.Keys, k)
		}
	}
}

// Outcome is how a reconcile ended, for step 7 of How one key is
// reconciled (package doc) and the telemetry.
type Outcome string

const (
	Success  Outcome = "success"
	Failure  Outcome = "error"
	Panicked Outcome = "panic"
	TimedOut Outcome = "timeout"
)

// PanicValue is a recovered panic, and where it happened.
type PanicValue struct {
	Value any
	Stack []byte
}

// DurationBuckets is OpenTelemetry's advice for a duration in seconds, as
// http.server.request.duration takes it. The SDK's default boundaries are
// for milliseconds.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// instruments are the controller's eight: the proposal's six, and the two
// of the latency a change sees.
type instruments struct {
	queueDepth         metric.Int64UpDownCounter
	queueAdds          metric.Int64Counter
	queueDuration      metric.Float64Histogram
	reconcileDuration  metric.Float64Histogram
	unfinishedDuration metric.Float64Gauge
	longestUnfinished  metric.Float64Gauge
	oldestWait         metric.Float64Gauge
	changeLatency      metric.Float64Histogram
}

func newInstruments(m metric.Meter) (*instruments, error) {
	var errs []error
	check := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("kube: creating the instrument %s: %w", name, err))
		}
	}
	var i instruments
	var err error
	const p = "humus.kube.controller."

	i.queueDepth, err = m.Int64UpDownCounter(p+"queue.depth", metric.WithUnit("{object}"),
		metric.WithDescription("Objects waiting in the work queue for a worker."))
	check(p+"queue.depth", err)
	i.queueAdds, err = m.Int64Counter(p+"queue.adds", metric.WithUnit("{object}"),
		metric.WithDescription("Objects added to the work queue, not counting one already waiting."))
	check(p+"queue.adds", err)
	i.queueDuration, err = m.Float64Histogram(p+"queue.duration", metric.WithUnit("s"),
		metric.WithDescription("How long an object waited in the work queue for a worker."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	check(p+"queue.duration", err)
	i.reconcileDuration, err = m.Float64Histogram(p+"reconcile.duration", metric.WithUnit("s"),
		metric.WithDescription("How long each reconcile took, by its outcome."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	check(p+"reconcile.duration", err)
	i.unfinishedDuration, err = m.Float64Gauge(p+"reconcile.unfinished_duration", metric.WithUnit("s"),
		metric.WithDescription("How long the reconciles in flight have run, added together."))
	check(p+"reconcile.unfinished_duration", err)
	i.longestUnfinished, err = m.Float64Gauge(p+"reconcile.longest_unfinished_duration", metric.WithUnit("s"),
		metric.WithDescription("How long the longest reconcile in flight has run."))
	check(p+"reconcile.longest_unfinished_duration", err)
	i.oldestWait, err = m.Float64Gauge(p+"queue.oldest_wait", metric.WithUnit("s"),
		metric.WithDescription("How long the object that has waited longest in the work queue has waited, by priority."))
	check(p+"queue.oldest_wait", err)
	i.changeLatency, err = m.Float64Histogram(p+"reconcile.change_latency", metric.WithUnit("s"),
		metric.WithDescription("How long from a change's write, as the API server stamped it, to the end of the reconcile that handled it."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	check(p+"reconcile.change_latency", err)

	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &i, nil
}

// queueMetrics is the work queue's MetricsProvider: the controller's own,
// set in its queue's config. client-go hands it the queue's name, which is
// the controller's, and it records it as humus.kube.controller.name, with
// the shard's attribute when the controller is sharded. The
// work duration and the retries are no-ops: reconcile.duration times the
// first, with the outcome, and the error outcome counts the second exactly,
// where the queue would count every Result.After as a retry.
type queueMetrics struct {
	inst       *instruments
	attrs      []attribute.KeyValue // the shard's
	byPriority map[Priority]metric.MeasurementOption
}

// newQueueMetrics returns the queue's provider for the controller named
// name, with the shard's attributes.
func newQueueMetrics(inst *instruments, name string, attrs []attribute.KeyValue) *queueMetrics {
	p := &queueMetrics{inst: inst, attrs: attrs, byPriority: map[Priority]metric.MeasurementOption{}}
	for _, pr := range priorityqueue.Priorities {
		p.byPriority[pr] = p.byController(name, attribute.String(attrPriority, pr.String()))
	}
	return p
}

var _ workqueue.MetricsProvider = (*queueMetrics)(nil)

func (p *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return depth{c: p.inst.queueDepth, set: p.byController(name)}
}

func (p *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return adds{c: p.inst.queueAdds, set: p.byController(name)}
}

func (p *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return histogram{h: p.inst.queueDuration, set: p.byController(name)}
}

func (p *queueMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noop{} }

func (p *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return gauge{g: p.inst.unfinishedDuration, set: p.byController(name)}
}

func (p *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return gauge{g: p.inst.longestUnfinished, set: p.byController(name)}
}

func (p *queueMetrics) NewRetriesMetric(string) workqueue.CounterMetric { return noop{} }

func (p *queueMetrics) byController(name string, more ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue{attribute.String(AttrController, name)}, p.attrs...), more...)...))
}

// oldestWait records queue.oldest_wait for p: the queue calls it every
// 500ms, as it sets the work in flight, and with 0 once it shuts down.
func (p *queueMetrics) oldestWait(pr Priority, wait time.Duration) {
	p.inst.oldestWait.Record(context.Background(), wait.Seconds(), p.byPriority[pr])
}

// handled records reconcile.change_latency for a reconcile, ending now,
// that handled a change the API server stamped at changed, with the
// shard's attributes; nothing when changed is zero, for a key that no
// change queued. A clock behind the API server's reads as 0.
func (t *telemetry) handled(ctx context.Context, changed time.Time, shard []attribute.KeyValue) {
	if changed.IsZero() {
		return
	}
	t.instruments.changeLatency.Record(context.WithoutCancel(ctx), max(0, time.Since(changed).Seconds()),
		metric.WithAttributes(append([]attribute.KeyValue{t.controller}, shard...)...))
}

// The work queue's metrics are handed no context, so they record with
// context.Background.

type depth struct {
	c   metric.Int64UpDownCounter
	set metric.MeasurementOption
}

func (d depth) Inc() { d.c.Add(context.Background(), 1, d.set) }
func (d depth) Dec() { d.c.Add(context.Background(), -1, d.set) }

type adds struct {
	c   metric.Int64Counter
	set metric.MeasurementOption
}

func (a adds) Inc() { a.c.Add(context.Background(), 1, a.set) }

type histogram struct {
	h   metric.Float64Histogram
	set metric.MeasurementOption
}

func (h histogram) Observe(v float64) { h.h.Record(context.Background(), v, h.set) }

type gauge struct {
	g   metric.Float64Gauge
	set metric.MeasurementOption
}

func (g gauge) Set(v float64) { g.g.Record(context.Background(), v, g.set) }

type noop struct{}

func (noop) Inc()            {}
func (noop) Observe(float64) {}
