package bench_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/z5labs/humus/kube/example/memcached/app"
)

// BenchmarkClusterLiveChanges is a user's changes during a cold start: N =
// 10,000 Memcacheds exist before the App starts, and as it works through
// them, 20 of their sizes are changed, spread through the backlog; each
// change's latency is the time until its Deployment has the new size. The
// same cold start without the changes, in the same run before and after
// it, is what its settle time is compared with.
func BenchmarkClusterLiveChanges(b *testing.B) {
	b.Run(fmt.Sprintf("N=%d", scaled(10000)), func(b *testing.B) {
		for range b.N {
			liveChanges(b, scaled(10000), 20)
		}
	})
}

// liveChanges runs the cold start without changes, then with them, then
// without again, and compares the one with changes with the mean of the
// two without: the control plane slows by some percent from one phase of
// a run to the next, as much as the changes' cost being measured, and so
// counts neither for nor against them.
func liveChanges(b *testing.B, n, changes int) {
	bn := newBench(b)
	before := bn.coldRun(b, n, 0)
	busy := bn.coldRun(b, n, changes)
	after := bn.coldRun(b, n, 0)
	quiet := coldRun{
		settle:     (before.settle + after.settle) / 2,
		reconciles: (before.reconciles + after.reconciles) / 2,
		cpu:        (before.cpu + after.cpu) / 2,
	}
	b.ReportMetric(before.settle.Seconds(), "settle-quiet-before-s")
	b.ReportMetric(after.settle.Seconds(), "settle-quiet-after-s")
	slices.Sort(busy.latencies)
	at := func(q float64) float64 { return busy.latencies[int(q*float64(len(busy.latencies)-1)+0.5)] }
	b.ReportMetric(busy.settle.Seconds(), "settle-s")
	b.ReportMetric(quiet.settle.Seconds(), "settle-quiet-s")
	b.ReportMetric(busy.settle.Seconds()/quiet.settle.Seconds(), "settle-vs-quiet")
	// The App's own CPU, which the machine's other load sways less than
	// the settle time.
	b.ReportMetric(busy.cpu/quiet.cpu, "cpu-vs-quiet")
	b.ReportMetric(float64(busy.reconciles)-float64(quiet.reconciles), "extra-reconciles")
	b.ReportMetric(at(0.5), "change-latency-p50-s")
	b.ReportMetric(at(0.99), "change-latency-p99-s")
	b.ReportMetric(busy.latencies[len(busy.latencies)-1], "change-latency-max-s")
	b.ReportMetric(busy.appLatencyP99, "app-change-latency-p99-s")
	b.ReportMetric(float64(busy.reconciles)/float64(n), "reconciles/object")
}

// coldRun is one cold start's figures.
type coldRun struct {
	settle        time.Duration
	latencies     []float64 // each change's, in seconds
	appLatencyP99 float64   // reconcile.change_latency's p99, from the App's instrument
	reconciles    uint64
	cpu           float64 // the App's CPU seconds, once idle
}

// coldRun runs a cold start of n Memcacheds in a namespace of its own,
// making changes of their sizes while the App works through them, one
// each time another n/(changes+1) have settled.
func (bn *bench) coldRun(b *testing.B, n, changes int) coldRun {
	b.Helper()
	ns := bn.c.Namespace(b)
	progress(b, "creating %d Memcacheds", n)
	bn.create(b, ns, 0, n)
	s := bn.track(b, ns, n)
	defer s.close()
	progress(b, "starting the App, %d changes during its cold start", changes)
	ctrl := bn.prepare(b, ns, "memcached-controller-0", 4, nil)
	start := time.Now()
	ctrl.p.start(b)
	var latencies []float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		latencies = bn.changeDuring(b, ns, s, n, changes)
	}()
	settle := s.await(b, n, start)
	<-done
	idle(b, ctrl, uint64(n))
	run := coldRun{settle: settle, latencies: latencies, reconciles: ctrl.reconciles(b), cpu: ctrl.p.usage(b).CPU}
	h := ctrl.p.histogram(b, "humus.kube.controller.reconcile.change_latency", "")
	run.appLatencyP99 = quantile(0.99, h.Bounds, h.Buckets)
	progress(b, "settled in %s; changes' latencies %v; the App's change_latency: %s", settle.Round(time.Millisecond), latencies, buckets(h.Bounds, h.Buckets))
	bn.drop(b, ns, ctrl)
	return run
}

// changeDuring makes changes, each once another n/(changes+1) Memcacheds
// have settled: in turn, to the last in the backlog's order that hasn't
// settled (its key waits), and to the first that has (its key is new). It
// returns their latencies, in seconds, once every change's Deployment has
// its new size.
func (bn *bench) changeDuring(b *testing.B, ns string, s *settled, n, changes int) []float64 {
	// The initial list's order, which the backlog's keys are queued in: the
	// API server lists by name.
	names := make([]string, n)
	for i := range names {
		names[i] = "m-" + strconv.Itoa(i)
	}
	slices.Sort(names)
	first, last := 0, n-1
	var mu sync.Mutex
	var wg sync.WaitGroup
	latencies := make([]float64, 0, changes)
	for k := 1; k <= changes; k++ {
		for s.count() < k*n/(changes+1) {
			time.Sleep(10 * time.Millisecond)
		}
		var name string
		if k%2 == 1 {
			for last > 0 && s.has(names[last]) {
				last--
			}
			name, last = names[last], last-1
		} else {
			for first < n-1 && !s.has(names[first]) {
				first++
			}
			name, first = names[first], first+1
		}
		wg.Go(func() {
			d, err := bn.change(ns, name)
			if err != nil {
				b.Errorf("changing %s: %v", name, err)
				return
			}
			mu.Lock()
			latencies = append(latencies, d.Seconds())
			mu.Unlock()
		})
	}
	wg.Wait()
	return latencies
}

// change changes the size of the Memcached name, and returns the time from
// just before its write until a watch of its Deployment sees the new
// size.
func (bn *bench) change(ns, name string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	memcacheds := bn.dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	m, err := memcacheds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	var obj memcached
	if err := decode(m, &obj); err != nil {
		return 0, err
	}
	size := obj.Spec.Size%3 + 1
	w, err := bn.kc.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	start := time.Now()
	patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)
	if _, err := memcacheds.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return 0, err
	}
	for ev := range w.ResultChan() {
		if d, ok := ev.Object.(*appsv1.Deployment); ok && d.Spec.Replicas != nil && *d.Spec.Replicas == size {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("the watch of its Deployment ended before it had size %d: %w", size, ctx.Err())
}

// BenchmarkClusterColdChurn is creates during a cold start: N = 10,000
// Memcacheds exist before the App starts, and from when it has synced,
// new ones are created at about half the ceiling's rate for 60 s; the
// latency from each new one's create to its object settled, and the cold
// start's settle time.
func BenchmarkClusterColdChurn(b *testing.B) {
	b.Run(fmt.Sprintf("N=%d", scaled(10000)), func(b *testing.B) {
		for range b.N {
			coldChurn(b, scaled(10000))
		}
	})
}

func coldChurn(b *testing.B, n int) {
	bn := newBench(b)
	rate := bn.ceiling(b, scaled(500), 4, "").rate / 2
	ns := bn.c.Namespace(b)
	progress(b, "creating %d Memcacheds", n)
	bn.create(b, ns, 0, n)
	period := time.Duration(float64(60*time.Second) * *scale)
	total := max(1, int(rate*period.Seconds()))
	s := bn.track(b, ns, n+total)
	defer s.close()
	ctrl := bn.prepare(b, ns, "memcached-controller-0", 4, nil)
	start := time.Now()
	ctrl.p.start(b)
	ctrl.synced(b)
	progress(b, "synced; creating %d Memcacheds at %.0f a second", total, rate)
	created := bn.createAt(b, ns, n, total, rate)
	settle := s.await(b, n+total, start)
	at := s.times()
	var cold time.Time
	latencies := make([]float64, 0, total)
	for name, t := range at {
		i, _ := strconv.Atoi(name[len("m-"):])
		if i < n {
			if t.After(cold) {
				cold = t
			}
			continue
		}
		latencies = append(latencies, t.Sub(created[i-n]).Seconds())
	}
	slices.Sort(latencies)
	idle(b, ctrl, uint64(n+total))
	queued := ctrl.p.histogram(b, "humus.kube.controller.queue.duration", "")
	changed := ctrl.p.histogram(b, "humus.kube.controller.reconcile.change_latency", "")
	b.ReportMetric(rate, "create-objects/s")
	b.ReportMetric(latencies[len(latencies)/2], "latency-p50-s")
	b.ReportMetric(latencies[len(latencies)*99/100], "latency-p99-s")
	b.ReportMetric(latencies[len(latencies)-1], "latency-max-s")
	b.ReportMetric(cold.Sub(start).Seconds(), "cold-settle-s")
	b.ReportMetric(settle.Seconds(), "settle-s")
	b.ReportMetric(quantile(0.99, queued.Bounds, queued.Buckets), "queue-p99-s")
	b.ReportMetric(quantile(0.99, changed.Bounds, changed.Buckets), "app-change-latency-p99-s")
	b.ReportMetric(float64(ctrl.reconciles(b))/float64(n+total), "reconciles/object")
	bn.drop(b, ns, ctrl)
}

// createAt creates Memcacheds m-<from> to m-<from+total-1> in ns, rate a
// second, and returns when it began each.
func (bn *bench) createAt(b *testing.B, ns string, from, total int, rate float64) []time.Time {
	b.Helper()
	created := make([]time.Time, total)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	memcacheds := bn.dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	for i := range total {
		<-tick.C
		created[i] = time.Now()
		wg.Go(func() {
			if _, err := memcacheds.Create(context.Background(), newMemcached(from+i), metav1.CreateOptions{}); err != nil {
				b.Errorf("creating m-%d: %v", from+i, err)
			}
		})
	}
	wg.Wait()
	return created
}

// buckets writes a histogram's counts by bucket, the empty ones left out,
// such as "≤0.1s: 18, ≤10s: 2".
func buckets(bounds []float64, counts []uint64) string {
	var parts []string
	for i, n := range counts {
		if n == 0 {
			continue
		}
		bound := "+Inf"
		if i < len(bounds) {
			bound = strconv.FormatFloat(bounds[i], 'g', -1, 64) + "s"
		}
		parts = append(parts, fmt.Sprintf("≤%s: %d", bound, n))
	}
	return strings.Join(parts, ", ")
}
