package admission

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// jsonPatch returns the JSON patch (RFC 6902) that brings raw, an object
// as the API server sent it, to what a defaulting function made of it:
// the changes from before to after, the object before and after the
// function as decoding its encoding gives it (jsonValue), applied to raw,
// the one decoding of the object here. Nil when nothing changed.
//
// What the Go type doesn't hold, and so neither before nor after has, is
// left as raw has it: a field of a newer CRD version, unknown to the type,
// is kept, not removed. A list whose length changed is replaced whole;
// one whose length didn't is patched item by item, so an item's fields
// unknown to the type are kept too.
func jsonPatch(raw []byte, before, after any) ([]byte, error) {
	if jsonEqual(before, after) {
		return nil, nil
	}
	r, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("reading the object as JSON: %w", err)
	}
	want := mergeChange(r, before, after)
	var ops []patchOp
	diff(&ops, r, want, "")
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// patchOp is one operation of a JSON patch.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// MarshalJSON writes a remove without a value, and an add or replace with
// its value, null included.
func (o patchOp) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{o.Op, o.Path, o.Value})
}

// mergeChange returns raw with the change from before to after made to
// it: raw where before and after agree, after where they differ, into
// objects and lists of one length that all three have.
func mergeChange(raw, before, after any) any {
	if jsonEqual(before, after) {
		return raw
	}
	if rm, bm, am, ok := maps3(raw, before, after); ok {
		out := make(map[string]any, len(rm))
		for k, v := range rm {
			out[k] = v
		}
		for k, av := range am {
			bv, had := bm[k]
			if had && jsonEqual(bv, av) {
				continue
			}
			if rv, inRaw := rm[k]; inRaw && had {
				out[k] = mergeChange(rv, bv, av)
				continue
			}
			out[k] = av
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				delete(out, k)
			}
		}
		return out
	}
	ra, ok1 := raw.([]any)
	ba, ok2 := before.([]any)
	aa, ok3 := after.([]any)
	if ok1 && ok2 && ok3 && len(ra) == len(ba) && len(ba) == len(aa) {
		out := make([]any, len(ra))
		for i := range ra {
			out[i] = mergeChange(ra[i], ba[i], aa[i])
		}
		return out
	}
	return after
}

func maps3(a, b, c any) (am, bm, cm map[string]any, ok bool) {
	am, ok1 := a.(map[string]any)
	bm, ok2 := b.(map[string]any)
	cm, ok3 := c.(map[string]any)
	return am, bm, cm, ok1 && ok2 && ok3
}

// diff appends to ops the operations that bring a, at path, to b.
func diff(ops *[]patchOp, a, b any, path string) {
	if jsonEqual(a, b) {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for _, k := range sortedKeys(am) {
			if _, ok := bm[k]; !ok {
				*ops = append(*ops, patchOp{Op: "remove", Path: path + "/" + escape(k)})
			}
		}
		for _, k := range sortedKeys(bm) {
			av, ok := am[k]
			if !ok {
				*ops = append(*ops, patchOp{Op: "add", Path: path + "/" + escape(k), Value: bm[k]})
				continue
			}
			diff(ops, av, bm[k], path+"/"+escape(k))
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			diff(ops, al[i], bl[i], path+"/"+strconv.Itoa(i))
		}
		return
	}
	*ops = append(*ops, patchOp{Op: "replace", Path: path, Value: b})
}

// escape is a JSON pointer's reference token for key (RFC 6901).
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
