package kube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// cached is u as the cache keeps it.
func cached(t testing.TB, u *unstructured.Unstructured) *cachedObject {
	t.Helper()
	o, err := compact(u.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return o.(*cachedObject)
}

// The cache keeps an object's metadata, without managedFields, and its
// JSON, from which a reconcile decodes its copy; turning it again changes
// nothing, and a copy shares nothing a reconcile could write.
func TestTheCacheKeepsAnObjectsMetadataAndJSON(t *testing.T) {
	u := benchCache()
	u.SetFinalizers([]string{"cache.example.com/finalizer"})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}})
	o := cached(t, u)
	if o.Name != "m" || o.Namespace != "default" || o.ResourceVersion != "42" || o.Kind != "Memcached" || o.APIVersion != "cache.example.com/v1alpha1" ||
		len(o.Finalizers) != 1 || o.ManagedFields != nil {
		t.Errorf("cached = %+v %+v, want the object's metadata without managedFields", o.TypeMeta, o.ObjectMeta)
	}
	var m Object[cacheSpec, cacheStatus]
	if err := decode(o, &m); err != nil || m.Spec.Size != 3 || m.Status.ReadyReplicas != 3 || len(m.Status.Conditions) != 2 || m.ManagedFields != nil {
		t.Errorf("decoded %+v, %v; want the object's spec and status, without managedFields", m, err)
	}
	again, err := compact(o)
	if err != nil || again != any(o) {
		t.Errorf("compact(cached) = %v, %v; want it unchanged", again, err)
	}
	cp := o.DeepCopyObject().(*cachedObject)
	cp.Finalizers[0] = "changed"
	if o.Finalizers[0] != "cache.example.com/finalizer" {
		t.Errorf("a copy's change reached the cached object: %v", o.Finalizers)
	}
}
