package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus/humustest"
)

// resize changes the object's spec in the fake cluster, as an edit would.
func resize(t *testing.T, f *fakeCluster, name string, size int64) {
	t.Helper()
	u := f.get(t, cachesGVR, "default", name)
	if err := unstructured.SetNestedField(u.Object, size, "spec", "size"); err != nil {
		t.Fatal(err)
	}
	f.update(t, cachesGVR, u)
}

// sleepUntil sleeps until d after start, and lets the bubble settle.
func sleepUntil(start time.Time, d time.Duration) {
	time.Sleep(time.Until(start.Add(d)))
	synctest.Wait()
}

// heldReconciler is a Reconciler whose first reconcile waits, in flight,
// until release is closed, and then ends with first; every later one ends
// with rest.
type heldReconciler struct {
	calls    counter
	inFlight chan struct{}
	release  chan struct{}
	first    func() (Result[cacheStatus], error)
	rest     func() (Result[cacheStatus], error)
}

func newHeldReconciler(first, rest func() (Result[cacheStatus], error)) *heldReconciler {
	return &heldReconciler{inFlight: make(chan struct{}), release: make(chan struct{}), first: first, rest: rest}
}

func (h *heldReconciler) Reconcile(ctx context.Context, m memcached) (Result[cacheStatus], error) {
	if h.calls.inc(m.Name) == 1 {
		close(h.inFlight)
		<-h.release
		return h.first()
	}
	return h.rest()
}

// changeWhileInFlight waits for h's first reconcile, changes the object
// while it is in flight, so the change queues the key again behind it, and
// then lets the reconcile end.
func (h *heldReconciler) changeWhileInFlight(t *testing.T, f *fakeCluster) {
	t.Helper()
	<-h.inFlight
	time.Sleep(time.Second)
	resize(t, f, "m", 2)
	synctest.Wait() // the change's event has queued the key
	close(h.release)
	synctest.Wait()
}

func TestAChangeSupersedesAPendingAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls counter
		rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
			calls.inc(m.Name)
			return Result[cacheStatus]{After: 10 * time.Second}, nil
		})
		stop := served(t, newTestController(t, f, testSettings(), rec))

		sleepUntil(start, 5*time.Second)
		if got := calls.get("m"); got != 1 {
			t.Fatalf("reconciles in 5s = %d, want 1", got)
		}
		resize(t, f, "m", 2)
		sleepUntil(start, 12*time.Second)
		if got := calls.get("m"); got != 2 {
			t.Errorf("reconciles by 12s = %d, want 2 (at 0 and 5s): the change at 5s replaces the After of 10s due at 10s", got)
		}
		sleepUntil(start, 16*time.Second)
		if got := calls.get("m"); got != 3 {
			t.Errorf("reconciles by 16s = %d, want 3: the change's own reconcile's After is due at 15s", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestAChangeSupersedesAPendingBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls counter
		rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
			if calls.inc(m.Name) == 1 {
				return Result[cacheStatus]{}, errors.New("the memcached image can't be pulled")
			}
			return Result[cacheStatus]{}, nil
		})
		s := testSettings()
		s.RetryBaseDelay, s.RetryMaxDelay = 10*time.Second, time.Minute
		stop := served(t, newTestController(t, f, s, rec))

		sleepUntil(start, time.Second)
		resize(t, f, "m", 2)
		sleepUntil(start, 2*time.Second)
		if got := calls.get("m"); got != 2 {
			t.Fatalf("reconciles by 2s = %d, want 2: the failure at 0, and the change at 1s", got)
		}
		sleepUntil(start, 30*time.Second)
		if got := calls.get("m"); got != 2 {
			t.Errorf("reconciles in 30s = %d, want 2: the change, reconciled, replaced the failure's backoff due at 10s", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestASuccessfulReconcileSupersedesAPendingBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		rec := newHeldReconciler(
			func() (Result[cacheStatus], error) {
				return Result[cacheStatus]{}, errors.New("the memcached image can't be pulled")
			},
			func() (Result[cacheStatus], error) { return Result[cacheStatus]{}, nil },
		)
		s := testSettings()
		s.RetryBaseDelay, s.RetryMaxDelay = 10*time.Second, time.Minute
		stop := served(t, newTestController(t, f, s, rec))

		// The change comes while the failing reconcile is in flight: its
		// backoff is set after the change, and only the reconcile that
		// follows, which succeeds, can take it back.
		rec.changeWhileInFlight(t, f)
		if got := rec.calls.get("m"); got != 2 {
			t.Fatalf("reconciles once the first failed = %d, want 2: the change queued the key behind it", got)
		}
		sleepUntil(start, 30*time.Second)
		if got := rec.calls.get("m"); got != 2 {
			t.Errorf("reconciles in 30s = %d, want 2: the success forgets the failure's backoff, due at 11s", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestAPanicSupersedesAPendingAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		rec := newHeldReconciler(
			func() (Result[cacheStatus], error) { return Result[cacheStatus]{After: 10 * time.Second}, nil },
			func() (Result[cacheStatus], error) { panic("the cache's volume is gone") },
		)
		stop := served(t, newTestController(t, f, testSettings(), rec))

		rec.changeWhileInFlight(t, f)
		if got := rec.calls.get("m"); got != 2 {
			t.Fatalf("reconciles once the first returned = %d, want 2: the change queued the key behind it", got)
		}
		sleepUntil(start, 30*time.Second)
		if got := rec.calls.get("m"); got != 2 {
			t.Errorf("reconciles in 30s = %d, want 2: the panic forgets the first reconcile's After, due at 11s", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// aheadRV is the resourceVersion the API server answers the controller's
// status apply with, far ahead of every one the cache will see: as after
// etcd was restored from a backup, and the API server's resourceVersions
// went backwards.
const aheadRV = "1000000"

func TestReadingYourOwnWritesHoldsAKeyBackNoLongerThanItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		f.answerStatusAppliesAt(aheadRV)
		var calls counter
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls)))

		sleepUntil(start, time.Second)
		if got := len(f.appliesTo("status")); got != 1 {
			t.Fatalf("status applies = %d, want 1", got)
		}
		// The object changes, with a resourceVersion behind the write's.
		resize(t, f, "m", 5)
		sleepUntil(start, rywBound-time.Second)
		if got := calls.get("m"); got != 1 {
			t.Errorf("reconciles within rywBound of the write = %d, want 1: a cache behind the key's own write holds it back", got)
		}
		sleepUntil(start, rywBound+5*time.Second)
		if got := calls.get("m"); got != 2 {
			t.Errorf("reconciles by rywBound+5s = %d, want 2: a write the cache never catches up with is forgotten after rywBound", got)
		}
		if n, _, _ := unstructured.NestedInt64(f.get(t, cachesGVR, "default", "m").Object, "status", "readyReplicas"); n != 5 {
			t.Errorf("status.readyReplicas = %d, want 5: the change was reconciled", n)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// undecodable is an object whose spec.size is a string, where the Go type
// has an int32.
func undecodable(name string) *unstructured.Unstructured {
	return object("cache.example.com/v1alpha1", "Memcached", "default", name, map[string]any{"size": "big"})
}

const wantDecodeError = "kube: decoding Memcached default/m: field spec.size: a JSON string can't be a Go int32"

func TestAnObjectThatCannotBeDecodedGetsNoFinalizer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, undecodable("m"))
		tel := humustest.NewTelemetry()
		var calls, finalized counter
		fin := Finalize("cache.example.com/finalizer", func(ctx context.Context, m memcached) error {
			finalized.inc(m.Name)
			return nil
		})
		stop := served(t, observedController(t, f, tel, testSettings(), readyReplicas(&calls), fin))
		time.Sleep(10 * time.Second)
		synctest.Wait()

		if adds := f.appliesTo(""); len(adds) != 0 {
			t.Errorf("finalizer applies = %d (%v), want none: the decode fails before the finalizer", len(adds), adds[0].body)
		}
		if got := f.get(t, cachesGVR, "default", "m").GetFinalizers(); len(got) != 0 {
			t.Errorf("finalizers = %v, want none", got)
		}
		if calls.get("m") != 0 || finalized.get("m") != 0 {
			t.Errorf("the Reconciler ran %d times and f %d, want neither", calls.get("m"), finalized.get("m"))
		}
		failed := recordsWithBody(tel, "reconcile failed")
		if len(failed) == 0 {
			t.Fatal("no reconcile failed record")
		}
		attrs := recordAttrs(failed[0])
		if got := attrs["error"]; got != wantDecodeError {
			t.Errorf("the record's error = %q, want %q", got, wantDecodeError)
		}
		if attrs[attrObjectName] != "m" || attrs[attrNamespace] != "default" {
			t.Errorf("the record's attributes = %v, want the object default/m", attrs)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// A status that can't be decoded (a field of the wrong type, written by an
// older version of the type) is the controller's own output, which only it
// can mend: the reconcile is handed the object with a zero status, with a
// WARN record naming the field, and the status it returns is applied, so
// the next decode succeeds (issue 22, point 10: before, the decode failed
// every time, and the controller could never write the status that would
// mend it). A spec that can't be decoded is an error still.
func TestAStatusThatCannotBeDecodedIsReconciledFromAZeroStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := cacheObject("default", "m", 3)
		m.Object["status"] = map[string]any{"readyReplicas": "three", "conditions": []any{}}
		f := newFakeCluster(t, listKinds, m)
		tel := humustest.NewTelemetry()
		var calls counter
		var handed []cacheStatus
		var mu sync.Mutex
		rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
			mu.Lock()
			handed = append(handed, m.Status)
			mu.Unlock()
			return readyReplicas(&calls)(ctx, m)
		})
		stop := served(t, observedController(t, f, tel, testSettings(), rec))
		time.Sleep(10 * time.Second)
		synctest.Wait()

		if got := calls.get("m"); got != 1 {
			t.Fatalf("reconciles = %d, want 1", got)
		}
		if len(handed) == 0 || handed[0].ReadyReplicas != 0 || handed[0].Conditions != nil {
			t.Errorf("the status handed to the Reconciler = %+v, want the zero status", handed)
		}
		st, _, _ := unstructured.NestedMap(f.get(t, cachesGVR, "default", "m").Object, "status")
		if st["readyReplicas"] != int64(3) {
			t.Errorf("the status the API server holds = %v, want readyReplicas 3, the Reconciler's", st)
		}
		warned := recordsWithBody(tel, "the status can't be decoded: reconciling from a zero status")
		if len(warned) != 1 {
			t.Fatalf("WARN records of the status = %d, want 1", len(warned))
		}
		const want = "kube: decoding Memcached default/m: field status.readyReplicas: a JSON string can't be a Go int32"
		if got := recordAttrs(warned[0])["error"]; got != want {
			t.Errorf("the record's error = %q, want %q", got, want)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestADeletingObjectThatCannotBeDecodedIsRetriedWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, deleting(undecodable("m"), "cache.example.com/finalizer"))
		tel := humustest.NewTelemetry()
		var calls, finalized counter
		fin := Finalize("cache.example.com/finalizer", func(ctx context.Context, m memcached) error {
			finalized.inc(m.Name)
			return nil
		})
		s := testSettings()
		s.RetryBaseDelay, s.RetryMaxDelay = time.Second, 8*time.Second
		stop := served(t, observedController(t, f, tel, s, readyReplicas(&calls), fin))
		sleepUntil(start, time.Minute)

		if got := finalized.get("m"); got != 0 {
			t.Errorf("f ran %d times, want never: the object can't be decoded", got)
		}
		if got := f.get(t, cachesGVR, "default", "m").GetFinalizers(); len(got) != 1 {
			t.Errorf("finalizers = %v, want the finalizer kept", got)
		}
		if got := len(f.appliesTo("")); got != 0 {
			t.Errorf("finalizer applies = %d, want none", got)
		}
		for i, r := range recordsWithBody(tel, "reconcile failed") {
			if got := recordAttrs(r)["error"]; got != wantDecodeError {
				t.Errorf("record %d's error = %q, want %q", i, got, wantDecodeError)
			}
		}
		// Every failed reconcile is a span; its records are fewer (see
		// failureLog).
		failed := reconcileSpansOf(tel, "Memcached", "m")
		var gaps []time.Duration
		for i, s := range failed {
			if got := s.Status().Description; got != wantDecodeError {
				t.Errorf("reconcile %d's status = %q, want %q", i, got, wantDecodeError)
			}
			if i > 0 {
				gaps = append(gaps, s.StartTime().Sub(failed[i-1].StartTime()))
			}
		}
		// At 0, 1, 3, 7, 15, 23, 31, 39, 47 and 55s.
		want := []time.Duration{1, 2, 4, 8, 8, 8, 8, 8, 8}
		if len(gaps) != len(want) {
			t.Fatalf("failed reconciles in a minute = %d with gaps %v, want %d: one per backoff, doubling from 1s to 8s", len(failed), gaps, len(want)+1)
		}
		for i, w := range want {
			if gaps[i] != w*time.Second {
				t.Errorf("retry %d came after %v, want %v (gaps %v)", i+1, gaps[i], w*time.Second, gaps)
			}
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// uidOf returns the metadata.uid of an apply's body.
func uidOf(a applied) any {
	meta, _ := a.body["metadata"].(map[string]any)
	return meta["uid"]
}

func TestEveryWriteCarriesTheObjectsUID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		var calls counter
		fin := Finalize("cache.example.com/finalizer", func(ctx context.Context, m memcached) error { return nil })
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls), fin))
		time.Sleep(10 * time.Second)
		synctest.Wait()

		f.beginDeletion(t, cachesGVR, "default", "m")
		time.Sleep(10 * time.Second)
		synctest.Wait()

		statuses, finalizers := f.appliesTo("status"), f.appliesTo("")
		if len(statuses) != 1 || len(finalizers) != 2 {
			t.Fatalf("applies = %d of the status and %d of the finalizer, want 1 and 2 (its add and its removal)", len(statuses), len(finalizers))
		}
		for _, a := range append(statuses, finalizers...) {
			if got := uidOf(a); got != "uid-m" {
				t.Errorf("the %q apply's metadata.uid = %v, want uid-m: %v", a.subresource, got, a.body)
			}
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestAWriteRefusedForAStaleObjectIsNotRetried(t *testing.T) {
	gr := cachesGVR.GroupResource()
	gk := schema.GroupKind{Group: caches.Group, Kind: caches.Kind}
	invalid := func(path *field.Path) error {
		return apierrors.NewInvalid(gk, "m", field.ErrorList{field.Invalid(path, "uid-m", "field is immutable")})
	}
	for _, tc := range []struct {
		name  string
		err   error
		stale bool
	}{
		{"NotFound", apierrors.NewNotFound(gr, "m"), true},
		{"Conflict", apierrors.NewConflict(gr, "m", errors.New("uid mismatch: the object has UID uid-m2")), true},
		{"InvalidUID", invalid(field.NewPath("metadata", "uid")), true},
		{"InvalidOtherField", invalid(field.NewPath("status", "readyReplicas")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
				f.dyn.PrependReactor("patch", "memcacheds", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if a.GetSubresource() == "status" {
						return true, nil, tc.err
					}
					return false, nil, nil
				})
				tel := humustest.NewTelemetry()
				var calls counter
				stop := served(t, observedController(t, f, tel, testSettings(), readyReplicas(&calls)))
				time.Sleep(time.Minute)
				synctest.Wait()

				skipped, failed := recordsWithBody(tel, "reconcile skipped a stale object"), recordsWithBody(tel, "reconcile failed")
				if tc.stale {
					if got := calls.get("m"); got != 1 {
						t.Errorf("reconciles in a minute = %d, want 1: a write refused for a stale object drops the key", got)
					}
					if len(skipped) != 1 || len(failed) != 0 {
						t.Errorf("records: %d stale, %d failed; want 1 and none", len(skipped), len(failed))
					} else if got := recordAttrs(skipped[0])["error"]; !strings.Contains(got, tc.err.Error()) {
						t.Errorf("the stale record's error = %q, want it to carry %q", got, tc.err)
					}
				} else {
					if got := calls.get("m"); got < 3 {
						t.Errorf("reconciles in a minute = %d, want the error retried", got)
					}
					if len(skipped) != 0 || len(failed) < 3 {
						t.Errorf("records: %d stale, %d failed; want none and a failure per reconcile", len(skipped), len(failed))
					}
				}
				if err := stop(); err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
			})
		})
	}
}

func TestReadingYourOwnWritesHoldsAKeyBackNoLongerThanRywBoundAfterTheWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		f.answerStatusAppliesAt(aheadRV)
		var calls counter
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls)))
		sleepUntil(start, rywBound-time.Second)
		resize(t, f, "m", 5)
		sleepUntil(start, rywBound+2*time.Second)
		if got := calls.get("m"); got != 2 {
			t.Errorf("reconciles by rywBound+2s after the write = %d, want 2", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// A reconcile's own writes, its finalizer and its status, are its outcome:
// their events queue nothing, whether they come before or after a worker
// reconciled the write from the cache. Any other version's event queues
// the key, and so does the event of an own write that brings a change of
// someone else's with it (a relist folds the versions between two lists
// into one event).
func TestTheEventsOfAReconcilesOwnWritesQueueNothing(t *testing.T) {
	input := versionOfM("3")
	for _, tc := range ownWriteEvents(input) {
		t.Run(tc.name, func(t *testing.T) {
			q := newCountingQueue(t)
			sh := testWork(q)
			c := &Controller{finalizer: testFinalizer, versions: writtenVersions{manager: "memcached-controller"}}
			h := c.objectKeys(sh)
			tc.steps(c, func(u *unstructured.Unstructured) { h.OnUpdate(input, u) })
			if got := len(q.added); got != tc.queued {
				t.Errorf("keys queued = %d, want %d", got, tc.queued)
			}
		})
	}
}

// versionOfM is the object default/m at resourceVersion rv, as a
// reconcile read it, with change made to it.
func versionOfM(rv string, change ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetNamespace("default")
	u.SetName("m")
	u.SetUID("u1")
	u.SetGeneration(1)
	u.SetLabels(map[string]string{"app": "m"})
	u.SetResourceVersion(rv)
	for _, f := range change {
		f(u)
	}
	return u
}

// ownWriteEvent is a reconcile's writes, recorded in c, and the update
// events of the object its handler is then handed, from the version a
// reconcile read (input); queued is how many keys they queue.
type ownWriteEvent struct {
	name   string
	steps  func(c *Controller, update func(*unstructured.Unstructured))
	queued int
}

// ownWriteEvents are TestTheEventsOfAReconcilesOwnWritesQueueNothing's
// cases: first those that queue nothing, then those that queue the key.
func ownWriteEvents(input *unstructured.Unstructured) []ownWriteEvent {
	obj := versionOfM
	finalized := func(u *unstructured.Unstructured) { u.SetFinalizers([]string{testFinalizer}) }
	return []ownWriteEvent{
		{"the status's event", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "5", input)
			update(obj("5"))
		}, 0},
		{"the finalizer's and the status's events", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "4", input)
			c.versions.wrote("default/m", "5", input)
			update(obj("4", finalized))
			update(obj("5", finalized))
		}, 0},
		{"reconciled from the cache, then its event", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "5", input)
			c.versions.aheadFor("default/m", "5")
			update(obj("5"))
		}, 0},
		{"only the last write's event, after a relist", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "4", input)
			c.versions.wrote("default/m", "5", input)
			update(obj("5", finalized))
		}, 0},
		{"another's version, then the write's", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "5", input)
			update(obj("4", func(u *unstructured.Unstructured) { u.SetGeneration(2) }))
			update(obj("5", func(u *unstructured.Unstructured) { u.SetGeneration(2) }))
		}, 2},
		{"a newer version's event", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "5", input)
			update(obj("5"))
			update(obj("6"))
		}, 1},
		{"the write's event with a new spec folded in", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "5", input)
			update(obj("5", func(u *unstructured.Unstructured) { u.SetGeneration(2) }))
		}, 1},
		{"the write's event with a label folded in", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "5", input)
			update(obj("5", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"app": "n"}) }))
		}, 1},
		{"the write's event with another's finalizer folded in", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "5", input)
			update(obj("5", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{testFinalizer, "other"}) }))
		}, 1},
		{"the write's event with a deletion folded in", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "5", input)
			update(obj("5", func(u *unstructured.Unstructured) { u.SetDeletionTimestamp(new(metav1.Now())) }))
		}, 1},
		{"a write forgotten", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.versions.wrote("default/m", "5", input)
			c.versions.forget("default/m")
			update(obj("5"))
		}, 1},
	}
}

// A relist can fold another's change into the event of the controller's
// own write, and a Kind such as a ConfigMap bumps no generation for it: a
// managedFields entry other than the controller's own two applies that
// changed since the reconcile's object queues the key; the controller's
// own entries changing queue nothing (issue 22, point 11).
func TestTheEventOfAnOwnWriteWithAnotherWritersEntryChangedQueuesTheKey(t *testing.T) {
	obj := func(rv string, entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace("default")
		u.SetName("m")
		u.SetUID("u1")
		u.SetResourceVersion(rv)
		u.SetManagedFields(entries)
		return u
	}
	kubectl := func(sec int64) metav1.ManagedFieldsEntry {
		return managedEntry("kubectl", metav1.ManagedFieldsOperationUpdate, "", sec, `{"f:data":{}}`)
	}
	own := func(subresource string) metav1.ManagedFieldsEntry {
		return managedEntry("memcached-controller", metav1.ManagedFieldsOperationApply, subresource, 300, `{"f:metadata":{}}`)
	}
	input := obj("3", kubectl(100))
	for _, tc := range []struct {
		name   string
		event  *unstructured.Unstructured
		queued int
	}{
		{"another's entry changed", obj("5", kubectl(200)), 1},
		{"the controller's own entries changed", obj("5", kubectl(100), own(""), own("status")), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newCountingQueue(t)
			c := &Controller{finalizer: "cache.example.com/finalizer", versions: writtenVersions{manager: "memcached-controller"}}
			c.versions.wrote("default/m", "5", input)
			c.objectKeys(testWork(q)).OnUpdate(input, tc.event)
			if got := len(q.added); got != tc.queued {
				t.Errorf("keys queued = %d, want %d", got, tc.queued)
			}
		})
	}
}

// A write's event can come before its answer, so before the write is
// known: while the key is being reconciled, its events are held, and
// judged once the reconcile ends. Its own write's queues nothing; any
// other's queues the key again.
func TestAnEventThatComesBeforeItsWritesAnswerIsJudgedOnceTheReconcileEnds(t *testing.T) {
	obj := func(rv string, generation int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace("default")
		u.SetName("m")
		u.SetGeneration(generation)
		u.SetResourceVersion(rv)
		return u
	}
	input := obj("3", 1)
	for _, tc := range []struct {
		name  string
		event *unstructured.Unstructured
		again bool
	}{
		{"its own write", obj("5", 1), false},
		{"another's change", obj("4", 2), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newCountingQueue(t)
			sh := testWork(q)
			c := &Controller{}
			h := c.objectKeys(sh)
			c.inFlight.begin("default/m")
			h.OnUpdate(input, tc.event)
			if len(q.added) != 0 {
				t.Errorf("keys queued while the reconcile runs = %v, want none", q.added)
			}
			c.versions.wrote("default/m", "5", input)
			if got, _, _ := c.inFlight.end("default/m"); got != tc.again {
				t.Errorf("queued again once the reconcile ended = %v, want %v", got, tc.again)
			}
			h.OnUpdate(input, obj("6", 1))
			if len(q.added) != 1 {
				t.Errorf("keys queued by a change after the reconcile = %v, want one", q.added)
			}
		})
	}
}

// An owned object's update queues its owner once, so no worker can take
// the key between two adds and reconcile it twice for one change; a change
// of owner queues the old owner and the new.
func TestAnOwnedObjectsUpdateQueuesItsOwnerOnce(t *testing.T) {
	owned := func(owner string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: owner, Controller: new(true)}}}}
	}
	for _, tc := range []struct {
		name     string
		old, now string
		want     []string
	}{
		{"the same owner", "m", "m", []string{"default/m"}},
		{"another owner", "m", "n", []string{"default/m", "default/n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newCountingQueue(t)
			sh := testWork(q)
			c := &Controller{kind: "Memcached", group: "cache.example.com"}
			c.ownerKeys(sh, schema.GroupResource{Group: "apps", Resource: "deployments"}).OnUpdate(owned(tc.old), owned(tc.now))
			if !slices.Equal(q.added, tc.want) {
				t.Errorf("keys added = %v, want %v", q.added, tc.want)
			}
		})
	}
}
