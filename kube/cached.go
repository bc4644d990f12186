package kube

import (
	"encoding/json"
	"fmt"
	"slices"
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

	raw     []byte          // the whole object, without managedFields
	managed []managedDigest // one for each managedFields entry
	// written is the newest time among the object's managedFields: when
	// the API server last stamped a write of it, to the second.
	written time.Time
}

// DeepCopyObject copies o. Its JSON is shared: nothing writes it.
func (o *cachedObject) DeepCopyObject() runtime.Object {
	c := &cachedObject{TypeMeta: o.TypeMeta, raw: o.raw, managed: o.managed, written: o.written}
	o.DeepCopyInto(&c.ObjectMeta)
	return c
}

// compact is the resource's informer's transform: it turns the dynamic
// client's object into a cachedObject, without managedFields (nothing in
// the controller reads them, and each apply adds an entry holding the
// whole set of fields it applied, often most of an object's size). Any
// other value, such as an object it already turned, is kept as it is, so
// it is idempotent, as client-go requires.
func compact(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	managed, written := managedDigests(u), newestWrite(u)
	u.SetManagedFields(nil)
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("kube: caching %s: %w", u.GetName(), err)
	}
	o := &cachedObject{raw: raw, managed: managed, written: written}
	if err := json.Unmarshal(raw, o); err != nil {
		return nil, fmt.Errorf("kube: caching %s: its metadata: %w", u.GetName(), err)
	}
	return o, nil
}

// ownedMetadata is an owned resource's informer's transform: of an
// object's metadata, the cache keeps what maps a change to its owner, and
// tells the controller's own writes from others': its namespace, name,
// resourceVersion, controller owner reference, and a digest of each of its
// managedFields entries. No end user's code sees it. It is idempotent, as
// client-go requires.
func ownedMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	kept := &ownedObject{PartialObjectMetadata: metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, ResourceVersion: m.ResourceVersion,
	}}}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		kept.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	kept.managed = managedDigests(m)
	for _, f := range m.ManagedFields {
		if f.Time != nil && f.Time.After(kept.written) {
			kept.written = f.Time.Time
		}
	}
	return kept, nil
}

// ownedObject is how an owned resource's cache keeps an object.
type ownedObject struct {
	metav1.PartialObjectMetadata
	managed []managedDigest // one for each managedFields entry
	// written is the newest time among the object's managedFields, to the
	// second: when the API server last stamped a write of it.
	written time.Time
}

// DeepCopyObject copies o.
func (o *ownedObject) DeepCopyObject() runtime.Object {
	c := &ownedObject{managed: slices.Clone(o.managed), written: o.written}
	o.DeepCopyInto(&c.PartialObjectMetadata)
	return c
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
