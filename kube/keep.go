package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/z5labs/humus/kube/internal/control"
	"github.com/z5labs/humus/kube/internal/merge"
	"github.com/z5labs/humus/kube/internal/review"
)

// converter converts the objects of one version to and from the hub's
// types, keeping in an annotation what the other side can't hold.
type converter[HubSpec, HubStatus any] struct {
	version string
	// toHub decodes raw, an object at the version, and converts it to the
	// hub's types; fromHub converts hub to the version and encodes it. hub
	// is the hub's version, which names the annotation of its fields; m
	// merges what was kept, with the list-maps of the version converted
	// to.
	toHub   func(raw []byte, group, hub string, m keeper) (Object[HubSpec, HubStatus], error)
	fromHub func(obj Object[HubSpec, HubStatus], group, hub string, m keeper) ([]byte, error)
	ok      bool // both functions given
	// hubLists and ownLists are the list-maps of the hub's schema and of
	// the version's, read once, when first needed; nil for none.
	hubLists, ownLists func() *merge.Lists
	// merge is the three-way merge of what was kept: merge.Values. A
	// test's seam.
	merge func(cur, kept, lossy any, lists *merge.Lists) any
}

// keeper is how a conversion merges what an annotation kept: by merge,
// with lists, the list-maps of the version converted to.
type keeper struct {
	merge func(cur, kept, lossy any, lists *merge.Lists) any
	lists *merge.Lists
}

func (c *converter[HubSpec, HubStatus]) complete() bool { return c.ok }

// up decodes raw, an object at c's version, and converts it to the hub's
// types.
func (c *converter[HubSpec, HubStatus]) up(raw []byte, group, hub string) (Object[HubSpec, HubStatus], error) {
	return c.toHub(raw, group, hub, c.keeper(c.hubLists))
}

// down converts obj, at the hub, to c's version, and encodes it.
func (c *converter[HubSpec, HubStatus]) down(obj Object[HubSpec, HubStatus], group, hub string) ([]byte, error) {
	return c.fromHub(obj, group, hub, c.keeper(c.ownLists))
}

func (c *converter[HubSpec, HubStatus]) keeper(lists func() *merge.Lists) keeper {
	k := keeper{merge: c.merge}
	if k.merge == nil {
		k.merge = merge.Values
	}
	if lists != nil {
		k.lists = lists()
	}
	return k
}

// withLists is a copy of c that merges by the list-maps of hub, the hub's
// schema, converting to the hub, and of own, its version's, converting to
// it; nil for a nil c.
func (c *converter[HubSpec, HubStatus]) withLists(hub, own func() *merge.Lists) *converter[HubSpec, HubStatus] {
	if c == nil {
		return nil
	}
	out := *c
	out.hubLists, out.ownLists = hub, own
	return &out
}

// listsOf reads, once, when first called, the list-maps of the schema of
// a one-version CRD; nil when it has none, or the CRD doesn't build (which
// CRD and Handler report).
func listsOf(crd func() (*apiextensionsv1.CustomResourceDefinition, error)) func() *merge.Lists {
	return sync.OnceValue(func() *merge.Lists {
		if crd == nil {
			return nil
		}
		c, err := crd()
		if err != nil || len(c.Spec.Versions) == 0 || c.Spec.Versions[0].Schema == nil {
			return nil
		}
		return listsFrom(c.Spec.Versions[0].Schema.OpenAPIV3Schema)
	})
}

// listsFrom is where the schema p declares list-maps (x-kubernetes-list-type
// map), and their keys; nil where it declares none.
func listsFrom(p *apiextensionsv1.JSONSchemaProps) *merge.Lists {
	if p == nil {
		return nil
	}
	var l merge.Lists
	found := false
	if p.XListType != nil && *p.XListType == "map" && len(p.XListMapKeys) > 0 {
		l.Keys, found = slices.Clone(p.XListMapKeys), true
	}
	for name, f := range p.Properties {
		if sub := listsFrom(&f); sub != nil {
			if l.Fields == nil {
				l.Fields = map[string]*merge.Lists{}
			}
			l.Fields[name], found = sub, true
		}
	}
	if p.AdditionalProperties != nil {
		if l.Values = listsFrom(p.AdditionalProperties.Schema); l.Values != nil {
			found = true
		}
	}
	if p.Items != nil {
		if l.Items = listsFrom(p.Items.Schema); l.Items != nil {
			found = true
		}
	}
	if !found {
		return nil
	}
	return &l
}

// hubConverter is the hub's own: a decode and an encode.
func hubConverter[HubSpec, HubStatus any](version string) *converter[HubSpec, HubStatus] {
	return &converter[HubSpec, HubStatus]{
		version: version,
		ok:      true,
		toHub: func(raw []byte, _, _ string, _ keeper) (Object[HubSpec, HubStatus], error) {
			var obj Object[HubSpec, HubStatus]
			if err := json.Unmarshal(raw, &obj); err != nil {
				return obj, fmt.Errorf("decoding it: %w", err)
			}
			return obj, nil
		},
		fromHub: func(obj Object[HubSpec, HubStatus], _, _ string, _ keeper) ([]byte, error) {
			return json.Marshal(obj)
		},
	}
}

// newConverter is the converter of version, by toHub and fromHub.
func newConverter[Spec, Status, HubSpec, HubStatus any](
	version string,
	toHub func(Object[Spec, Status]) (Object[HubSpec, HubStatus], error),
	fromHub func(Object[HubSpec, HubStatus]) (Object[Spec, Status], error),
) *converter[HubSpec, HubStatus] {
	to := conversion[Spec, Status, HubSpec, HubStatus]{name: "toHub of " + version, f: toHub}
	from := conversion[HubSpec, HubStatus, Spec, Status]{name: "fromHub of " + version, f: fromHub}
	return &converter[HubSpec, HubStatus]{
		version: version,
		ok:      toHub != nil && fromHub != nil,
		toHub: func(raw []byte, group, hub string, m keeper) (Object[HubSpec, HubStatus], error) {
			var obj Object[Spec, Status]
			if err := json.Unmarshal(raw, &obj); err != nil {
				return Object[HubSpec, HubStatus]{}, fmt.Errorf("decoding it: %w", err)
			}
			out, err := convertKeeping(obj, to, from, keptKey(group, version), keptKey(group, hub), m)
			out.APIVersion = group + "/" + hub
			return out, err
		},
		fromHub: func(obj Object[HubSpec, HubStatus], group, hub string, m keeper) ([]byte, error) {
			out, err := convertKeeping(obj, from, to, keptKey(group, hub), keptKey(group, version), m)
			if err != nil {
				return nil, err
			}
			out.APIVersion = group + "/" + version
			return json.Marshal(out)
		},
	}
}

// keptKey is the annotation that keeps, on an object at another version,
// the spec and status the object had at version, where the other version
// can't hold them all: <group>/<version>.
func keptKey(group, version string) string { return group + "/" + version }

// conversion is one of the user's functions, named for errors.
type conversion[S1, St1, S2, St2 any] struct {
	name string
	f    func(Object[S1, St1]) (Object[S2, St2], error)
}

// call runs c on in, recovering a panic as a *conversionPanic, and refuses
// an object whose name, namespace, UID or kind isn't in's, as the API
// server does.
func (c conversion[S1, St1, S2, St2]) call(in Object[S1, St1]) (out Object[S2, St2], err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &review.Panic{Name: c.name, PV: control.PanicValue{Value: r, Stack: debug.Stack()}}
		}
	}()
	out, err = c.f(in)
	if err != nil {
		return out, fmt.Errorf("%s: %w", c.name, err)
	}
	changed := func(field string, from, to any) error {
		return fmt.Errorf("%s changed %s from %q to %q: a conversion keeps the object's name, namespace, UID and kind, so copy its ObjectMeta", c.name, field, from, to)
	}
	switch {
	case out.Name != in.Name:
		return out, changed("metadata.name", in.Name, out.Name)
	case out.Namespace != in.Namespace:
		return out, changed("metadata.namespace", in.Namespace, out.Namespace)
	case out.UID != in.UID:
		return out, changed("metadata.uid", in.UID, out.UID)
	case out.Kind != "" && out.Kind != in.Kind:
		return out, changed("kind", in.Kind, out.Kind)
	}
	out.TypeMeta = in.TypeMeta // the caller sets the version's
	return out, nil
}

// convertKeeping converts in by f, and keeps what the conversion loses.
//
// When in carries the annotation outKey, the spec and status the object
// had at the other version, the fields of those that f's result lacks
// because they passed through in's version, which can't hold them, are
// restored: each field where the conversion of the kept object there and
// back (lossy) differs from the kept object (kept), and the converted
// object still has lossy's value, so a change made at in's version wins.
// m merges them (merge.Values): objects field by field, lists item by
// item, paired by m's list-map keys, a name, or their place.
//
// When g, converting back, doesn't give in's spec and status, the result
// carries the annotation inKey with them, so a conversion back restores
// them; otherwise it carries no inKey.
func convertKeeping[S1, St1, S2, St2 any](in Object[S1, St1], f conversion[S1, St1, S2, St2], g conversion[S2, St2, S1, St1], inKey, outKey string, m keeper) (Object[S2, St2], error) {
	kept, hasKept := in.Annotations[outKey]
	if hasKept {
		in.Annotations = maps.Clone(in.Annotations)
		delete(in.Annotations, outKey)
		if len(in.Annotations) == 0 {
			in.Annotations = nil
		}
	}
	out, err := f.call(in)
	if err != nil {
		return out, err
	}
	if hasKept {
		if out, err = restore(out, kept, f, g, outKey, m); err != nil {
			return out, err
		}
	}
	// What g gives back, without the annotations, which it may copy.
	probe := out
	probe.Annotations = nil
	back, err := g.call(probe)
	if err != nil {
		return out, err
	}
	want, err := specStatus(in)
	if err != nil {
		return out, err
	}
	got, err := specStatus(back)
	if err != nil {
		return out, err
	}
	out.Annotations = maps.Clone(out.Annotations)
	if bytes.Equal(want, got) {
		delete(out.Annotations, inKey)
	} else {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[inKey] = string(want)
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return out, nil
}

// restore returns out with the fields of kept, an object's spec and status
// at out's version, that a conversion through in's version loses, unless
// out changed them.
func restore[S1, St1, S2, St2 any](out Object[S2, St2], kept string, f conversion[S1, St1, S2, St2], g conversion[S2, St2, S1, St1], key string, m keeper) (Object[S2, St2], error) {
	keptObj := Object[S2, St2]{TypeMeta: out.TypeMeta, ObjectMeta: out.ObjectMeta}
	keptObj.Annotations = nil
	if err := json.Unmarshal([]byte(kept), &keptObj); err != nil {
		return out, fmt.Errorf("the annotation %s doesn't decode as the object's spec and status: %w", key, err)
	}
	through, err := g.call(keptObj)
	if err != nil {
		return out, err
	}
	lossy, err := f.call(through)
	if err != nil {
		return out, err
	}
	var cur, keptTree, lossyTree map[string]any
	for _, p := range []struct {
		obj  any
		tree *map[string]any
	}{{specStatusOf(out), &cur}, {specStatusOf(keptObj), &keptTree}, {specStatusOf(lossy), &lossyTree}} {
		b, err := json.Marshal(p.obj)
		if err != nil {
			return out, err
		}
		if err := json.Unmarshal(b, p.tree); err != nil {
			return out, err
		}
	}
	merged := m.merge(cur, keptTree, lossyTree, m.lists)
	b, err := json.Marshal(merged)
	if err != nil {
		return out, err
	}
	var restored Object[S2, St2]
	if err := json.Unmarshal(b, &restored); err != nil {
		return out, fmt.Errorf("the fields kept in the annotation %s don't decode: %w", key, err)
	}
	out.Spec, out.Status = restored.Spec, restored.Status
	return out, nil
}

// specStatus is obj's spec and status, as the JSON the annotation keeps.
func specStatus[S, St any](obj Object[S, St]) ([]byte, error) {
	return json.Marshal(specStatusOf(obj))
}

func specStatusOf[S, St any](obj Object[S, St]) any {
	return struct {
		Spec   S  `json:"spec"`
		Status St `json:"status"`
	}{obj.Spec, obj.Status}
}
