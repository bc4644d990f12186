package cache

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// cached is u as the cache keeps it.
func cached(t testing.TB, u *unstructured.Unstructured) *Object {
	t.Helper()
	o, err := Compact(u.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return o.(*Object)
}

// The cache keeps an object's metadata, without managedFields, and its
// JSON, from which a reconcile decodes its copy; turning it again changes
// nothing, and a copy shares nothing a reconcile could write.
func TestTheCacheKeepsAnObjectsMetadataAndJSON(t *testing.T) {
	u := settledMemcached()
	u.SetFinalizers([]string{"cache.example.com/finalizer"})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}})
	o := cached(t, u)
	if o.Name != "m" || o.Namespace != "default" || o.ResourceVersion != "42" || o.Kind != "Memcached" || o.APIVersion != "cache.example.com/v1alpha1" ||
		len(o.Finalizers) != 1 || o.ManagedFields != nil {
		t.Errorf("cached = %+v %+v, want the object's metadata without managedFields", o.TypeMeta, o.ObjectMeta)
	}
	var m struct {
		Metadata *metav1.ObjectMeta `json:"metadata"`
		Spec     struct{ Size int }
		Status   struct {
			ReadyReplicas int
			Conditions    []metav1.Condition
		}
	}
	if err := json.Unmarshal(o.Raw, &m); err != nil || m.Metadata != nil || m.Spec.Size != 3 || m.Status.ReadyReplicas != 3 || len(m.Status.Conditions) != 2 {
		t.Errorf("the cached JSON decoded = %+v, %v; want the object's spec and status, without its metadata", m, err)
	}
	again, err := Compact(o)
	if err != nil || again != any(o) {
		t.Errorf("Compact(cached) = %v, %v; want it unchanged", again, err)
	}
	cp := o.DeepCopyObject().(*Object)
	cp.Finalizers[0] = "changed"
	if o.Finalizers[0] != "cache.example.com/finalizer" {
		t.Errorf("a copy's change reached the cached object: %v", o.Finalizers)
	}
}

// An owned resource's cached metadata keeps what maps a change to its
// owner: its namespace, name, resourceVersion and controller reference,
// of its managedFields a digest of each entry, no field, and the newest
// time; turning it again changes nothing, and a copy shares no room.
func TestAnOwnedResourcesMetadataKeepsWhatMapsItToItsOwner(t *testing.T) {
	managed := metav1.ManagedFieldsEntry{
		Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:size":{}}}`),
	}
	controller := metav1.OwnerReference{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "m", UID: "u1", Controller: new(true)}
	older, newest := metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)), metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 7, 0, time.UTC))
	stamped := []metav1.ManagedFieldsEntry{managed, managed, managed}
	stamped[0].Time, stamped[1].Time = &older, &newest
	owned := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", UID: "u2", ResourceVersion: "7",
		Generation: 2, Labels: map[string]string{"app": "m"}, Annotations: map[string]string{"a": "b"}, ManagedFields: stamped,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u3"}, controller}}}
	var digests []Digest
	for i := range stamped {
		digests = append(digests, Digest{key: ManagedKey("kubectl", metav1.ManagedFieldsOperationUpdate, ""), sum: managedSum(&stamped[i])})
	}
	want := &Owned{namespace: "default", name: "d", resourceVersion: "7", owner: []metav1.OwnerReference{controller},
		managed: digests, Written: newest.Time}
	same := func(got any) bool {
		o, ok := got.(*Owned)
		return ok && o.namespace == want.namespace && o.name == want.name && o.resourceVersion == want.resourceVersion &&
			equality.Semantic.DeepEqual(o.owner, want.owner) && reflect.DeepEqual(o.managed, want.managed) && o.Written.Equal(want.Written)
	}
	got, err := OwnedMetadata(owned)
	if err != nil || !same(got) {
		t.Errorf("an owned resource's cached metadata = %+v, %v; want %+v", got, err, want)
	}
	if again, err := OwnedMetadata(got); err != nil || !same(again) { // idempotent, as client-go requires
		t.Errorf("the cached metadata turned again = %+v, %v; want it unchanged", again, err)
	}
	kept := got.(*Owned)
	if c := kept.DeepCopyObject().(*Owned); !same(c) || &c.owner[0] == &kept.owner[0] || &c.managed[0] == &kept.managed[0] {
		t.Errorf("a copy of the cached metadata = %+v; want it the same, in room of its own", c)
	}
}
