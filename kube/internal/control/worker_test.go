package control

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/z5labs/humus/humustest"
)

// A reconcile that runs past Settings.ReconcileTimeout has its context
// ended, and is retried with backoff as an error is; its status is still
// applied, and its span, record and outcome say it timed out. Another
// object is reconciled meanwhile.
func TestAReconcilePastItsTimeoutIsEndedAndRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "hung", 1), cacheObject("default", "quick", 2))
		tel := humustest.NewTelemetry()
		s := testSettings()
		s.Workers, s.ReconcileTimeout = 2, 30*time.Second
		var calls counter
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			calls.Inc(m.Name)
			st := m.Status
			st.ReadyReplicas = m.Spec.Size
			if m.Name == "hung" {
				<-ctx.Done() // hangs until the bound ends it
				return result{Status: &st}, ctx.Err()
			}
			return result{Status: &st}, nil
		})
		served(t, newTestController(t, f, s, rec, observed(tel)))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if calls.Get("quick") != 1 || calls.Get("hung") != 1 {
			t.Fatalf("reconciles at 10s: quick %d, hung %d; want 1 each, hung's still running", calls.Get("quick"), calls.Get("hung"))
		}
		time.Sleep(25 * time.Second) // past the bound, and its first backoff
		synctest.Wait()
		if got := calls.Get("hung"); got < 2 {
			t.Errorf("reconciles of hung past its timeout = %d, want it retried", got)
		}
		if got := f.AppliesTo("status"); len(got) < 2 {
			t.Errorf("status applies = %d, want quick's and hung's", len(got))
		}

		var timedOut int
		for _, span := range tel.Spans() {
			if span.Status().Code == codes.Error && strings.Contains(span.Status().Description, "the reconcile timed out after 30s") {
				timedOut++
			}
		}
		if timedOut == 0 {
			t.Error("no reconcile span says it timed out after 30s")
		}
		var records int
		for _, r := range tel.Records() {
			if r.Body().AsString() == "reconcile timed out" {
				records++
			}
		}
		if records == 0 {
			t.Error("no record says the reconcile timed out")
		}
		if dp, ok := reconcileDurations(t, tel)["timeout"]; !ok || dp.Count == 0 {
			t.Errorf("reconcile.duration has no timeout outcome: %v", reconcileDurations(t, tel))
		}
	})
}

// A nil is a success whenever it comes (issue 44, point 8): a Finalize's
// f that returns nil after Settings.ReconcileTimeout has cleaned up, so
// its finalizer is removed and the deletion completes, f called once; a
// Reconciler that returns nil late has its status applied and its
// Result.After kept. Each overrun is recorded on the span and in a WARN
// record, and the outcome is success. Before, both were retried as timed
// out: f returned nil again and again, and the object was never deleted.
func TestANilAfterTheTimeoutIsASuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gone := deleting(cacheObject("default", "gone", 1), testFinalizer)
		f := newFakeCluster(t, listKinds, gone, cacheObject("default", "late", 2))
		tel := humustest.NewTelemetry()
		s := testSettings()
		s.Workers, s.ReconcileTimeout = 2, 30*time.Second
		var calls, finalized counter
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			if calls.Inc(m.Name) == 1 {
				<-ctx.Done()
				time.Sleep(5 * time.Second) // returns nil 5s past its bound
			}
			st := m.Status
			st.ReadyReplicas = m.Spec.Size
			return result{Status: &st, After: 10 * time.Minute}, nil
		})
		fin := finalizing(func(ctx context.Context, m memcached) error {
			finalized.Inc(m.Name)
			<-ctx.Done()
			time.Sleep(5 * time.Second)
			return nil
		})
		served(t, newTestController(t, f, s, rec, observed(tel), fin))
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := finalized.Get("gone"); n != 1 {
			t.Errorf("f called %d times, want once: its late nil is a success", n)
		}
		if _, err := f.Dyn.Tracker().Get(cachesGVR, "default", "gone"); err == nil {
			t.Error("gone is still there a minute on, want its finalizer removed and its deletion completed")
		}
		if n := calls.Get("late"); n != 1 {
			t.Errorf("late reconciled %d times in a minute, want once: its late nil is a success, its After 10m", n)
		}
		if u := f.Get(t, cachesGVR, "default", "late"); u.Object["status"] == nil {
			t.Error("late's status wasn't applied")
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if n := calls.Get("late"); n != 2 {
			t.Errorf("late reconciled %d times by 11m, want twice: its Result.After kept", n)
		}

		var events int
		for _, span := range tel.Spans() {
			for _, e := range span.Events() {
				if e.Name == "humus.kube.reconcile.overran" {
					events++
				}
			}
		}
		var records int
		for _, r := range tel.Records() {
			if r.Body().AsString() == "reconcile succeeded after its timeout" {
				records++
			}
		}
		if events != 2 || records != 2 {
			t.Errorf("overruns recorded: %d span events, %d records; want 2 of each, f's and late's", events, records)
		}
		if dp, ok := reconcileDurations(t, tel)["timeout"]; ok && dp.Count > 0 {
			t.Errorf("reconcile.duration has %d timeout outcomes, want none: both succeeded", dp.Count)
		}
	})
}
