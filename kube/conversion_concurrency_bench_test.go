package kube_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/z5labs/humus"
)

// BenchmarkConversionReviewConcurrent is the conversion handler under the
// load an API server puts on it as it starts: since Kubernetes 1.37 it
// decodes a watch cache's first list concurrently, and a conversion
// webhook sees up to 10 reviews at once. Ten goroutines each send review
// after review through one Handler's ServeHTTP (no TLS; no-op telemetry)
// until b.N are answered, of settled v1alpha1 Memcacheds
// (BenchmarkConversionReview's) asked for at v1beta1: a review of one
// object, as the API server sends for each object it reads or writes,
// and one of 500, a page of a list. ns/op is the wall time over the
// reviews (so reviews/s is 1e9 over it), p50-ms and p99-ms each review's
// own time, and peak-heap-B the most the heap's objects took while they
// ran, less before, sampled every 200µs.
func BenchmarkConversionReviewConcurrent(b *testing.B) {
	const concurrency = 10
	h, err := memcachedVersions().Handler(humus.Telemetry{})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 500} {
		objs := make([]string, n)
		for i := range objs {
			objs[i] = string(settledMemcached(b, fmt.Sprintf("memcached-%05d", i)))
		}
		body := reviewOf("cache.example.com/v1beta1", 0, "", objs...)
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			var next atomic.Int64
			latencies := make([][]time.Duration, concurrency)
			runtime.GC()
			base := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			metrics.Read(base)
			s := sampleHeap()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := range concurrency {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						r := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
						r.Header.Set("Content-Type", "application/json")
						w := &discardWriter{header: http.Header{}}
						start := time.Now()
						h.ServeHTTP(w, r)
						latencies[g] = append(latencies[g], time.Since(start))
						if w.code != http.StatusOK || !bytes.Contains(w.tail, []byte(`"status":"Success"`)) {
							b.Errorf("answered %d: %.300s", w.code, w.tail)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			top := s.peak()
			all := slices.Concat(latencies...)
			slices.Sort(all)
			if len(all) == 0 {
				return
			}
			b.ReportMetric(float64(all[len(all)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100])/1e6, "p99-ms")
			b.ReportMetric(float64(top-min(top, base[0].Value.Uint64())), "peak-heap-B")
		})
	}
}
