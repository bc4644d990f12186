package kube

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
)

// benchCache is a Memcached as a controller's cache holds one: a spec and a
// status with conditions.
func benchCache() *unstructured.Unstructured {
	u := cacheObject("default", "m", 3)
	u.SetResourceVersion("42")
	u.Object["status"] = map[string]any{
		"readyReplicas": int64(3),
		"conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "DeploymentApplied", "message": "", "lastTransitionTime": "2026-12-02T10:00:00Z", "observedGeneration": int64(1)},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "", "lastTransitionTime": "2026-12-02T10:00:00Z", "observedGeneration": int64(1)},
		},
	}
	return u
}

// BenchmarkCRD reflects the test Memcached's CRD.
func BenchmarkCRD(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := caches.CRD(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode decodes a cached object into an Object: the copy every
// reconcile is handed.
func BenchmarkDecode(b *testing.B) {
	u := benchCache()
	b.ReportAllocs()
	for b.Loop() {
		var m Object[cacheSpec, cacheStatus]
		if err := decode(u, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProcess is one key through the worker's loop, steps 1 to 7 of
// How one key is reconciled (package doc), with telemetry recorded by the
// SDK: a Reconciler that finds nothing to change, as a resync's reconcile
// of a settled object does. It is the controller's own cost per reconcile,
// without any API call.
func BenchmarkProcess(b *testing.B) {
	f := newFakeCluster(b, listKinds)
	tel := humustest.NewTelemetry()
	setup := &humus.Setup{Host: humustest.NewHost().Host(), Telemetry: tel.Telemetry()}
	rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m Object[cacheSpec, cacheStatus]) (Result[cacheStatus], error) {
		st := m.Status
		return Result[cacheStatus]{Status: &st}, nil
	})
	ctrl, err := NewController(setup, testClient(b, setup), testSettings(), caches, rec)
	if err != nil {
		b.Fatal(err)
	}
	f.use(ctrl)
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := store.Add(benchCache()); err != nil {
		b.Fatal(err)
	}
	q := newQueue(ctrl.name, ctrl.tel.queueMetrics)
	defer q.ShutDown()
	ctrl.later = newLater(q)
	defer ctrl.later.stop()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		q.Add("default/m")
		k, _ := q.Get()
		ctrl.process(ctx, q, store, k)
	}
	if n := len(f.appliesTo("status")); n != 0 {
		b.Fatalf("status applies = %d, want none: the status didn't change", n)
	}
}
