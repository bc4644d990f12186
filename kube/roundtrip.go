package kube

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/z5labs/humus/kube/internal/merge"
)

// totalAnnotationsLimit is the most bytes an object's annotations' keys
// and values may add up to: the API server refuses more.
const totalAnnotationsLimit = 256 * 1024

// RoundTrip checks, for a test, that nothing is lost when an object of
// one of v's versions is converted to each of the others and back, as the
// API server converts it when it is written at one version and read at
// another: each example is an object at the version whose types are Spec
// and Status, and is converted by the functions VersionOf was given,
// through the hub, with the annotation Handler keeps what a version can't
// hold in, exactly as Handler converts it.
//
// It returns nil when every example comes back with its spec, status,
// labels and annotations as they were, and otherwise one error naming,
// for each example and version, each field the round trip lost or
// changed, such as
//
//	kube: RoundTrip: v1alpha1 example 0 (ns/a) at v1beta1 and back: spec.size was 3, came back 0
//
// It also checks a changed round trip, as a client at another version
// makes one: for each string and number of the example's spec and status
// at the other version, one at a time (but an item's name or list-map
// key, which makes it another item), that leaf changed there, a letter or
// one more, and converted back, the change comes back and so does every
// other field, such as a port only the hub has of each item of a list
// one item of which changed:
//
//	kube: RoundTrip: v1beta1 example 0 (ns/p) at v1alpha1 and back, with spec.servers[0].image changed at v1alpha1: spec.servers[1].port was 11212, came back without it
//
// What a change makes is what it makes converted back without the
// annotation; a change the types or the functions refuse, such as a
// time no longer a time, is skipped. It reports the first change that
// loses something, for each example and version, once the unchanged
// round trip loses nothing.
//
// and each conversion that failed, and each object whose annotations,
// with the one kept, add up to more than the API server takes. Examples
// that fill every field, and fields whose zero value matters, find the
// most.
//
//	func TestMemcachedRoundTrip(t *testing.T) {
//		if err := kube.RoundTrip(app.Memcacheds, v1alpha1Examples...); err != nil {
//			t.Error(err)
//		}
//	}
func RoundTrip[Spec, Status, HubSpec, HubStatus any](v Versions[HubSpec, HubStatus], examples ...Object[Spec, Status]) error {
	if _, errs := v.build(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	set := newVersionSet(v)
	var from string
	for _, e := range v.entries() {
		if e.spec == reflect.TypeFor[Spec]() && e.status == reflect.TypeFor[Status]() {
			from = e.resource.Version
			break
		}
	}
	if from == "" {
		return fmt.Errorf("kube: RoundTrip: no version of %s is a Resource[%s, %s]", v.Hub.Kind, reflect.TypeFor[Spec](), reflect.TypeFor[Status]())
	}
	fromAPI := v.Hub.Group + "/" + from
	lists := map[string]*merge.Lists{} // each version's list-maps
	for _, e := range v.entries() {
		lists[e.resource.Version] = listsOf(e.resource.crd)()
	}
	var errs []error
	for i, ex := range examples {
		ex.APIVersion, ex.Kind = fromAPI, v.Hub.Kind
		name := ex.Name
		if ex.Namespace != "" {
			name = ex.Namespace + "/" + name
		}
		raw, err := json.Marshal(ex)
		if err != nil {
			errs = append(errs, fmt.Errorf("kube: RoundTrip: %s example %d (%s): encoding it: %w", from, i, name, err))
			continue
		}
		want, err := comparable(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range v.entries() {
			to := e.resource.Version
			if to == from {
				continue
			}
			where := fmt.Sprintf("kube: RoundTrip: %s example %d (%s) at %s and back", from, i, name, to)
			lost := roundTripThrough[Spec, Status](set, v.Hub, raw, want, from, to, where)
			if len(lost) == 0 {
				// Only once nothing is lost unchanged: a lost field would
				// be lost again with every change.
				// An item's key at any version it passes makes it another.
				keys := []*merge.Lists{lists[to], lists[from], lists[v.Hub.Version]}
				lost = changedRoundTrip[Spec, Status](set, v.Hub.Group, raw, want, from, to, where, keys)
			}
			errs = append(errs, lost...)
		}
	}
	return errors.Join(errs...)
}

// roundTripThrough converts raw, an example at from, whose comparable is
// want, to the version to and back, and returns each field lost, each
// failure, and, when to is the hub, each field lost without the
// annotation, where.
func roundTripThrough[Spec, Status, HubSpec, HubStatus any](set *versionSet[HubSpec, HubStatus], hub Resource[HubSpec, HubStatus], raw []byte, want map[string]any, from, to, where string) []error {
	var errs []error
	fromAPI := hub.Group + "/" + from
	there, err := set.Convert(raw, fromAPI, hub.Group+"/"+to)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if n := annotationsSize(there); n > totalAnnotationsLimit {
		errs = append(errs, fmt.Errorf("%s: its annotations at %s add up to %d bytes, more than the API server's %d, which would refuse it", where, to, n, totalAnnotationsLimit))
	}
	back, err := set.Convert(there, hub.Group+"/"+to, fromAPI)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	got, err := decodedComparable[Spec, Status](back)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	for _, d := range differences("", want, got) {
		errs = append(errs, fmt.Errorf("%s: %s", where, d.text))
	}
	if to != hub.Version {
		return errs
	}
	// The hub holds every field of every version: without the
	// annotation, the spoke's fields come back all the same.
	bare, err := withoutAnnotation(there, keptKey(hub.Group, from))
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if bare == nil {
		return errs // nothing kept
	}
	back, err = set.Convert(bare, hub.Group+"/"+to, fromAPI)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if got, err = decodedComparable[Spec, Status](back); err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	// Only the spec and status: the metadata came back with the first.
	wantFields := map[string]any{"spec": want["spec"], "status": want["status"]}
	gotFields := map[string]any{"spec": got["spec"], "status": got["status"]}
	for _, d := range differences("", wantFields, gotFields) {
		errs = append(errs, fmt.Errorf("%s, without the annotation %s: %s: %s's toHub or fromHub loses it, and the annotation hid that; the hub must hold every field of every version, and fromHub set each one", where, keptKey(hub.Group, from), d.text, from))
	}
	return errs
}

// changedRoundTrip converts raw, an example at from, whose comparable is
// want, to the version to, changes there one leaf of its spec or status,
// a string or a number, and converts it back, for each such leaf in turn;
// it returns the differences of the first change whose round trip loses
// a field, where: each field that came back other than want's and that
// the change didn't make, and each field the change made that didn't
// come back. What the change makes is what it makes without the
// annotation that keeps the fields to can't hold: the fields of the
// object converted back without it that differ from those of the
// unchanged one converted back without it. lists are the list-maps of
// to, from and the hub: a leaf that identifies a list's item at any of
// them, a list-map key or an item's name, isn't changed, since the item
// is then another one. A change the
// version's types or functions refuse is skipped.
func changedRoundTrip[Spec, Status, HubSpec, HubStatus any](set *versionSet[HubSpec, HubStatus], group string, raw []byte, want map[string]any, from, to, where string, lists []*merge.Lists) []error {
	fromAPI, toAPI := group+"/"+from, group+"/"+to
	there, err := set.Convert(raw, fromAPI, toAPI)
	if err != nil {
		return nil // the round trip unchanged reported it
	}
	bare := func(obj []byte) []byte {
		if b, err := withoutAnnotation(obj, keptKey(group, from)); err == nil && b != nil {
			return b
		}
		return obj
	}
	back := func(obj []byte) (map[string]any, error) {
		b, err := set.Convert(obj, toAPI, fromAPI)
		if err != nil {
			return nil, err
		}
		return decodedComparable[Spec, Status](b)
	}
	bareBase, err := back(bare(there))
	if err != nil {
		return nil
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(there))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil
	}
	var paths [][]any
	for _, f := range []string{"spec", "status"} {
		leaves(tree[f], fieldOf(lists, f), []any{f}, nil, &paths)
	}
	for _, p := range paths {
		changed, name, ok := changeLeaf(there, p)
		if !ok {
			continue
		}
		got, err := back(changed)
		if err != nil {
			continue // refused by the types or the functions
		}
		bareGot, err := back(bare(changed))
		if err != nil {
			continue
		}
		made := map[string]bool{}
		for _, d := range differences("", specStatusOfComparable(bareBase), specStatusOfComparable(bareGot)) {
			made[d.path] = true
		}
		// A change to a field from can't hold comes back in the
		// annotation that keeps it at from: that is the change kept, not
		// an annotation that wasn't there.
		keepsChange(want, got, keptKey(group, to))
		var errs []error
		at := fmt.Sprintf("%s, with %s changed at %s", where, name, to)
		for _, d := range differences("", want, got) {
			if !made[d.path] {
				errs = append(errs, fmt.Errorf("%s: %s", at, d.text))
			}
		}
		for _, d := range differences("", specStatusOfComparable(bareGot), specStatusOfComparable(got)) {
			if made[d.path] {
				errs = append(errs, fmt.Errorf("%s: the change made %s, and it didn't come back: %s", at, d.path, d.text))
			}
		}
		if len(errs) > 0 {
			return errs
		}
	}
	return nil
}

// keepsChange drops from got, a comparable, the annotation key that keeps
// what its version can't hold of another, when want, the comparable it is
// compared with, hasn't it.
func keepsChange(want, got map[string]any, key string) {
	annotations := func(c map[string]any) map[string]any {
		md, _ := c["metadata"].(map[string]any)
		as, _ := md["annotations"].(map[string]any)
		return as
	}
	if _, had := annotations(want)[key]; !had {
		delete(annotations(got), key)
	}
}

// specStatusOfComparable is the spec and status of c, a comparable.
func specStatusOfComparable(c map[string]any) map[string]any {
	return map[string]any{"spec": c["spec"], "status": c["status"]}
}

// fieldOf is the list-maps below the field name of each of ls.
func fieldOf(ls []*merge.Lists, name string) []*merge.Lists {
	out := make([]*merge.Lists, len(ls))
	for i, l := range ls {
		if l == nil {
			continue
		}
		if f, ok := l.Fields[name]; ok {
			out[i] = f
		} else {
			out[i] = l.Values
		}
	}
	return out
}

// leaves appends to out the path, of map keys and list indexes, of each
// string and number under v, at path, leaving out an item's name and its
// list-map keys at any of ls (identity, when v is a list's item).
func leaves(v any, ls []*merge.Lists, path []any, identity []string, out *[][]any) {
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		for _, k := range keys {
			if identity != nil && (k == "name" || slices.Contains(identity, k)) {
				continue
			}
			leaves(v[k], fieldOf(ls, k), append(slices.Clip(path), k), nil, out)
		}
	case []any:
		items := make([]*merge.Lists, len(ls))
		identity := []string{}
		for i, l := range ls {
			if l != nil {
				items[i] = l.Items
				identity = append(identity, l.Keys...)
			}
		}
		for i, item := range v {
			leaves(item, items, append(slices.Clip(path), i), identity, out)
		}
	case string, json.Number:
		*out = append(*out, path)
	}
}

// changeLeaf is obj with the leaf at path changed, a string by a letter
// more, a number by one more, and the path's name; false when it can't.
func changeLeaf(obj []byte, path []any) ([]byte, string, bool) {
	var tree any
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, "", false
	}
	name := ""
	parent, at := tree, path[:len(path)-1]
	for _, step := range at {
		switch step := step.(type) {
		case string:
			parent = parent.(map[string]any)[step]
			name = joinPath(name, step)
		case int:
			parent = parent.([]any)[step]
			name += "[" + strconv.Itoa(step) + "]"
		}
	}
	change := func(v any) (any, bool) {
		switch v := v.(type) {
		case string:
			return v + "x", true
		case json.Number:
			if n, err := v.Int64(); err == nil {
				return json.Number(strconv.FormatInt(n+1, 10)), true
			}
			if f, err := v.Float64(); err == nil {
				return json.Number(strconv.FormatFloat(f+1, 'g', -1, 64)), true
			}
		}
		return nil, false
	}
	var ok bool
	switch last := path[len(path)-1].(type) {
	case string:
		m := parent.(map[string]any)
		m[last], ok = change(m[last])
		name = joinPath(name, last)
	case int:
		l := parent.([]any)
		l[last], ok = change(l[last])
		name += "[" + strconv.Itoa(last) + "]"
	}
	if !ok {
		return nil, "", false
	}
	b, err := json.Marshal(tree)
	return b, name, err == nil
}

// decodedComparable is raw decoded as an Object[Spec, Status] and encoded
// again, as a client reads it, and comparable.
func decodedComparable[Spec, Status any](raw []byte) (map[string]any, error) {
	var obj Object[Spec, Status]
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decoding it: %w", err)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return comparable(b)
}

// withoutAnnotation is raw without the annotation key; nil when it hasn't
// it.
func withoutAnnotation(raw []byte, key string) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	md, _ := obj["metadata"].(map[string]any)
	as, _ := md["annotations"].(map[string]any)
	if _, ok := as[key]; !ok {
		return nil, nil
	}
	delete(as, key)
	return json.Marshal(obj)
}

// comparable is what of an object a round trip keeps: its spec, status,
// labels and annotations.
func comparable(raw []byte) (map[string]any, error) {
	var obj struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec   any `json:"spec"`
		Status any `json:"status"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("kube: RoundTrip: decoding an object: %w", err)
	}
	out := map[string]any{"spec": obj.Spec, "status": obj.Status}
	labels, annotations := map[string]any{}, map[string]any{}
	for k, v := range obj.Metadata.Labels {
		labels[k] = v
	}
	for k, v := range obj.Metadata.Annotations {
		annotations[k] = v
	}
	out["metadata"] = map[string]any{"labels": labels, "annotations": annotations}
	return out, nil
}

// annotationsSize is the bytes of raw's annotations' keys and values.
func annotationsSize(raw []byte) int {
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &obj)
	n := 0
	for k, v := range obj.Metadata.Annotations {
		n += len(k) + len(v)
	}
	return n
}

// difference is a field where a round trip's object isn't what it was:
// its path, and what it was and came back, in words that name it.
type difference struct {
	path, text string
}

// differences names each field where got isn't want, under path.
func differences(path string, want, got any) []difference {
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok {
		var keys []string
		for k := range wm {
			keys = append(keys, k)
		}
		for k := range gm {
			if _, ok := wm[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var out []difference
		for _, k := range keys {
			w, hw := wm[k]
			g, hg := gm[k]
			p := joinPath(path, k)
			switch {
			case hw && !hg:
				out = append(out, difference{p, fmt.Sprintf("%s was %s, came back without it", p, jsonText(w))})
			case !hw && hg:
				out = append(out, difference{p, fmt.Sprintf("%s wasn't there, came back %s", p, jsonText(g))})
			default:
				out = append(out, differences(p, w, g)...)
			}
		}
		return out
	}
	wl, wok := want.([]any)
	gl, gok := got.([]any)
	if wok && gok && len(wl) == len(gl) {
		var out []difference
		for i := range wl {
			out = append(out, differences(path+"["+strconv.Itoa(i)+"]", wl[i], gl[i])...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []difference{{path, fmt.Sprintf("%s was %s, came back %s", path, jsonText(want), jsonText(got))}}
}

func joinPath(path, key string) string {
	if strings.ContainsAny(key, "./") {
		key = "[" + strconv.Quote(key) + "]"
		return path + key
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
