package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
)

// converter converts the objects of one version to and from the hub's
// types, keeping in an annotation what the other side can't hold.
type converter[HubSpec, HubStatus any] struct {
	version string
	// up decodes raw, an object at the version, and converts it to the
	// hub's types; down converts hub to the version and encodes it. hub is
	// the hub's version, which names the annotation of its fields.
	up   func(raw []byte, group, hub string) (Object[HubSpec, HubStatus], error)
	down func(obj Object[HubSpec, HubStatus], group, hub string) ([]byte, error)
	ok   bool // both functions given
}

func (c *converter[HubSpec, HubStatus]) complete() bool { return c.ok }

// hubConverter is the hub's own: a decode and an encode.
func hubConverter[HubSpec, HubStatus any](version string) *converter[HubSpec, HubStatus] {
	return &converter[HubSpec, HubStatus]{
		version: version,
		ok:      true,
		up: func(raw []byte, _, _ string) (Object[HubSpec, HubStatus], error) {
			var obj Object[HubSpec, HubStatus]
			if err := json.Unmarshal(raw, &obj); err != nil {
				return obj, fmt.Errorf("decoding it: %w", err)
			}
			return obj, nil
		},
		down: func(obj Object[HubSpec, HubStatus], _, _ string) ([]byte, error) {
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
		up: func(raw []byte, group, hub string) (Object[HubSpec, HubStatus], error) {
			var obj Object[Spec, Status]
			if err := json.Unmarshal(raw, &obj); err != nil {
				return Object[HubSpec, HubStatus]{}, fmt.Errorf("decoding it: %w", err)
			}
			out, err := convertKeeping(obj, to, from, keptKey(group, version), keptKey(group, hub))
			out.APIVersion = group + "/" + hub
			return out, err
		},
		down: func(obj Object[HubSpec, HubStatus], group, hub string) ([]byte, error) {
			out, err := convertKeeping(obj, from, to, keptKey(group, hub), keptKey(group, version))
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

// conversionPanic is a conversion function's panic, recovered.
type conversionPanic struct {
	name string
	pv   panicValue
}

func (p *conversionPanic) Error() string {
	return fmt.Sprintf("%s panicked: %v", p.name, p.pv.value)
}

// call runs c on in, recovering a panic as a *conversionPanic, and refuses
// an object whose name, namespace, UID or kind isn't in's, as the API
// server does.
func (c conversion[S1, St1, S2, St2]) call(in Object[S1, St1]) (out Object[S2, St2], err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &conversionPanic{name: c.name, pv: panicValue{value: r, stack: debug.Stack()}}
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
//
// When g, converting back, doesn't give in's spec and status, the result
// carries the annotation inKey with them, so a conversion back restores
// them; otherwise it carries no inKey.
func convertKeeping[S1, St1, S2, St2 any](in Object[S1, St1], f conversion[S1, St1, S2, St2], g conversion[S2, St2, S1, St1], inKey, outKey string) (Object[S2, St2], error) {
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
		if out, err = restore(out, kept, f, g, outKey); err != nil {
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
func restore[S1, St1, S2, St2 any](out Object[S2, St2], kept string, f conversion[S1, St1, S2, St2], g conversion[S2, St2, S1, St1], key string) (Object[S2, St2], error) {
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
	merged, _ := merge3(cur, keptTree, lossyTree, true, true, true)
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

// merge3 merges a field of three objects: cur, the converted object's;
// kept, the kept object's; lossy, the kept object's after a round trip.
// has* say whether each has the field. Where lossy and kept agree, the
// round trip lost nothing, and cur's stands; where they differ, kept's is
// taken unless cur changed lossy's; objects are merged field by field.
func merge3(cur, kept, lossy any, hasCur, hasKept, hasLossy bool) (any, bool) {
	if hasKept == hasLossy && reflect.DeepEqual(kept, lossy) {
		return cur, hasCur
	}
	cm, cok := cur.(map[string]any)
	km, kok := kept.(map[string]any)
	lm, lok := lossy.(map[string]any)
	if cok && kok && (lok || !hasLossy) {
		out := map[string]any{}
		keys := map[string]bool{}
		for _, m := range []map[string]any{cm, km, lm} {
			for k := range m {
				keys[k] = true
			}
		}
		for k := range keys {
			c, hc := cm[k]
			kv, hk := km[k]
			l, hl := lm[k]
			if v, ok := merge3(c, kv, l, hc, hk, hl); ok {
				out[k] = v
			}
		}
		return out, true
	}
	if hasCur == hasLossy && reflect.DeepEqual(cur, lossy) {
		return kept, hasKept // unchanged since the round trip: kept's
	}
	return cur, hasCur // changed at the other version: cur's
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
