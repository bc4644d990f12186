package bench_test

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkClusterBurstChange is a change behind another's burst: the App
// runs, 100 Memcacheds settled, when N = 10,000 more are created as fast as
// the API server takes them (a `kubectl apply` of many, say); once they
// are all created, one of the first 100 is changed, and its latency to its
// Deployment is measured. Each create is a real change, queued at normal
// priority, as the change is: the queue orders keys by priority and
// arrival, not by namespace, so this is how long a change in any
// namespace waits behind another namespace's burst. It is what says
// whether fairness between namespaces is worth a policy.
func BenchmarkClusterBurstChange(b *testing.B) {
	b.Run(fmt.Sprintf("N=%d", scaled(10000)), func(b *testing.B) {
		for range b.N {
			burstChange(b, scaled(10000))
		}
	})
}

func burstChange(b *testing.B, n int) {
	const first = 100
	bn := newBench(b)
	ns := bn.c.Namespace(b)
	bn.create(b, ns, 0, first)
	s := bn.track(b, ns, first+n)
	defer s.close()
	ctrl := bn.prepare(b, ns, "memcached-controller-0", 4, nil)
	ctrl.p.start(b)
	for s.count() < first {
		time.Sleep(10 * time.Millisecond)
	}
	progress(b, "%d settled; creating %d more at once", first, n)
	burst := time.Now()
	bn.create(b, ns, first, first+n)
	created := time.Since(burst)
	behind := n - (s.count() - first) // the burst's objects not yet settled
	latency, err := bn.change(ns, "m-0")
	if err != nil {
		b.Fatalf("changing m-0: %v", err)
	}
	settle := s.await(b, first+n, burst)
	progress(b, "created in %s; the change behind %d of them took %s; settled in %s",
		created.Round(time.Millisecond), behind, latency.Round(time.Millisecond), settle.Round(time.Millisecond))
	b.ReportMetric(created.Seconds(), "burst-create-s")
	b.ReportMetric(float64(behind), "behind-objects")
	b.ReportMetric(latency.Seconds(), "change-latency-s")
	b.ReportMetric(settle.Seconds(), "burst-settle-s")
	b.ReportMetric(float64(n)/settle.Seconds(), "burst-objects/s")
	idle(b, ctrl, uint64(first+n+1))
	bn.drop(b, ns, ctrl)
}
