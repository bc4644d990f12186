package kube

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/control"
)

// Two controllers in one App, on one Client: a Website's and a
// ConfigMap's, each failing to reconcile its object team-a/app-settings,
// the Website's reading ConfigMaps through the Client's shared informer.
// Each record a controller writes, its own and client-go's, names the
// controller and its resource; the shared informer's name its resource.
func TestTwoControllersRecordsNameTheirControllerAndResource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, siteKinds,
			siteObject("team-a", "app-settings", "c1"),
			configMapObject("team-a", "app-settings", "one", nil),
			configMapObject("team-a", "c1", "two", nil),
		)
		client := testClient(t, fakeSetup(tel))
		cms := Read(client, configMapKind, Selector{})
		web, mirror := testSettings(), testSettings()
		web.Name, mirror.Name = "website-controller", "mirror-controller"
		web.RetryBaseDelay, mirror.RetryBaseDelay = time.Second, time.Second

		siteFails := ReconcilerFunc[siteSpec, siteStatus](func(ctx context.Context, w website) (Result[siteStatus], error) {
			return Result[siteStatus]{}, errors.New("the content can't be served")
		})
		setup := fakeSetup(tel)
		sc, err := NewController(setup, client, web, sites, siteFails, Reads(cms))
		sc = f.built(t, sc, err)
		mirrorFails := KindReconcilerFunc[corev1.ConfigMap](func(ctx context.Context, cm corev1.ConfigMap) (time.Duration, error) {
			return 0, errors.New("the namespace team-b isn't found")
		})
		mc, err := NewKindController(setup, client, mirror, configMapKind, mirrorFails)
		mc = f.built(t, mc, err)
		stopSites, stopMirror := served(t, sc), served(t, mc)
		settle(10 * time.Second)
		if err := stopSites(); err != nil {
			t.Errorf("the Website controller's Serve = %v, want nil", err)
		}
		if err := stopMirror(); err != nil {
			t.Errorf("the ConfigMap controller's Serve = %v, want nil", err)
		}

		checkRecordsNameTheirControllerAndResource(t, tel, map[string]string{
			"website-controller": "websites.web.example.com",
			"mirror-controller":  "configmaps",
		})
	})
}

// checkRecordsNameTheirControllerAndResource checks that every record of
// tel names a resource: a controller's record, its own and client-go's,
// names the controller and its resource, in resources, and tells its
// failures of team-a/app-settings apart from the other's; the shared
// informer of ConfigMaps, which the Website controller started, names
// ConfigMaps and no controller.
func checkRecordsNameTheirControllerAndResource(t *testing.T, tel *humustest.Telemetry, resources map[string]string) {
	t.Helper()
	byController := map[string]map[string]int{} // a controller's records by body
	var shared []string
	for _, r := range tel.Records() {
		attrs, body := recordAttrs(r), r.Body().AsString()
		name, ok := attrs[control.AttrController]
		if !ok {
			if attrs[control.AttrResource] != "configmaps" {
				t.Errorf("the record %q %v names no controller, and isn't the shared informer's of configmaps", body, attrs)
			}
			shared = append(shared, body)
			continue
		}
		if want, known := resources[name]; !known || attrs[control.AttrResource] != want {
			t.Errorf("the record %q of %s names the resource %q, want %q", body, name, attrs[control.AttrResource], want)
		}
		if body == "reconcile failed" && (attrs[control.AttrNamespace] != "team-a" || attrs[control.AttrObjectName] != "app-settings") {
			continue
		}
		if byController[name] == nil {
			byController[name] = map[string]int{}
		}
		byController[name][body]++
	}
	for name := range resources {
		for _, body := range []string{
			"Waiting for caches to sync", "Caches are synced", // the cache sync's
			"Attempting to acquire leader lease...", "Successfully acquired lease", // leader election's
			"Caches populated", // the reflector's, of its own resource
			"reconcile failed", // its own, of team-a/app-settings
		} {
			if byController[name][body] == 0 {
				t.Errorf("no record %q names %s; its records: %v", body, name, byController[name])
			}
		}
	}
	if !slices.Contains(shared, "Caches populated") {
		t.Errorf("the shared informer's records = %q, want its reflector's Caches populated, naming no controller", shared)
	}
}

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
				fails := ReconcilerFunc[cacheSpec, cacheStatus](func(context.Context, memcached) (Result[cacheStatus], error) {
					calls.inc("fail")
					return Result[cacheStatus]{}, errors.New(failMessage)
				})
				stop := served(t, observedController(t, f, tel, testSettings(), fails))
				if tc.changes > 0 {
					for i := range int(time.Minute / tc.changes) {
						time.Sleep(tc.changes)
						f.update(t, cachesGVR, cacheObject("default", "fail", int64(2+i)))
					}
				} else {
					time.Sleep(time.Minute)
				}
				synctest.Wait()
				if err := stop(); err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
				checkFailuresRecordedAtASlowingRate(t, tel, calls.get("fail"))
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
	l := control.NewFailureLog()
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

	l.Forget("a")
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
