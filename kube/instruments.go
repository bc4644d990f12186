package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/client-go/util/workqueue"

	"github.com/z5labs/humus/kube/internal/priorityqueue"
)

// durationBuckets is OpenTelemetry's advice for a duration in seconds, as
// http.server.request.duration takes it. The SDK's default boundaries are
// for milliseconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

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
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	check(p+"queue.duration", err)
	i.reconcileDuration, err = m.Float64Histogram(p+"reconcile.duration", metric.WithUnit("s"),
		metric.WithDescription("How long each reconcile took, by its outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
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
		metric.WithExplicitBucketBoundaries(durationBuckets...))
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
	byPriority map[priority]metric.MeasurementOption
}

// newQueueMetrics returns the queue's provider for the controller named
// name, with the shard's attributes.
func newQueueMetrics(inst *instruments, name string, attrs []attribute.KeyValue) *queueMetrics {
	p := &queueMetrics{inst: inst, attrs: attrs, byPriority: map[priority]metric.MeasurementOption{}}
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
	return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue{attribute.String(attrController, name)}, p.attrs...), more...)...))
}

// oldestWait records queue.oldest_wait for p: the queue calls it every
// 500ms, as it sets the work in flight, and with 0 once it shuts down.
func (p *queueMetrics) oldestWait(pr priority, wait time.Duration) {
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
