package kube

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"
	"github.com/z5labs/humus/kube/internal/transport"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

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

// BenchmarkCacheHeap is the heap one cached Memcached holds, settled (its
// three managedFields entries): as the dynamic client decodes it (nested
// maps), and as the cache keeps it (its metadata, its managedFields'
// digests and its JSON). And what the owned cache keeps of the Memcached's
// Deployment (owned): its metadata, with one managedFields entry, decoded
// as a metadata informer does, the Memcached its controller. Beside the
// bytes, the heap objects: what the garbage collector's marking visits.
func BenchmarkCacheHeap(b *testing.B) {
	const n = 2000
	objects := func() []*unstructured.Unstructured {
		us := make([]*unstructured.Unstructured, n)
		for i := range us {
			u := benchCache()
			u.SetName(fmt.Sprintf("memcached-%05d", i))
			u.SetUID(types.UID(fmt.Sprintf("6b1f1c9e-8d7a-4c2e-9f3b-%012d", i)))
			u.SetResourceVersion(fmt.Sprint(100000 + i))
			u.SetGeneration(1)
			u.SetCreationTimestamp(metav1.Now())
			u.SetFinalizers([]string{"cache.example.com/finalizer"})
			u.SetManagedFields(settledFields())
			// Decoded as the dynamic client decodes a watch event.
			raw, err := u.MarshalJSON()
			if err != nil {
				b.Fatal(err)
			}
			us[i] = &unstructured.Unstructured{}
			if err := us[i].UnmarshalJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
		return us
	}
	for _, tc := range []struct {
		name string
		keep func(*unstructured.Unstructured) any
	}{
		{"unstructured", func(u *unstructured.Unstructured) any { return u }},
		{"cached", func(u *unstructured.Unstructured) any { o, _ := cache.Compact(u); return o }},
		{"owned", func(u *unstructured.Unstructured) any { o, _ := cache.OwnedMetadata(ownedBy(u)); return o }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			kept := make([]any, n)
			before, beforeObjects := heapInUse()
			for i, u := range objects() {
				kept[i] = tc.keep(u)
			}
			after, afterObjects := heapInUse()
			goruntime.KeepAlive(kept)

			u := objects()[0]
			b.ReportAllocs()
			for b.Loop() {
				tc.keep(u)
			}
			b.ReportMetric(float64(after-before)/n, "heap-B/object")
			b.ReportMetric(float64(afterObjects-beforeObjects)/n, "heap-objects/object")
		})
	}
}

// ownedBy is the metadata of a Deployment of u's name, owned by u, as a
// metadata informer decodes it.
func ownedBy(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion() + "1",
		UID:             types.UID(strings.Replace(string(u.GetUID()), "6b1f", "7c20", 1)),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(u, u.GroupVersionKind())},
		ManagedFields:   settledFields()[1:2],
	}}
	data, _ := json.Marshal(m)
	decoded := &metav1.PartialObjectMetadata{}
	_ = json.Unmarshal(data, decoded)
	return decoded
}

// settledFields are a settled Memcached's managedFields: its creator's,
// the finalizer's and the status's.
func settledFields() []metav1.ManagedFieldsEntry {
	now := metav1.Now()
	return []metav1.ManagedFieldsEntry{
		{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:image":{},"f:size":{}}}`)},
		{Manager: "memcached-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:finalizers":{"v:\"cache.example.com/finalizer\"":{}}}}`)},
		{Manager: "memcached-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Progressing\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:readyReplicas":{}}}`)},
	}
}

// heapInUse is the heap in use after a collection, in bytes and in heap
// objects: the objects are what the collector's marking visits.
func heapInUse() (bytes, objects int64) {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return int64(m.HeapAlloc), int64(m.HeapObjects)
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
	o := cached(b, benchCache())
	b.ReportAllocs()
	for b.Loop() {
		var m Object[cacheSpec, cacheStatus]
		if err := control.Decode(o, &m); err != nil {
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
	use(f, ctrl)
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if err := store.Add(cached(b, benchCache())); err != nil {
		b.Fatal(err)
	}
	w := ctrl.engine.NewWork(nil)
	w.Store = store
	defer w.Q.ShutDown()
	defer w.Later.Stop()
	ctx, p := proven(context.Background()), proof()
	b.ReportAllocs()
	for b.Loop() {
		w.Q.Add("default/m", control.Normal, time.Time{})
		item, _ := w.Q.Get()
		ctrl.engine.Process(ctx, w, p, item)
	}
	if n := len(f.AppliesTo("status")); n != 0 {
		b.Fatalf("status applies = %d, want none: the status didn't change", n)
	}
}

// BenchmarkRelated is a related object's change mapped to the
// controller's keys: 10,000 Websites naming 100 ConfigMaps, kept in an
// index by References. event is one ConfigMap's update, its 100 referrers
// found in the index and queued (and taken, so each event queues them
// anew); index is one Website's entry in that index, computed on each of
// its changes: its JSON decoded, and the References function run.
func BenchmarkRelated(b *testing.B) {
	const sitesN, configMapsN = 10000, 100
	f := newFakeCluster(b, siteKinds)
	setup := fakeSetup(nil)
	client := testClient(b, setup)
	cms := Read(client, configMapKind, Selector{})
	var calls counter
	ctrl, err := NewController(setup, client, testSettings(), sites, serveContent(cms, &calls), References(cms, contentFrom))
	if err != nil {
		b.Fatal(err)
	}
	use(f, ctrl)
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, ctrl.engine.Indexers())
	for i := range sitesN {
		if err := store.Add(cached(b, siteObject("default", fmt.Sprintf("site-%05d", i), fmt.Sprintf("content-%03d", i%configMapsN)))); err != nil {
			b.Fatal(err)
		}
	}
	w := ctrl.engine.NewWork(nil)
	w.Store = store
	defer w.Q.ShutDown()
	defer w.Later.Stop()
	ctrl.engine.Leader.(*control.OneLease).W.Store(w)
	rel := ctrl.engine.Relations[0]

	b.Run("event", func(b *testing.B) {
		h := ctrl.engine.RelatedKeys(rel)
		old := cached(b, configMapObject("default", "content-007", "one", nil))
		now := cached(b, configMapObject("default", "content-007", "two", nil))
		old.ResourceVersion, now.ResourceVersion = "1", "2"
		b.ReportAllocs()
		for b.Loop() {
			h.OnUpdate(old, now)
			for range sitesN / configMapsN {
				item, _ := w.Q.Get()
				w.Q.Done(item.Key)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*sitesN/configMapsN), "ns/key")
	})
	b.Run("index", func(b *testing.B) {
		index := ctrl.engine.IndexFunc(rel)
		site := cached(b, siteObject("default", "site-00042", "content-042"))
		b.ReportAllocs()
		for b.Loop() {
			if vs, _ := index(site); len(vs) != 1 {
				b.Fatalf("index values = %v, want one", vs)
			}
		}
	})
}

// BenchmarkReadYourWrites is what reading the App's own writes adds to a
// Reader's Get and List: a look at the Client's ledger of its writes of
// the resource, with none pending (none), or ten pending in another
// namespace (elsewhere): what every read costs that needs no wait.
func BenchmarkReadYourWrites(b *testing.B) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	for i := range 100 {
		u := configMapObject("default", "c"+strconv.Itoa(i), "x", nil)
		u.SetResourceVersion(strconv.Itoa(100 + i))
		if err := store.Add(cached(b, u)); err != nil {
			b.Fatal(err)
		}
	}
	client := testClient(b, fakeSetup(nil))
	r := Read(client, configMapKind, Selector{}).reader
	none := client.ledger
	elsewhere := control.NewLedger()
	elsewhere.Read(configMapsGVR.GroupResource())
	for i := range 10 {
		elsewhere.RecordWrite(configMapsGVR.GroupResource(), "other", "c"+strconv.Itoa(i), transport.Answer{ResourceVersion: "100000"})
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		ledger *control.Ledger
	}{
		{"none", none},
		{"elsewhere", elsewhere},
	} {
		r.Ledger = tc.ledger
		b.Run("get/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := r.AwaitOwnWrite(ctx, store, "default", "c5", "default/c5"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("list/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := r.AwaitOwnWrites(ctx, store, "default"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
