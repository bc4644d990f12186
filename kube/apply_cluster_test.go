package kube

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/control"
)

// finalizingController is a controller of clusterCaches in ns, with a
// finalizer, connected to c as its admin.
func finalizingController(t *testing.T, c *clustertest.Cluster, ns string) *Controller {
	t.Helper()
	setup, client := clientAs(t, c, humustest.NewTelemetry(), c.AdminToken())
	s := testSettings()
	s.Namespace, s.LeaderElection.Namespace = ns, ns
	ctrl, err := NewController(setup, client, s, clusterCaches, readyReplicas(&counter{}),
		Finalize("cache.example.com/finalizer", func(ctx context.Context, m Object[cacheSpec, cacheStatus]) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	return ctrl
}

// TestClusterFaultAWriteFromAStaleCacheIsRefused checks what the API server
// answers the controller's two writes when the object they were computed
// from has changed since, is gone, or is replaced by a new one of the same
// name: it refuses them, so a write computed from what the object was (by
// a replica whose Lease has passed on, say) is never stored over a newer
// one's, and a stale cache can never recreate a deleted object, nor write
// an old object's status or finalizer onto a new one.
func TestClusterFaultAWriteFromAStaleCacheIsRefused(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	gvr := clusterCaches.GVR()
	ns := c.Namespace(t)
	ctrl := finalizingController(t, c, ns)
	// Writes are made only with a proof of the Lease: give one that holds.
	ctx := t.Context()

	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	objects := admin.Resource(gvr).Namespace(ns)
	createCache(t, admin, gvr, ns, "m", 1)
	stale := apiGet(t, admin, gvr, ns, "m")

	// Changed since, by someone else (a new leader's write, say): neither
	// write, computed from the version before, is stored.
	changed := stale.DeepCopy()
	if err := unstructured.SetNestedField(changed.Object, int64(5), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if _, err := objects.Update(t.Context(), changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	checkBothWritesAreStale(t, ctrl, ctx, stale, "adding the finalizer to a changed object", "applying the status of a changed object")
	if now := apiGet(t, admin, gvr, ns, "m"); len(now.GetFinalizers()) != 0 {
		t.Errorf("the changed object's finalizers = %v, want none: the finalizer computed from the version before was stored", now.GetFinalizers())
	}
	stale = apiGet(t, admin, gvr, ns, "m")

	// Deleted: neither write recreates it.
	if err := objects.Delete(t.Context(), "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	checkBothWritesAreStale(t, ctrl, ctx, stale, "adding the finalizer to a deleted object", "applying the status of a deleted object")
	if _, err := objects.Get(t.Context(), "m", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted object after the writes: %v, want NotFound: a write recreated it", err)
	}

	// Replaced by a new object of the same name: neither write reaches it.
	createCache(t, admin, gvr, ns, "m", 2)
	checkBothWritesAreStale(t, ctrl, ctx, stale, "adding the finalizer through the old object", "applying the old object's status")
	fresh := apiGet(t, admin, gvr, ns, "m")
	if len(fresh.GetFinalizers()) != 0 {
		t.Errorf("the new object's finalizers = %v, want none", fresh.GetFinalizers())
	}
	if n, found, _ := unstructured.NestedInt64(fresh.Object, "status", "readyReplicas"); found {
		t.Errorf("the new object's status.readyReplicas = %d, want none: the old object's status was written onto it", n)
	}

	// And the fresh object takes both.
	rv, err := ctrl.engine.ApplyFinalizer(ctx, proof(), cached(t, fresh), true)
	if err != nil {
		t.Errorf("adding the finalizer to the current object: %v", err)
	}
	if err := ctrl.engine.ApplyStatus(ctx, proof(), cached(t, fresh), rv, []byte(`{"readyReplicas":2}`)); err != nil {
		t.Errorf("applying the current object's status: %v", err)
	}
}

// checkBothWritesAreStale checks that ctrl's two writes, computed from
// stale, its finalizer's add (addFinalizer says so) and its status's apply
// (applyStatus), are refused as errStale; it logs the API server's
// answers.
func checkBothWritesAreStale(t *testing.T, ctrl *Controller, ctx context.Context, stale *unstructured.Unstructured, addFinalizer, applyStatus string) {
	t.Helper()
	_, err := ctrl.engine.ApplyFinalizer(ctx, proof(), cached(t, stale), true)
	if !errors.Is(err, control.ErrStale) {
		t.Errorf("%s = %v, want errStale", addFinalizer, err)
	}
	t.Logf("the API server's answer to %s: %v", addFinalizer, err)
	err = ctrl.engine.ApplyStatus(ctx, proof(), cached(t, stale), stale.GetResourceVersion(), []byte(`{"readyReplicas":9}`))
	if !errors.Is(err, control.ErrStale) {
		t.Errorf("%s = %v, want errStale", applyStatus, err)
	}
	t.Logf("the API server's answer to %s: %v", applyStatus, err)
}
