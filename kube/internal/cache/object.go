package cache

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Object is how the cache keeps each of the resource's objects: its
// metadata (its name, UID, resourceVersion, generation, finalizers and the
// rest of metav1.ObjectMeta, but managedFields), and the JSON of the rest
// of it, from which each reconcile decodes its own copy, its metadata
// copied in. Both are never written once cached. The two are a third of
// the heap of the nested maps the dynamic client decodes an object into,
// and the informer decodes the API server's JSON straight into them
// (Decode). The managedFields are kept as a digest of each entry:
// nothing else in the controller reads them, and each apply adds an entry
// holding the whole set of fields it applied, often most of an object's
// size.
type Object struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Raw     []byte   // the object but its metadata
	managed []Digest // one for each managedFields entry, in room if they fit
	room    managedRoom
	// written is the newest time among the object's managedFields: when
	// the API server last stamped a write of it, to the second.
	Written time.Time
	// listed is whether a list brought it, not a watch event
	// (MarkingListed).
	Listed bool
}

// DeepCopyObject copies o. Its JSON is shared: nothing writes it.
func (o *Object) DeepCopyObject() runtime.Object {
	c := &Object{TypeMeta: o.TypeMeta, Raw: o.Raw, Written: o.Written, Listed: o.Listed}
	c.managed = c.room.keep(o.managed)
	o.DeepCopyInto(&c.ObjectMeta)
	return c
}

// shared is s, one copy of it for the whole process: the strings every
// cached object of a resource repeats (its API version, its kind, often
// its namespace) are kept once, not once an object.
func shared(s string) string { return unique.Make(s).Value() }

// OwnedMetadata is an owned resource's informer's transform: of an
// object's metadata, the cache keeps what maps a change to its owner, and
// tells the controller's own writes from others': its namespace, name,
// resourceVersion, controller owner reference, and a digest of each of its
// managedFields entries. No end user's code sees it. It is idempotent, as
// client-go requires.
func OwnedMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	listed := m.SelfLink == listedMark //nolint:staticcheck // selfLink, which the API server no longer sets, carries listedMark from the list
	kept := &Owned{namespace: shared(m.Namespace), name: m.Name, resourceVersion: m.ResourceVersion, Listed: listed}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		kept.ref[0] = metav1.OwnerReference{
			APIVersion: shared(ref.APIVersion), Kind: shared(ref.Kind), Name: ref.Name, UID: ref.UID, Controller: &isController,
		}
		kept.owner = kept.ref[:]
		if ref.Name == m.Name {
			pack(&kept.name, &kept.resourceVersion, (*string)(&kept.ref[0].UID))
			kept.ref[0].Name = kept.name // one copy, when the owner's name is the object's
		} else {
			pack(&kept.name, &kept.resourceVersion, (*string)(&kept.ref[0].UID), &kept.ref[0].Name)
		}
	} else {
		pack(&kept.name, &kept.resourceVersion)
	}
	kept.managed, kept.Written = appendDigests(kept.room[:0], m.ManagedFields), newestWrite(m.ManagedFields)
	return kept, nil
}

// isController is every kept controller reference's Controller: true,
// one for all of them. Nothing writes it.
var isController = true

// pack has the strings ss point to share one allocation: a cached
// object's strings live and die together, and the garbage collector marks
// one object where it would mark each.
func pack(ss ...*string) {
	n := 0
	for _, s := range ss {
		n += len(*s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range ss {
		b.WriteString(*s)
	}
	all := b.String()
	for _, s := range ss {
		*s, all = all[:len(*s)], all[len(*s):]
	}
}

// Owned is how an owned resource's cache keeps an object: a
// metav1.Object of the fields OwnedMetadata keeps, and no room for the
// others, which read as empty. An owned object is cached for each object
// the controller reconciles, often more: metav1.ObjectMeta's room for
// every field would be twice the size of what it keeps.
type Owned struct {
	namespace, name, resourceVersion string
	owner                            []metav1.OwnerReference // ref[:], if it has a controller reference
	ref                              [1]metav1.OwnerReference

	managed []Digest // one for each managedFields entry, in room if they fit
	room    managedRoom
	// written is the newest time among the object's managedFields, to the
	// second: when the API server last stamped a write of it.
	Written time.Time
	// listed is whether a list brought it, not a watch event
	// (MarkingListed).
	Listed bool
}

// DeepCopyObject copies o.
func (o *Owned) DeepCopyObject() runtime.Object {
	c := *o
	if len(o.owner) > 0 && &o.owner[0] == &o.ref[0] {
		c.owner = c.ref[:] // its own, not o's
	}
	c.managed = c.room.keep(o.managed)
	return &c
}

func (o *Owned) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (o *Owned) GetNamespace() string                            { return o.namespace }
func (o *Owned) SetNamespace(s string)                           { o.namespace = s }
func (o *Owned) GetName() string                                 { return o.name }
func (o *Owned) SetName(s string)                                { o.name = s }
func (o *Owned) GetResourceVersion() string                      { return o.resourceVersion }
func (o *Owned) SetResourceVersion(s string)                     { o.resourceVersion = s }
func (o *Owned) GetOwnerReferences() []metav1.OwnerReference     { return o.owner }
func (o *Owned) SetOwnerReferences(refs []metav1.OwnerReference) { o.owner = refs }
func (o *Owned) GetGenerateName() string                         { return "" }
func (o *Owned) SetGenerateName(string)                          {}
func (o *Owned) GetUID() types.UID                               { return "" }
func (o *Owned) SetUID(types.UID)                                {}
func (o *Owned) GetGeneration() int64                            { return 0 }
func (o *Owned) SetGeneration(int64)                             {}
func (o *Owned) GetSelfLink() string                             { return "" }
func (o *Owned) SetSelfLink(string)                              {}
func (o *Owned) GetCreationTimestamp() metav1.Time               { return metav1.Time{} }
func (o *Owned) SetCreationTimestamp(metav1.Time)                {}
func (o *Owned) GetDeletionTimestamp() *metav1.Time              { return nil }
func (o *Owned) SetDeletionTimestamp(*metav1.Time)               {}
func (o *Owned) GetDeletionGracePeriodSeconds() *int64           { return nil }
func (o *Owned) SetDeletionGracePeriodSeconds(*int64)            {}
func (o *Owned) GetLabels() map[string]string                    { return nil }
func (o *Owned) SetLabels(map[string]string)                     {}
func (o *Owned) GetAnnotations() map[string]string               { return nil }
func (o *Owned) SetAnnotations(map[string]string)                {}
func (o *Owned) GetFinalizers() []string                         { return nil }
func (o *Owned) SetFinalizers([]string)                          {}
func (o *Owned) GetManagedFields() []metav1.ManagedFieldsEntry   { return nil }
func (o *Owned) SetManagedFields([]metav1.ManagedFieldsEntry)    {}

// newestWrite is the newest time among fields, a managedFields: when the
// API server last stamped a write of their object, to the second; zero
// when it has none.
func newestWrite(fields []metav1.ManagedFieldsEntry) time.Time {
	var newest time.Time
	for _, f := range fields {
		if f.Time != nil && f.Time.After(newest) {
			newest = f.Time.Time
		}
	}
	return newest
}

// trim is how a cache read only through ReadTrimmed keeps its objects:
// each a Object whose JSON is only what typ, the Reader's type,
// decodes. A Deployment's pod template, kilobytes that a Reconciler
// reading its replicas and status never looks at, isn't kept.
type Trim struct {
	typ reflect.Type
	// keep is the JSON of what typ decodes of raw, a Object's,
	// encoded again, without metadata: the Object keeps its own.
	keep func(raw []byte) ([]byte, error)
}

// TrimTo is the trim of a cache read as T.
func TrimTo[T any]() *Trim {
	return &Trim{typ: reflect.TypeFor[T](), keep: func(raw []byte) ([]byte, error) {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		data, err := json.Marshal(&v)
		if err != nil {
			return nil, err
		}
		return withoutMetadata(data)
	}}
}

// transform is the informer's transform of a cache kept trimmed: the
// object's JSON replaced by t.keep's, its metadata as it is, so owners,
// own writes and Get's wait for them are followed as in a whole cache. An
// object whose JSON doesn't decode into t.typ is kept whole: each read of
// it fails naming the field, as a whole cache's would, and the informer
// goes on. Trimming what was trimmed changes nothing, as client-go
// requires of a transform.
func (t *Trim) Transform(obj any) (any, error) {
	u, ok := obj.(*Object)
	if !ok {
		return obj, nil
	}
	if raw, err := t.keep(u.Raw); err == nil {
		u.Raw = raw
	}
	return u, nil
}

// withoutMetadata is data, a JSON object, without its metadata member, in
// an allocation of its size.
func withoutMetadata(data []byte) ([]byte, error) {
	var meta []byte
	if err := topLevel(data, func(key, member, _ []byte) error {
		if string(key) == "metadata" {
			meta = member
		}
		return nil
	}); err != nil || meta == nil {
		return data, err
	}
	out := make([]byte, 0, len(data)-len(meta))
	err := topLevel(data, func(key, member, _ []byte) error {
		if string(key) == "metadata" {
			return nil
		}
		if len(out) == 0 {
			out = append(out, '{')
		} else {
			out = append(out, ',')
		}
		out = append(out, member...)
		return nil
	})
	if len(out) == 0 {
		out = append(out, '{')
	}
	return append(out, '}'), err
}
