package kube

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// cachedObject is how the cache keeps each of the resource's objects: the
// metadata the controller reads (its name, UID, resourceVersion,
// generation, finalizers and the rest of metav1.ObjectMeta) and the
// object's JSON, from which each reconcile decodes its own copy. Both are
// never written once cached. The JSON is a third of the heap of the nested
// maps the dynamic client decodes a watch event into, and a reconcile
// decodes from it without encoding the maps first.
type cachedObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	raw []byte // the whole object, without managedFields
	// written is the newest time among the object's managedFields: when
	// the API server last stamped a write of it, to the second.
	written time.Time
}

// DeepCopyObject copies o. Its JSON is shared: nothing writes it.
func (o *cachedObject) DeepCopyObject() runtime.Object {
	c := &cachedObject{TypeMeta: o.TypeMeta, raw: o.raw, written: o.written}
	o.DeepCopyInto(&c.ObjectMeta)
	return c
}

// compact is the resource's informer's transform: it turns the dynamic
// client's object into a cachedObject, without managedFields (nothing in
// the controller reads them but for their newest time, which it keeps,
// and each apply adds an entry holding the whole set of fields it
// applied, often most of an object's size). Any
// other value, such as an object it already turned, is kept as it is, so
// it is idempotent, as client-go requires.
func compact(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	written := newestWrite(u)
	u.SetManagedFields(nil)
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("kube: caching %s: %w", u.GetName(), err)
	}
	o := &cachedObject{raw: raw, written: written}
	if err := json.Unmarshal(raw, o); err != nil {
		return nil, fmt.Errorf("kube: caching %s: its metadata: %w", u.GetName(), err)
	}
	return o, nil
}

// newestWrite is the newest time among u's managedFields, read without
// decoding the rest of them; zero when it has none.
func newestWrite(u *unstructured.Unstructured) time.Time {
	meta, _ := u.Object["metadata"].(map[string]any)
	fields, _ := meta["managedFields"].([]any)
	var newest time.Time
	for _, f := range fields {
		entry, _ := f.(map[string]any)
		s, _ := entry["time"].(string)
		if t, err := time.Parse(time.RFC3339, s); err == nil && t.After(newest) {
			newest = t
		}
	}
	return newest
}

// cachedOwned is how the cache keeps each object of a resource the
// controller Owns: what maps a change to its owner, and tells the
// controller's own writes from others' (its namespace, name,
// resourceVersion and controller owner reference), and when the API
// server last stamped a write of it.
type cachedOwned struct {
	metav1.PartialObjectMetadata
	// written is the newest time among the object's managedFields, to the
	// second.
	written time.Time
}

// DeepCopyObject copies o.
func (o *cachedOwned) DeepCopyObject() runtime.Object {
	c := &cachedOwned{written: o.written}
	o.DeepCopyInto(&c.PartialObjectMetadata)
	return c
}

// ownedMetadata is an owned resource's informer's transform: it turns the
// metadata client's object into a cachedOwned. No end user's code sees
// it. Any other value, such as an object it already turned, is kept as it
// is, so it is idempotent, as client-go requires.
func ownedMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	kept := &cachedOwned{PartialObjectMetadata: metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, ResourceVersion: m.ResourceVersion,
	}}}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		kept.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	for _, f := range m.ManagedFields {
		if f.Time != nil && f.Time.After(kept.written) {
			kept.written = f.Time.Time
		}
	}
	return kept, nil
}
