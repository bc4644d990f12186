package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
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
			errs = append(errs, roundTripThrough[Spec, Status](set, v.Hub, raw, want, from, to, where)...)
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
	there, err := set.convert(raw, fromAPI, hub.Group+"/"+to)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if n := annotationsSize(there); n > totalAnnotationsLimit {
		errs = append(errs, fmt.Errorf("%s: its annotations at %s add up to %d bytes, more than the API server's %d, which would refuse it", where, to, n, totalAnnotationsLimit))
	}
	back, err := set.convert(there, hub.Group+"/"+to, fromAPI)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	got, err := decodedComparable[Spec, Status](back)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", where, err))
	}
	for _, d := range differences("", want, got) {
		errs = append(errs, fmt.Errorf("%s: %s", where, d))
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
	back, err = set.convert(bare, hub.Group+"/"+to, fromAPI)
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
		errs = append(errs, fmt.Errorf("%s, without the annotation %s: %s: %s's toHub or fromHub loses it, and the annotation hid that; the hub must hold every field of every version, and fromHub set each one", where, keptKey(hub.Group, from), d, from))
	}
	return errs
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

// differences names each field where got isn't want, under path.
func differences(path string, want, got any) []string {
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
		var out []string
		for _, k := range keys {
			w, hw := wm[k]
			g, hg := gm[k]
			p := joinPath(path, k)
			switch {
			case hw && !hg:
				out = append(out, fmt.Sprintf("%s was %s, came back without it", p, jsonText(w)))
			case !hw && hg:
				out = append(out, fmt.Sprintf("%s wasn't there, came back %s", p, jsonText(g)))
			default:
				out = append(out, differences(p, w, g)...)
			}
		}
		return out
	}
	wl, wok := want.([]any)
	gl, gok := got.([]any)
	if wok && gok && len(wl) == len(gl) {
		var out []string
		for i := range wl {
			out = append(out, differences(path+"["+strconv.Itoa(i)+"]", wl[i], gl[i])...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []string{fmt.Sprintf("%s was %s, came back %s", path, jsonText(want), jsonText(got))}
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
