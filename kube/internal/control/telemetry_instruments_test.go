package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/internal/teltest"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/z5labs/humus/humustest"
)

const p = "humus.kube.controller."

// counted returns the value of an Int64 sum's one data point, failing t
// unless it has exactly one, of the controller memcached-controller.
func counted(t testing.TB, ms map[string]metricdata.Metrics, name string) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s; metrics: %v", name, keysOf(ms))
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want a metricdata.Sum[int64]", name, m.Data)
	}
	if len(sum.DataPoints) != 1 {
		t.Fatalf("%s has %d data points, want 1", name, len(sum.DataPoints))
	}
	checkController(t, name, sum.DataPoints[0].Attributes)
	return sum.DataPoints[0].Value
}

// gauged returns a Float64 gauge's one data point's value.
func gauged(t testing.TB, ms map[string]metricdata.Metrics, name string) float64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s; metrics: %v", name, keysOf(ms))
	}
	g, ok := m.Data.(metricdata.Gauge[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a metricdata.Gauge[float64]", name, m.Data)
	}
	if len(g.DataPoints) != 1 {
		t.Fatalf("%s has %d data points, want 1", name, len(g.DataPoints))
	}
	checkController(t, name, g.DataPoints[0].Attributes)
	return g.DataPoints[0].Value
}

// queueDurations returns queue.duration's one data point, or a zero one
// when nothing was recorded.
func queueDurations(t testing.TB, ms map[string]metricdata.Metrics) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	points := histogramPoints(t, ms, p+"queue.duration")
	switch len(points) {
	case 0:
		return metricdata.HistogramDataPoint[float64]{}
	case 1:
		checkController(t, p+"queue.duration", points[0].Attributes)
		return points[0]
	}
	t.Fatalf("queue.duration has %d data points, want 1", len(points))
	return metricdata.HistogramDataPoint[float64]{}
}

// reconcileDurations returns reconcile.duration's data points by outcome.
func reconcileDurations(t testing.TB, tel *humustest.Telemetry) map[string]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	return teltest.HistogramBy(t, tel, p+"reconcile.duration", AttrOutcome)
}

// checkController fails t unless set names the controller
// memcached-controller.
func checkController(t testing.TB, name string, set attribute.Set) {
	t.Helper()
	teltest.CheckAttr(t, name, set, AttrController, "memcached-controller")
}

// heldByAnother creates the Lease ns/name held by holder, renewed now and
// lasting an hour, so a replica of another identity stands by.
func heldByAnother(t testing.TB, f *fakeCluster, ns, name, holder string) {
	t.Helper()
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: new(int32(3600)),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}
	if _, err := f.Kube.CoordinationV1().Leases(ns).Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// instrument is one of the controller's instruments, as it is exported.
type instrument struct {
	name, unit, description string
	kind                    string // the metricdata type
	monotonic               bool   // for a Sum
	keys                    []string
}

// controllerInstruments are the controller's eight: the proposal's six
// Instruments, and the two of the latency a change sees.
var controllerInstruments = []instrument{
	{p + "queue.depth", "{object}", "Objects waiting in the work queue for a worker.", "Sum[int64]", false, []string{AttrController}},
	{p + "queue.adds", "{object}", "Objects added to the work queue, not counting one already waiting.", "Sum[int64]", true, []string{AttrController}},
	{p + "queue.duration", "s", "How long an object waited in the work queue for a worker.", "Histogram[float64]", false, []string{AttrController}},
	{p + "reconcile.duration", "s", "How long each reconcile took, by its outcome.", "Histogram[float64]", false, []string{AttrController, AttrOutcome}},
	{p + "reconcile.unfinished_duration", "s", "How long the reconciles in flight have run, added together.", "Gauge[float64]", false, []string{AttrController}},
	{p + "reconcile.longest_unfinished_duration", "s", "How long the longest reconcile in flight has run.", "Gauge[float64]", false, []string{AttrController}},
	{p + "queue.oldest_wait", "s", "How long the object that has waited longest in the work queue has waited, by priority.", "Gauge[float64]", false, []string{AttrController, attrPriority}},
	{p + "reconcile.change_latency", "s", "How long from a change's write, as the API server stamped it, to the end of the reconcile that handled it.", "Histogram[float64]", false, []string{AttrController}},
}

// The proposal's boundaries: OpenTelemetry's advice for a duration in
// seconds.
var proposalBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

func TestTheControllersInstrumentsAreTheProposals(t *testing.T) {
	kinds := map[string]func(t *testing.T, f *fakeCluster, tel *humustest.Telemetry) *Controller{
		"Resource": func(t *testing.T, f *fakeCluster, tel *humustest.Telemetry) *Controller {
			var calls counter
			return newTestController(t, f, testSettings(), readyReplicas(&calls), observed(tel))
		},
		"Kind": func(t *testing.T, f *fakeCluster, tel *humustest.Telemetry) *Controller {
			rec := namespacesType(func(ctx context.Context, ns corev1.Namespace) (time.Duration, error) {
				return 0, nil
			})
			return newTestController(t, f, testSettings(), nil, observed(tel), ofNamespaces(rec))
		},
	}
	for name, build := range kinds {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tel := humustest.NewTelemetry()
				f := newFakeCluster(t, listKinds,
					cacheObject("default", "a", 1), cacheObject("team-b", "b", 2),
					object("v1", "Namespace", "", "default", nil), object("v1", "Namespace", "", "team-b", nil))
				stop := served(t, build(t, f, tel))
				time.Sleep(time.Minute)
				// A change, for reconcile.change_latency: the objects above
				// were there before Serve, and no change queued them.
				f.Create(t, cachesGVR, cacheObject("default", "c", 1))
				f.Create(t, namespacesGVR, object("v1", "Namespace", "", "team-c", nil))
				time.Sleep(time.Minute)
				synctest.Wait()
				if err := stop(); err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
				checkInstruments(t, instrumentsOf(t, tel))
			})
		})
	}
}

func checkInstruments(t *testing.T, ms map[string]metricdata.Metrics) {
	t.Helper()
	var want []string
	for _, in := range controllerInstruments {
		want = append(want, in.name)
	}
	slices.Sort(want)
	if got := keysOf(ms); !slices.Equal(got, want) {
		t.Errorf("the scope's instruments = %v, want the controller's eight, %v", got, want)
	}
	for _, in := range controllerInstruments {
		m, ok := ms[in.name]
		if !ok {
			continue
		}
		if m.Unit != in.unit {
			t.Errorf("%s's unit = %q, want %q", in.name, m.Unit, in.unit)
		}
		if m.Description != in.description {
			t.Errorf("%s's description = %q, want %q", in.name, m.Description, in.description)
		}
		var sets []attribute.Set
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			if in.kind != "Sum[int64]" {
				t.Errorf("%s is a Sum[int64], want a %s", in.name, in.kind)
			}
			if d.IsMonotonic != in.monotonic {
				t.Errorf("%s is monotonic: %v, want %v", in.name, d.IsMonotonic, in.monotonic)
			}
			for _, dp := range d.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		case metricdata.Histogram[float64]:
			if in.kind != "Histogram[float64]" {
				t.Errorf("%s is a Histogram[float64], want a %s", in.name, in.kind)
			}
			for _, dp := range d.DataPoints {
				if !slices.Equal(dp.Bounds, proposalBuckets) {
					t.Errorf("%s's bounds = %v, want %v", in.name, dp.Bounds, proposalBuckets)
				}
				sets = append(sets, dp.Attributes)
			}
		case metricdata.Gauge[float64]:
			if in.kind != "Gauge[float64]" {
				t.Errorf("%s is a Gauge[float64], want a %s", in.name, in.kind)
			}
			for _, dp := range d.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		default:
			t.Errorf("%s is a %T, want a %s", in.name, m.Data, in.kind)
		}
		if len(sets) == 0 {
			t.Errorf("%s has no data points", in.name)
		}
		// The controller's name on every point, and nothing per object.
		for _, set := range sets {
			var keys []string
			for _, kv := range set.ToSlice() {
				keys = append(keys, string(kv.Key))
			}
			if !slices.Equal(keys, in.keys) {
				t.Errorf("%s has a point with %v, want exactly %v", in.name, set.ToSlice(), in.keys)
			}
			checkController(t, in.name, set)
		}
	}
}

func TestReconcileDurationIsRecordedByOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, outcomeObjects()...)
		var calls counter
		s := testSettings()
		s.RetryBaseDelay, s.RetryMaxDelay = time.Second, 8*time.Second
		stop := served(t, newTestController(t, f, s, outcomes(tel, &calls), observed(tel)))
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}

		points := reconcileDurations(t, tel)
		if got := keysOf(points); !slices.Equal(got, []string{"error", "panic", "success"}) {
			t.Fatalf("reconcile.duration's outcomes = %v, want error, panic and success", got)
		}
		for o, dp := range points {
			checkController(t, "reconcile.duration ("+o+")", dp.Attributes)
		}
		if got := points["success"].Count; got != 1 {
			t.Errorf("success's count = %d, want 1", got)
		}
		if got, want := points["error"].Count, uint64(calls.Get("fail")); got != want || got < 5 {
			t.Errorf("error's count = %d, want one per failed reconcile, %d, with retries", got, want)
		}
		if got := points["panic"].Count; got != 1 {
			t.Errorf("panic's count = %d, want 1: a panic isn't retried", got)
		}

		// Over the same time as the span: the success slept 2s.
		ok := reconcileSpansOf(tel, "Memcached", "ok")
		if len(ok) != 1 {
			t.Fatalf("ok's spans = %d, want 1", len(ok))
		}
		if got, want := points["success"].Sum, ok[0].EndTime().Sub(ok[0].StartTime()).Seconds(); got != want || got != 2 {
			t.Errorf("success's sum = %vs, want the span's %vs, 2s", got, want)
		}
		// 2s falls in (1, 2.5].
		if got := points["success"].BucketCounts; len(got) != len(proposalBuckets)+1 || got[10] != 1 {
			t.Errorf("success's bucket counts = %v, want its one in (1, 2.5]", got)
		}
	})
}

func TestAStandbysQueueHoldsEveryObjectAndItsReconcileInstrumentsReadZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, cacheObject("default", "a", 1), cacheObject("default", "b", 1), cacheObject("team-b", "c", 1))
		heldByAnother(t, f, "kube-system", "memcached-controller", "replica-2")
		var calls counter
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls), observed(tel)))
		time.Sleep(time.Minute)
		synctest.Wait()
		if h := holder(f.Lease(t, "kube-system", "memcached-controller")); h != "replica-2" {
			t.Fatalf("the Lease's holder = %q, want replica-2", h)
		}
		if keys := calls.Keys(); len(keys) != 0 {
			t.Fatalf("a standby reconciled %v", keys)
		}
		ms := instrumentsOf(t, tel)
		if got := counted(t, ms, p+"queue.depth"); got != 3 {
			t.Errorf("queue.depth = %d, want 3: a key for every object", got)
		}
		if got := counted(t, ms, p+"queue.adds"); got != 3 {
			t.Errorf("queue.adds = %d, want 3", got)
		}
		if got := queueDurations(t, ms).Count; got != 0 {
			t.Errorf("queue.duration counted %d takes, want none: nothing leaves a standby's queue", got)
		}
		if points := histogramPoints(t, ms, p+"reconcile.duration"); len(points) != 0 {
			t.Errorf("reconcile.duration has %d points, want none on a standby", len(points))
		}
		if got := gauged(t, ms, p+"reconcile.unfinished_duration"); got != 0 {
			t.Errorf("reconcile.unfinished_duration = %v, want 0", got)
		}
		if got := gauged(t, ms, p+"reconcile.longest_unfinished_duration"); got != 0 {
			t.Errorf("reconcile.longest_unfinished_duration = %v, want 0", got)
		}
		if got := gaugedBy(t, ms, p+"queue.oldest_wait", attrPriority); len(got) != 2 || got["low"]+got["normal"] != 0 {
			t.Errorf("queue.oldest_wait = %v, want 0 for low and normal: a standby's keys wait for no worker", got)
		}

		// Changes to an object whose key waits add nothing.
		for size := range int64(3) {
			a := f.Get(t, cachesGVR, "default", "a")
			_ = unstructured.SetNestedField(a.Object, size+2, "spec", "size")
			f.Update(t, cachesGVR, a)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		ms = instrumentsOf(t, tel)
		if got := counted(t, ms, p+"queue.adds"); got != 3 {
			t.Errorf("queue.adds after three changes to a waiting object = %d, want 3: a key already waiting isn't counted", got)
		}
		if got := counted(t, ms, p+"queue.depth"); got != 3 {
			t.Errorf("queue.depth after three changes to a waiting object = %d, want 3", got)
		}

		// A new object adds one.
		f.Create(t, cachesGVR, cacheObject("default", "d", 1))
		time.Sleep(time.Second)
		synctest.Wait()
		ms = instrumentsOf(t, tel)
		if got := counted(t, ms, p+"queue.adds"); got != 4 {
			t.Errorf("queue.adds after a new object = %d, want 4", got)
		}
		if got := counted(t, ms, p+"queue.depth"); got != 4 {
			t.Errorf("queue.depth after a new object = %d, want 4", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestQueueDepthFallsAsAWorkerTakesEachKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, cacheObject("default", "a", 1), cacheObject("default", "b", 1), cacheObject("default", "c", 1))
		var calls counter
		inFlight, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			calls.Inc(m.Name)
			once.Do(func() {
				close(inFlight)
				<-release
			})
			return result{}, nil
		})
		stop := served(t, newTestController(t, f, testSettings(), rec, observed(tel)))
		<-inFlight
		synctest.Wait()

		ms := instrumentsOf(t, tel)
		if got := counted(t, ms, p+"queue.adds"); got != 3 {
			t.Errorf("queue.adds = %d, want 3", got)
		}
		if got := counted(t, ms, p+"queue.depth"); got != 2 {
			t.Errorf("queue.depth with one key taken = %d, want 2", got)
		}
		if got := queueDurations(t, ms).Count; got != 1 {
			t.Errorf("queue.duration counted %d takes, want 1", got)
		}

		close(release)
		time.Sleep(time.Minute)
		synctest.Wait()
		if keys := calls.Keys(); !slices.Equal(keys, []string{"a", "b", "c"}) {
			t.Fatalf("reconciled %v, want a, b and c", keys)
		}
		ms = instrumentsOf(t, tel)
		if got := counted(t, ms, p+"queue.depth"); got != 0 {
			t.Errorf("queue.depth once every key was taken = %d, want 0", got)
		}
		if got := counted(t, ms, p+"queue.adds"); got != 3 {
			t.Errorf("queue.adds = %d, want 3", got)
		}
		if got := queueDurations(t, ms).Count; got != 3 {
			t.Errorf("queue.duration counted %d takes, want 3", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestQueueDurationExcludesTheWaitOfAfterAndOfABackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, cacheObject("default", "later", 1), cacheObject("default", "fail", 1))
		var calls counter
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			calls.Inc(m.Name)
			if m.Name == "fail" {
				return result{}, errors.New("the memcached image can't be pulled")
			}
			return result{After: 10 * time.Second}, nil
		})
		s := testSettings()
		s.RetryBaseDelay, s.RetryMaxDelay = time.Second, 8*time.Second
		stop := served(t, newTestController(t, f, s, rec, observed(tel)))
		// Each object's first key waited for the caches to sync and the
		// Lease to be taken: that is a wait for a worker, and counted.
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		first := queueDurations(t, instrumentsOf(t, tel))
		if first.Count != 2 {
			t.Fatalf("queue.duration counted %d takes in the first 500ms, want 2", first.Count)
		}
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}

		if got := calls.Get("later"); got != 4 {
			t.Fatalf("later was reconciled %d times, want 4 (at 0, 10, 20 and 30s)", got)
		}
		if got := calls.Get("fail"); got < 6 {
			t.Fatalf("fail was reconciled %d times, want at least 6 (at 0, 1, 3, 7, 15 and 23s)", got)
		}
		dp := queueDurations(t, instrumentsOf(t, tel))
		if got, want := dp.Count, uint64(calls.Get("later")+calls.Get("fail")); got != want {
			t.Errorf("queue.duration counted %d takes, want one per reconcile, %d", got, want)
		}
		// Every take after the first waited for no worker. Had the waits of
		// After and of the backoff been counted, they would add over 50s.
		if got := dp.Sum - first.Sum; got >= proposalBuckets[0] {
			t.Errorf("queue.duration's takes after the first add up to %vs, want under %vs: the wait of After and of a backoff isn't counted", got, proposalBuckets[0])
		}
		if got, want := dp.BucketCounts[0]-first.BucketCounts[0], dp.Count-first.Count; got != want {
			t.Errorf("%d of the %d takes after the first are in the first bucket, want all", got, want)
		}
	})
}

func TestTheUnfinishedDurationGaugesWhileReconcilesAreInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, cacheObject("default", "a", 1))
		var mu sync.Mutex
		started := map[string]time.Time{}
		release := make(chan struct{})
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			mu.Lock()
			started[m.Name] = time.Now()
			mu.Unlock()
			<-release
			return result{}, nil
		})
		s := testSettings()
		s.Workers = 2
		stop := served(t, newTestController(t, f, s, rec, observed(tel)))
		time.Sleep(3 * time.Second)
		f.Create(t, cachesGVR, cacheObject("default", "b", 1))
		time.Sleep(2 * time.Second)
		synctest.Wait()

		mu.Lock()
		if len(started) != 2 {
			mu.Unlock()
			t.Fatalf("reconciles in flight = %d, want 2", len(started))
		}
		a, b := time.Since(started["a"]).Seconds(), time.Since(started["b"]).Seconds()
		mu.Unlock()
		// The queue sets them every 500ms: they are at most that old.
		ms := instrumentsOf(t, tel)
		if got := gauged(t, ms, p+"reconcile.longest_unfinished_duration"); got <= a-0.5 || got > a {
			t.Errorf("reconcile.longest_unfinished_duration = %vs, want the longest's %vs, within 500ms", got, a)
		}
		if got := gauged(t, ms, p+"reconcile.unfinished_duration"); got <= a+b-1 || got > a+b {
			t.Errorf("reconcile.unfinished_duration = %vs, want both added together, %vs, within 500ms each", got, a+b)
		}

		close(release)
		time.Sleep(time.Second)
		synctest.Wait()
		ms = instrumentsOf(t, tel)
		if got := gauged(t, ms, p+"reconcile.longest_unfinished_duration"); got != 0 {
			t.Errorf("reconcile.longest_unfinished_duration with none in flight = %v, want 0", got)
		}
		if got := gauged(t, ms, p+"reconcile.unfinished_duration"); got != 0 {
			t.Errorf("reconcile.unfinished_duration with none in flight = %v, want 0", got)
		}
		// The queue's goroutine that sets them stops with it: the bubble
		// fails the test on a goroutine that outlives it.
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// Every instrument is created with its kind (the proposal's, for its six), as a
// MeterProvider sees it: here, one that refuses each kind in turn.
func TestEachInstrumentIsCreatedWithItsKind(t *testing.T) {
	kinds := map[string][]string{
		"Int64UpDownCounter": {p + "queue.depth"},
		"Int64Counter":       {p + "queue.adds"},
		"Float64Histogram":   {p + "queue.duration", p + "reconcile.duration", p + "reconcile.change_latency"},
		"Float64Gauge":       {p + "reconcile.unfinished_duration", p + "reconcile.longest_unfinished_duration", p + "queue.oldest_wait"},
	}
	for kind, names := range kinds {
		t.Run(kind, func(t *testing.T) {
			_, err := newInstruments(refusingMeter{kind: kind})
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			var want []string
			for _, n := range names {
				want = append(want, fmt.Sprintf("kube: creating the instrument %s: %s refused", n, kind))
			}
			if !slices.Equal(got, want) {
				t.Errorf("newInstruments refusing %s = %q, want %q", kind, got, want)
			}
		})
	}
}

// refusingMeter refuses to create instruments of one kind.
type refusingMeter struct {
	metricnoop.Meter
	kind string
}

func (m refusingMeter) refuse(kind string) error {
	if kind == m.kind {
		return fmt.Errorf("%s refused", kind)
	}
	return nil
}

func (m refusingMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	i, _ := m.Meter.Int64UpDownCounter(name, opts...)
	return i, m.refuse("Int64UpDownCounter")
}

func (m refusingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	i, _ := m.Meter.Int64Counter(name, opts...)
	return i, m.refuse("Int64Counter")
}

func (m refusingMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	i, _ := m.Meter.Float64Histogram(name, opts...)
	return i, m.refuse("Float64Histogram")
}

func (m refusingMeter) Float64Gauge(name string, opts ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	i, _ := m.Meter.Float64Gauge(name, opts...)
	return i, m.refuse("Float64Gauge")
}

// gaugedBy returns a Float64 gauge's data points' values by the value of
// the attribute key, each checked for the controller's name.
func gaugedBy(t testing.TB, ms map[string]metricdata.Metrics, name string, key attribute.Key) map[string]float64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s; metrics: %v", name, keysOf(ms))
	}
	g, ok := m.Data.(metricdata.Gauge[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a metricdata.Gauge[float64]", name, m.Data)
	}
	out := map[string]float64{}
	for _, dp := range g.DataPoints {
		checkController(t, name, dp.Attributes)
		v, _ := dp.Attributes.Value(key)
		out[v.AsString()] = dp.Value
	}
	return out
}

// queue.oldest_wait is, for each priority, how long the key that has
// waited longest at it has waited: from its add, or from when this
// replica took the Lease if that is later, since a standby's keys wait for
// no worker. It reads 0 where no key waits, and once Serve has returned.
func TestOldestWaitIsTheLongestWaitByPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, backlog(5)...)
		j := newJournal()
		j.took = 10 * time.Second
		stop := served(t, newTestController(t, f, oneWorker(), reconcileFunc(j.reconcile), observed(tel)))
		time.Sleep(time.Second)
		synctest.Wait()
		// The first reconcile began as the term did, once the caches had
		// synced: the keys waited from before.
		j.mu.Lock()
		leading := j.start
		j.mu.Unlock()
		if got := gaugedBy(t, instrumentsOf(t, tel), p+"queue.oldest_wait", attrPriority); got["normal"] != 0 || got["low"] != time.Since(leading).Seconds() {
			t.Errorf("queue.oldest_wait at 1s = %v, want normal 0 and low %vs, since the Lease was taken", got, time.Since(leading).Seconds())
		}
		time.Sleep(2 * time.Second)
		relabel(t, f, "m-04", "a") // moves up from the backlog
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got := gaugedBy(t, instrumentsOf(t, tel), p+"queue.oldest_wait", attrPriority)
		if want := map[string]float64{"normal": 2, "low": time.Since(leading).Seconds()}; got["normal"] != want["normal"] || got["low"] != want["low"] {
			t.Errorf("queue.oldest_wait at 5s = %v, want %v", got, want)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		got = gaugedBy(t, instrumentsOf(t, tel), p+"queue.oldest_wait", attrPriority)
		if got["normal"] != 0 || got["low"] != 0 || len(got) != 2 {
			t.Errorf("queue.oldest_wait once Serve returned = %v, want 0 for normal and low", got)
		}
	})
}

// reconcile.change_latency runs from the change's write to the end of the
// first reconcile after it that succeeds. The API server stamps a write to
// the second (the newest of the object's managedFields); the event can't
// come before the write, so the write is taken as the stamp's second's
// end, or the event's arrival if earlier. A key no change queued, such as
// a cold start's, records nothing.
func TestChangeLatencyRunsFromTheAPIServersStampToTheEndOfTheReconcile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, backlog(2)...)
		j := newJournal()
		j.fail["y"] = 2
		stop := served(t, newTestController(t, f, oneWorker(), reconcileFunc(j.reconcile), observed(tel)))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if points := histogramPoints(t, instrumentsOf(t, tel), p+"reconcile.change_latency"); len(points) != 0 {
			t.Errorf("reconcile.change_latency after a cold start has %d points, want none", len(points))
		}

		// Stamped 3s ago, in a second that ended 2s ago: reconciled at
		// once, for 1s, 3s after the second's end.
		x := cacheObject("default", "x", 1)
		stamp := metav1.NewTime(time.Now().Add(-3 * time.Second))
		x.SetCreationTimestamp(metav1.NewTime(stamp.Add(-time.Hour)))
		x.SetManagedFields([]metav1.ManagedFieldsEntry{
			{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &stamp},
			{Manager: "earlier", Operation: metav1.ManagedFieldsOperationUpdate, Time: new(metav1.NewTime(stamp.Add(-time.Minute)))},
		})
		f.Create(t, cachesGVR, x)
		time.Sleep(10 * time.Second)
		// Stamped this second: from when its event came, now. It fails at
		// 1s and 3.5s (2.5s' backoff), and succeeds at 9.5s (5s more).
		y := cacheObject("default", "y", 1)
		y.SetCreationTimestamp(metav1.NewTime(time.Now()))
		f.Create(t, cachesGVR, y)
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}

		points := histogramPoints(t, instrumentsOf(t, tel), p+"reconcile.change_latency")
		if len(points) != 1 {
			t.Fatalf("reconcile.change_latency has %d points, want 1", len(points))
		}
		dp := points[0]
		checkController(t, p+"reconcile.change_latency", dp.Attributes)
		if dp.Count != 2 || dp.Sum != 3+10.5 {
			t.Errorf("reconcile.change_latency counted %d, summing %vs; want 2: x's 3s and y's 10.5s", dp.Count, dp.Sum)
		}
		if !slices.Equal(dp.Bounds, proposalBuckets) {
			t.Errorf("bounds = %v, want %v", dp.Bounds, proposalBuckets)
		}
		// 3s in (2.5, 5]; 10.5s past the last bound.
		if got := dp.BucketCounts; len(got) != len(proposalBuckets)+1 || got[11] != 1 || got[14] != 1 {
			t.Errorf("bucket counts = %v, want one in (2.5, 5] and one past 10", got)
		}
	})
}

// The readers of what the telemetry measured, kube/internal/teltest's.
var (
	instrumentsOf   = teltest.Instruments
	histogramPoints = teltest.HistogramPoints
)
