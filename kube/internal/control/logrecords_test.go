package control

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/z5labs/humus/humustest"
)

// A key that fails for a minute, retried with the default backoff from
// 5ms, or reconciled again on each of its object's changes, ten a second,
// gives a handful of WARN records, the first at once and each counting the
// failures since the one before; its spans and reconcile.duration count
// every failure.
func TestAKeyThatKeepsFailingIsRecordedAtASlowingRate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes time.Duration // how often the object changes, or 0
	}{
		{name: "retried with backoff"},
		{name: "changed ten times a second", changes: 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tel := humustest.NewTelemetry()
				f := newFakeCluster(t, listKinds, cacheObject("default", "fail", 1))
				var calls counter
				fails := reconcileFunc(func(context.Context, memcached) (result, error) {
					calls.Inc("fail")
					return result{}, errors.New(failMessage)
				})
				stop := served(t, newTestController(t, f, testSettings(), fails, observed(tel)))
				if tc.changes > 0 {
					for i := range int(time.Minute / tc.changes) {
						time.Sleep(tc.changes)
						f.Update(t, cachesGVR, cacheObject("default", "fail", int64(2+i)))
					}
				} else {
					time.Sleep(time.Minute)
				}
				synctest.Wait()
				if err := stop(); err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
				checkFailuresRecordedAtASlowingRate(t, tel, calls.Get("fail"))
			})
		})
	}
}

// checkFailuresRecordedAtASlowingRate checks fail's n failed reconciles:
// each a span and a reconcile.duration error, and at most seven WARN
// records in the minute (the first, then one after each wait of 1s, 2s,
// 4s, 8s, 16s and 32s), each in the span of a failure, and counting the
// failures since the record before it, itself included.
func checkFailuresRecordedAtASlowingRate(t *testing.T, tel *humustest.Telemetry, n int) {
	t.Helper()
	spans := reconcileSpansOf(tel, "Memcached", "fail")
	if len(spans) != n || reconcileDurations(t, tel)["error"].Count != uint64(n) {
		t.Errorf("%d failed reconciles: %d spans, %d reconcile.duration errors; want one each", n, len(spans), reconcileDurations(t, tel)["error"].Count)
	}
	failure := map[trace.SpanID]int{} // each failure's span, by its number
	for i, s := range spans {
		failure[s.SpanContext().SpanID()] = i
	}
	recs := recordsWithBody(tel, "reconcile failed")
	counts := make([]int, 0, len(recs))
	last := -1
	for _, r := range recs {
		i, ok := failure[r.SpanID()]
		if !ok {
			t.Fatalf("a record reconcile failed isn't in a failed reconcile's span")
		}
		counts = append(counts, failuresOf(t, r))
		if got, want := counts[len(counts)-1], i-last; got != want {
			t.Errorf("the record of failure %d counts %d failures, want %d: those since the record before it", i+1, got, want)
		}
		last = i
	}
	t.Logf("%d failures in a minute, %d records counting %v", n, len(recs), counts)
	if n < 10 {
		t.Fatalf("%d failures in a minute, want the key retried", n)
	}
	if len(recs) == 0 || len(recs) > 7 || counts[0] != 1 {
		t.Errorf("%d records of %d failures, counting %v; want at most 7, the first counting 1", len(recs), n, counts)
	}
}

// failureLog's waits double from a second to five minutes; a key that
// settles, or that hasn't failed for an hour, starts again, recorded at
// once.
func TestFailureLogWaitsDoubleAndStartAgain(t *testing.T) {
	l := NewFailureLog()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := func(key string, at time.Duration) (int, bool) { return l.Failed(key, start.Add(at)) }
	var recorded []time.Duration
	for at := time.Duration(0); at <= 30*time.Minute; at += 100 * time.Millisecond {
		if _, ok := fail("a", at); ok {
			recorded = append(recorded, at)
		}
	}
	var waits []time.Duration
	for i := 1; i < len(recorded); i++ {
		waits = append(waits, recorded[i]-recorded[i-1])
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
		64 * time.Second, 128 * time.Second, 256 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	if len(waits) < len(want) || !slices.Equal(waits[:len(want)], want) {
		t.Errorf("the waits between a's records = %v, want them doubling from 1s to 5m: %v", waits, want)
	}

	l.forget("a")
	if n, ok := fail("a", 30*time.Minute+time.Millisecond); !ok || n != 1 {
		t.Errorf("a's first failure once it settled = %d, %t; want recorded at once, counting 1", n, ok)
	}
	fail("b", 30*time.Minute+time.Millisecond)
	if n, ok := fail("b", 30*time.Minute+2*time.Millisecond); ok {
		t.Errorf("b's second failure, a millisecond after its first = %d, %t; want it held back", n, ok)
	}
	if n, ok := fail("c", 91*time.Minute); !ok || n != 1 {
		t.Errorf("c's first failure = %d, %t; want recorded at once, counting 1", n, ok)
	}
	if _, kept := l.Keys["b"]; kept {
		t.Error("b, which hasn't failed for an hour, is still kept")
	}
	if n, ok := fail("a", 91*time.Minute+time.Millisecond); !ok || n != 1 {
		t.Errorf("a's failure after an hour without one = %d, %t; want recorded at once, counting 1", n, ok)
	}
}
