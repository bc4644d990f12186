package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	restclientwatch "k8s.io/client-go/rest/watch"
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

// BenchmarkCacheHeap is the heap one cached Memcached holds: as the
// dynamic client decodes it (nested maps), and as the cache keeps it (its
// metadata and its JSON); both without managedFields.
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
		{"cached", func(u *unstructured.Unstructured) any { o, _ := compact(u); return o }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			kept := make([]any, n)
			before := heapInUse()
			for i, u := range objects() {
				kept[i] = tc.keep(u)
			}
			perObject := float64(heapInUse()-before) / n
			goruntime.KeepAlive(kept)

			u := objects()[0]
			b.ReportAllocs()
			for b.Loop() {
				tc.keep(u)
			}
			b.ReportMetric(perObject, "heap-B/object")
		})
	}
}

// heapInUse is the heap in use after a collection.
func heapInUse() int64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
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
		if err := decode(o, &m); err != nil {
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
	if err := store.Add(cached(b, benchCache())); err != nil {
		b.Fatal(err)
	}
	w := ctrl.newWork(nil)
	w.store = store
	defer w.q.ShutDown()
	defer w.later.stop()
	ctx := proven(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		w.q.Add("default/m", normal, time.Time{})
		item, _ := w.q.Get()
		ctrl.process(ctx, w, item)
	}
	if n := len(f.appliesTo("status")); n != 0 {
		b.Fatalf("status applies = %d, want none: the status didn't change", n)
	}
}

// BenchmarkWatchEvent frames and decodes watch events of a Memcached with the
// managedFields of a settled one (its creator's, the finalizer's and the
// status's applies): as the dynamic client's watch does, into nested maps
// (the informer's cache would then turn them into its form), and as the
// controller's does, straight into the cache's form.
func BenchmarkWatchEvent(b *testing.B) {
	u := benchCache()
	u.SetUID("6b1f1c9e-8d7a-4c2e-9f3b-000000000042")
	u.SetFinalizers([]string{"cache.example.com/finalizer"})
	u.SetCreationTimestamp(metav1.Now())
	now := metav1.Now()
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:image":{},"f:size":{}}}`)},
		{Manager: "memcached-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:finalizers":{"v:\"cache.example.com/finalizer\"":{}}}}`)},
		{Manager: "memcached-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Progressing\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:readyReplicas":{}}}`)},
	})
	obj, err := u.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	frame := `{"type":"MODIFIED","object":` + string(obj) + `}` + "\n"
	const events = 100
	stream := []byte(strings.Repeat(frame, events))

	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	envelopes := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme, scheme, jsonserializer.SerializerOptions{})
	for _, tc := range []struct {
		name              string
		framer            runtime.Framer
		envelope, objects runtime.Decoder
	}{
		{"dynamic", jsonserializer.Framer, envelopes, unstructured.UnstructuredJSONScheme},
		{"cached", jsonLines{}, watchEventCodec{}, cachedCodec{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				d := restclientwatch.NewDecoder(streaming.NewDecoder(tc.framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))), tc.envelope), tc.objects)
				for range events {
					if _, _, err := d.Decode(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}
