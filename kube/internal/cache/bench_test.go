package cache

import (
	"bytes"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// settledMemcached is a Memcached as a controller's cache holds one once
// settled: a spec, a status with conditions, and the managedFields of its
// creator's update and the controller's finalizer and status applies.
func settledMemcached() *unstructured.Unstructured {
	now := metav1.Now()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": "m", "namespace": "default", "uid": "uid-m", "resourceVersion": "42"},
		"spec":       map[string]any{"size": int64(3)},
		"status": map[string]any{
			"readyReplicas": int64(3),
			"conditions": []any{
				map[string]any{"type": "Available", "status": "True", "reason": "DeploymentApplied", "message": "", "lastTransitionTime": "2026-12-02T10:00:00Z", "observedGeneration": int64(1)},
				map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "", "lastTransitionTime": "2026-12-02T10:00:00Z", "observedGeneration": int64(1)},
			},
		},
	}}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:image":{},"f:size":{}}}`)},
		{Manager: "memcached-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:finalizers":{"v:\"cache.example.com/finalizer\"":{}}}}`)},
		{Manager: "memcached-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Progressing\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:readyReplicas":{}}}`)},
	})
	return u
}

// BenchmarkWatchEvent frames and decodes watch events of a Memcached with the
// managedFields of a settled one (its creator's, the finalizer's and the
// status's applies): as the dynamic client's watch does, into nested maps
// (the informer's cache would then turn them into its form), and as the
// controller's does, straight into the cache's form.
func BenchmarkWatchEvent(b *testing.B) {
	u := settledMemcached()
	u.SetUID("6b1f1c9e-8d7a-4c2e-9f3b-000000000042")
	u.SetFinalizers([]string{"cache.example.com/finalizer"})
	u.SetCreationTimestamp(metav1.Now())
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
