package control

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

func TestControllerSettlesInOneReconcile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		if err := ctrl.Ready.Healthy(t.Context()); err == nil {
			t.Error("Synced is healthy before Serve")
		}
		stop := served(t, ctrl)

		time.Sleep(time.Minute)
		synctest.Wait()
		if err := ctrl.Ready.Healthy(t.Context()); err != nil {
			t.Errorf("Synced once the caches have synced: %v", err)
		}
		if got := calls.Get("m"); got != 1 {
			t.Errorf("reconciles = %d, want 1: the event of its own status reconciles nothing", got)
		}
		statuses := f.AppliesTo("status")
		if len(statuses) != 1 {
			t.Fatalf("status applies = %d, want 1", len(statuses))
		}
		if got := statuses[0].FieldOwner; got != "memcached-controller" {
			t.Errorf("the status apply's field manager = %q, want memcached-controller", got)
		}
		got := f.Get(t, cachesGVR, "default", "m")
		if n, _, _ := unstructured.NestedInt64(got.Object, "status", "readyReplicas"); n != 3 {
			t.Errorf("status.readyReplicas = %d, want 3", n)
		}
		if h := holder(f.Lease(t, "kube-system", "memcached-controller")); h != "replica-1" {
			t.Errorf("the Lease's holder = %q, want replica-1", h)
		}

		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		if h := holder(f.Lease(t, "kube-system", "memcached-controller")); h != "" {
			t.Errorf("the Lease's holder after shutdown = %q, want none", h)
		}
		if err := ctrl.Ready.Healthy(t.Context()); err == nil {
			t.Error("Synced is healthy after Serve returned")
		}
	})
}

func TestAStatusIsAppliedWhenReconcileFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls counter
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			calls.Inc(m.Name)
			st := m.Status
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: "Available", Status: metav1.ConditionFalse, Reason: "ApplyFailed", Message: "quota exceeded",
				LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)),
			})
			return result{Status: &st}, errors.New("quota exceeded")
		})
		s := testSettings()
		s.RetryBaseDelay = time.Second
		stop := served(t, newTestController(t, f, s, rec))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := len(f.AppliesTo("status")); got != 1 {
			t.Errorf("status applies = %d, want 1: the failure's condition, once, however often it retries", got)
		}
		if got := calls.Get("m"); got < 3 {
			t.Errorf("reconciles = %d, want the error retried", got)
		}
		conds, _, _ := unstructured.NestedSlice(f.Get(t, cachesGVR, "default", "m").Object, "status", "conditions")
		if len(conds) != 1 || conds[0].(map[string]any)["reason"] != "ApplyFailed" {
			t.Errorf("status.conditions = %v, want the ApplyFailed condition", conds)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestControllerReconcilesAgainAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls counter
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			calls.Inc(m.Name)
			return result{After: 10 * time.Second}, nil
		})
		stop := served(t, newTestController(t, f, testSettings(), rec))
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if got := calls.Get("m"); got != 4 {
			t.Errorf("reconciles in 35s with After 10s = %d, want 4 (at 0, 10, 20 and 30s)", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestControllerRetriesAnErrorWithADoublingBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var mu sync.Mutex
		var at []time.Time
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			return result{}, errors.New("the memcached image can't be pulled")
		})
		s := testSettings()
		s.RetryBaseDelay, s.RetryMaxDelay = time.Second, 8*time.Second
		stop := served(t, newTestController(t, f, s, rec))
		time.Sleep(40 * time.Second)
		synctest.Wait()

		mu.Lock()
		var gaps []time.Duration
		for i := 1; i < len(at); i++ {
			gaps = append(gaps, at[i].Sub(at[i-1]))
		}
		mu.Unlock()
		want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
		if len(gaps) < len(want) {
			t.Fatalf("retries' gaps = %v, want at least %v", gaps, want)
		}
		for i, w := range want {
			if gaps[i] != w {
				t.Errorf("retry %d came after %v, want %v (gaps %v)", i+1, gaps[i], w, gaps)
			}
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v after failing reconciles, want nil: an error never ends the Service", err)
		}
	})
}

func TestShutdownContextEndingFirstCancelsTheReconcileInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		inFlight := make(chan struct{})
		var sawErr error
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			close(inFlight)
			<-ctx.Done()
			sawErr = ctx.Err()
			return result{}, ctx.Err()
		})
		ctrl := newTestController(t, f, testSettings(), rec)
		stop := served(t, ctrl)
		<-inFlight

		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- stop() }()
		err := ctrl.Shutdown(shutCtx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want an error wrapping context.DeadlineExceeded", err)
		}
		if !errors.Is(sawErr, context.Canceled) {
			t.Errorf("the reconcile's context ended with %v, want context.Canceled", sawErr)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestShutdownFinishesTheReconcileInFlightAndLeavesTheBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds,
			cacheObject("default", "a", 1), cacheObject("default", "b", 1), cacheObject("default", "c", 1))
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
		ctrl := newTestController(t, f, testSettings(), rec)
		stop := served(t, ctrl)
		<-inFlight
		synctest.Wait() // the other two are queued

		done := make(chan error, 1)
		go func() { done <- stop() }()
		synctest.Wait() // shutdown has begun
		close(release)
		if err := <-done; err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		if keys := calls.Keys(); len(keys) != 1 {
			t.Errorf("reconciled %v, want only the one in flight at shutdown", keys)
		}
		if h := holder(f.Lease(t, "kube-system", "memcached-controller")); h != "" {
			t.Errorf("the Lease's holder after shutdown = %q, want none", h)
		}
		if err := ctrl.Shutdown(t.Context()); err != nil {
			t.Errorf("Shutdown after Serve returned = %v, want nil", err)
		}
	})
}

func TestAPanicIsRecoveredAndNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "bad", 1), cacheObject("default", "good", 2))
		var calls counter
		ready := readyReplicas(&calls)
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			if m.Name == "bad" {
				calls.Inc(m.Name)
				var replicas []int32
				_ = replicas[m.Spec.Size] // index out of range
			}
			return ready(ctx, m)
		})
		s := testSettings()
		s.Workers = 2
		stop := served(t, newTestController(t, f, s, rec))
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := calls.Get("bad"); got != 1 {
			t.Errorf("the panicking object's reconciles = %d, want 1: a panic isn't retried", got)
		}
		if got := calls.Get("good"); got != 1 {
			t.Errorf("the other object's reconciles = %d, want 1", got)
		}
		for _, a := range f.AppliesTo("status") {
			if a.Key == "default/bad" {
				t.Errorf("a status was applied to the panicking object: %v", a.Body)
			}
		}

		bad := f.Get(t, cachesGVR, "default", "bad")
		_ = unstructured.SetNestedField(bad.Object, int64(2), "spec", "size")
		f.Update(t, cachesGVR, bad)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := calls.Get("bad"); got != 2 {
			t.Errorf("the panicking object's reconciles after it changed = %d, want 2", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil: a panic doesn't end the Service", err)
		}
	})
}

func TestAStatusAppliedIsNotAppliedAgainOnALaggingCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		f.LagStatus(5 * time.Second)
		var calls counter
		ready := readyReplicas(&calls)
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			res, err := ready(ctx, m)
			if calls.Get(m.Name) == 1 {
				res.After = time.Second // comes up while the watch lags
			}
			return res, err
		})
		stop := served(t, newTestController(t, f, testSettings(), rec))
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := len(f.AppliesTo("status")); got != 1 {
			t.Errorf("status applies = %d, want 1: the key came up on a cache older than its own write", got)
		}
		if got := calls.Get("m"); got != 2 {
			t.Errorf("reconciles = %d, want 2", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestFinalizeAddsRunsAndRemovesTheFinalizer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls, finalized counter
		fin := finalizing(func(ctx context.Context, m memcached) error {
			finalized.Inc(m.Name)
			return nil
		})
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls), fin))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		m := f.Get(t, cachesGVR, "default", "m")
		if got := m.GetFinalizers(); len(got) != 1 || got[0] != "cache.example.com/finalizer" {
			t.Fatalf("finalizers = %v, want [cache.example.com/finalizer]", got)
		}
		adds := f.AppliesTo("")
		if len(adds) != 1 || adds[0].FieldOwner != "memcached-controller" {
			t.Fatalf("finalizer applies = %+v, want one by memcached-controller", adds)
		}

		now := metav1.Now()
		m.SetDeletionTimestamp(&now)
		f.Update(t, cachesGVR, m)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := finalized.Get("m"); got != 1 {
			t.Errorf("f ran %d times, want 1", got)
		}
		if _, err := f.Dyn.Tracker().Get(cachesGVR, "default", "m"); err == nil {
			t.Errorf("the object is still there: its finalizer wasn't removed")
		}
		if got := calls.Get("m"); got != 1 {
			t.Errorf("reconciles = %d, want 1: none for its own finalizer and status, none once the object is being deleted", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestAPanickingFinalizerKeepsTheFinalizer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, deleting(cacheObject("default", "m", 1), "cache.example.com/finalizer"))
		var finalized counter
		fin := finalizing(func(ctx context.Context, m memcached) error {
			finalized.Inc(m.Name)
			panic("the cache's volume is gone")
		})
		var calls counter
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls), fin))
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := finalized.Get("m"); got != 1 {
			t.Errorf("f ran %d times, want 1: a panic isn't retried", got)
		}
		if got := f.Get(t, cachesGVR, "default", "m").GetFinalizers(); len(got) != 1 {
			t.Errorf("finalizers = %v, want the finalizer kept", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestServeFailsWhenTheResourceIsNotServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds)
		f.Dyn.PrependReactor("list", "memcacheds", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewGenericServerResponse(http.StatusNotFound, "list", cachesGVR.GroupResource(), "", "", 0, false)
		})
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		err := ctrl.Serve(t.Context())
		const want = "kube: listing cache.example.com/v1alpha1, Resource=memcacheds: the server could not find the requested resource"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Serve = %v, want %q", err, want)
		}
	})
}

func TestLosingTheLeaseCancelsTheReconcilesAndEndsServe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var unreachable atomic.Bool
		refuse := func(k8stesting.Action) (bool, runtime.Object, error) {
			if unreachable.Load() {
				return true, nil, errors.New("connection refused")
			}
			return false, nil, nil
		}
		f.Kube.PrependReactor("update", "leases", refuse)
		f.Kube.PrependReactor("get", "leases", refuse)
		inFlight := make(chan struct{})
		var sawErr error
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			close(inFlight)
			<-ctx.Done()
			sawErr = ctx.Err()
			return result{}, nil
		})
		ctrl := newTestController(t, f, testSettings(), rec)
		stop := served(t, ctrl)
		<-inFlight

		// The API server stops answering for the Lease: renewal fails for
		// RenewDeadline. (The fakes don't check resourceVersions, so a Lease
		// another replica took would be overwritten by the optimistic renew.)
		unreachable.Store(true)
		returned, err := awaitServe(ctrl, stop, time.Minute)
		if !returned {
			t.Fatal("Serve didn't return within a minute of losing the Lease")
		}
		if !errors.Is(err, ErrLostLeadership) {
			t.Errorf("Serve = %v, want ErrLostLeadership", err)
		}
		if !errors.Is(sawErr, context.Canceled) {
			t.Errorf("the reconcile in flight ended with %v, want context.Canceled", sawErr)
		}
	})
}

func TestResyncReconcilesEveryObjectAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "a", 1), cacheObject("default", "b", 2))
		var calls counter
		s := testSettings()
		s.Resync = time.Minute
		stop := served(t, newTestController(t, f, s, readyReplicas(&calls)))
		time.Sleep(30 * time.Second)
		synctest.Wait()
		for _, name := range []string{"a", "b"} {
			if got := calls.Get(name); got != 1 {
				t.Fatalf("%s's reconciles before the first resync = %d, want 1", name, got)
			}
		}
		// A resync each minute, at 1m and 2m: every object once more each
		// time, though none changed.
		for resync := 1; resync <= 2; resync++ {
			time.Sleep(time.Minute)
			synctest.Wait()
			for _, name := range []string{"a", "b"} {
				if got, want := calls.Get(name), 1+resync; got != want {
					t.Errorf("%s's reconciles after resync %d = %d, want %d", name, resync, got, want)
				}
			}
		}
		if got := len(f.AppliesTo("status")); got != 2 {
			t.Errorf("status applies = %d, want 2, one for each object: a resync's reconcile finds its status applied", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// Owns reconciles the object an owned resource's controller reference
// names, by its group and kind: an owned resource that changes is ignored
// when its owner reference is of another kind, of another group, or isn't
// the controller reference. Each change to it (its creation, an update and
// its deletion) is checked.
func TestOwnsIgnoresAnOwnedObjectWhoseControllerIsAnother(t *testing.T) {
	ref := func(apiVersion, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "m", UID: "uid-m", Controller: &controller}
	}
	for _, tc := range []struct {
		name string
		ref  metav1.OwnerReference
		want int // reconciles of m, one for each change
	}{
		{"the controller reference to it", ref("cache.example.com/v1alpha1", "Memcached", true), 3},
		{"another version of its group", ref("cache.example.com/v1", "Memcached", true), 3},
		{"another kind", ref("cache.example.com/v1alpha1", "Valkey", true), 0},
		{"another group", ref("other.example.com/v1alpha1", "Memcached", true), 0},
		{"not the controller reference", ref("cache.example.com/v1alpha1", "Memcached", false), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
				var calls counter
				stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls), owning(deployments, "")))
				time.Sleep(10 * time.Second)
				synctest.Wait()
				before := calls.Get("m")

				owned := f.Meta.Resource(deployments).Namespace("default")
				dep := &metav1.PartialObjectMetadata{
					TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
					ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default", OwnerReferences: []metav1.OwnerReference{tc.ref}},
				}
				changes := []func() error{
					func() error {
						_, err := owned.(metadataCreator).CreateFake(dep, metav1.CreateOptions{})
						return err
					},
					func() error {
						dep.Labels = map[string]string{"scaled": "by-hand"}
						_, err := owned.(metadataUpdater).UpdateFake(dep, metav1.UpdateOptions{})
						return err
					},
					func() error { return owned.Delete(t.Context(), "m", metav1.DeleteOptions{}) },
				}
				for _, change := range changes {
					if err := change(); err != nil {
						t.Fatal(err)
					}
					time.Sleep(time.Second)
					synctest.Wait()
				}
				if got := calls.Get("m") - before; got != tc.want {
					t.Errorf("reconciles of m for its Deployment's creation, update and deletion = %d, want %d", got, tc.want)
				}
				if err := stop(); err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
			})
		})
	}
}

// The cache keeps no managedFields: the Object handed to a Reconciler has
// none (an owned resource's cached metadata is internal/cache's test).
func TestTheCacheKeepsNoManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{
		Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:size":{}}}`),
	}}
	synctest.Test(t, func(t *testing.T) {
		m := cacheObject("default", "m", 1)
		m.SetManagedFields(managed)
		f := newFakeCluster(t, listKinds, m)
		var seen []metav1.ManagedFieldsEntry
		var calls counter
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			if calls.Inc(m.Name) == 1 {
				seen = m.ManagedFields
			}
			return result{}, nil
		})
		stop := served(t, newTestController(t, f, testSettings(), rec))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if calls.Get("m") == 0 {
			t.Fatal("m wasn't reconciled")
		}
		if seen != nil {
			t.Errorf("the Object's managedFields = %v, want none", seen)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// metadataCreator and metadataUpdater are the fake metadata client's
// writes, which its ResourceInterface lacks.
type (
	metadataCreator interface {
		CreateFake(obj *metav1.PartialObjectMetadata, opts metav1.CreateOptions, subresources ...string) (*metav1.PartialObjectMetadata, error)
	}
	metadataUpdater interface {
		UpdateFake(obj *metav1.PartialObjectMetadata, opts metav1.UpdateOptions, subresources ...string) (*metav1.PartialObjectMetadata, error)
	}
)
