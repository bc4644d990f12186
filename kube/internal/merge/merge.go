package merge

import (
	"encoding/json"
	"reflect"
)

// Lists is what Values knows of a schema: where its list-maps are, and
// their keys. A nil *Lists declares nothing below it.
type Lists struct {
	// Keys are the list-map keys of the list this node is, its items'
	// fields that identify them (x-kubernetes-list-map-keys); none when
	// it isn't a list-map.
	Keys []string
	// Fields are an object's fields, by name.
	Fields map[string]*Lists
	// Values is a map's values, whatever their key
	// (additionalProperties).
	Values *Lists
	// Items is a list's items.
	Items *Lists
}

func (l *Lists) field(name string) *Lists {
	if l == nil {
		return nil
	}
	if f, ok := l.Fields[name]; ok {
		return f
	}
	return l.Values
}

func (l *Lists) items() *Lists {
	if l == nil {
		return nil
	}
	return l.Items
}

func (l *Lists) keys() []string {
	if l == nil {
		return nil
	}
	return l.Keys
}

// Values merges current, kept and lossy (see the package doc), lists
// describing their list-maps, and returns the merged value.
func Values(current, kept, lossy any, lists *Lists) any {
	v, _ := merge3(current, kept, lossy, true, true, true, lists)
	return v
}

// merge3 merges a value of the three; has* say whether each has it, and
// the result is whether the merged one has it.
func merge3(cur, kept, lossy any, hasCur, hasKept, hasLossy bool, lists *Lists) (any, bool) {
	if hasKept == hasLossy && reflect.DeepEqual(kept, lossy) {
		return cur, hasCur // nothing lost here
	}
	cm, cok := cur.(map[string]any)
	km, kok := kept.(map[string]any)
	lm, lok := lossy.(map[string]any)
	if cok && kok && (lok || !hasLossy) {
		out := make(map[string]any, len(cm)+len(km))
		for _, m := range []map[string]any{cm, km, lm} {
			for k := range m {
				if _, done := out[k]; done {
					continue
				}
				c, hc := cm[k]
				kv, hk := km[k]
				l, hl := lm[k]
				if v, ok := merge3(c, kv, l, hc, hk, hl, lists.field(k)); ok {
					out[k] = v
				} else {
					out[k] = absent{}
				}
			}
		}
		for k, v := range out {
			if _, ok := v.(absent); ok {
				delete(out, k)
			}
		}
		return out, true
	}
	cl, cok := cur.([]any)
	kl, kok := kept.([]any)
	ll, lok := lossy.([]any)
	if cok && kok && lok {
		if out, ok := mergeList(cl, kl, ll, lists); ok {
			return out, true
		}
	}
	if hasCur == hasLossy && reflect.DeepEqual(cur, lossy) {
		return kept, hasKept // unchanged since the round trip: kept's
	}
	return cur, hasCur // changed at the old version: current's
}

// absent marks a field merged away, while the maps are still walked.
type absent struct{}

// mergeList merges three lists item by item; false when it can't pair
// kept's items with lossy's, and the lists are merged whole.
func mergeList(cur, kept, lossy []any, lists *Lists) ([]any, bool) {
	items := lists.items()
	for _, id := range []func(any) (string, bool){byKeys(lists.keys()), byName} {
		if id == nil {
			continue
		}
		ci, cok := identify(cur, id)
		ki, kok := identify(kept, id)
		li, lok := identify(lossy, id)
		if cok && kok && lok {
			return mergeIdentified(cur, kept, lossy, ci, ki, li, items), true
		}
	}
	if len(kept) != len(lossy) {
		return nil, false
	}
	pairs := align(cur, lossy)
	out := make([]any, 0, len(cur))
	for i, c := range cur {
		j := pairs[i]
		if j < 0 {
			out = append(out, c) // added at the old version
			continue
		}
		if v, ok := merge3(c, kept[j], lossy[j], true, true, true, items); ok {
			out = append(out, v)
		}
	}
	return out, true
}

// mergeIdentified merges lists whose items id names, ci, ki and li: each
// list's identities, in its order.
func mergeIdentified(cur, kept, lossy []any, ci, ki, li []string, items *Lists) []any {
	keptAt := index(ki)
	lossyAt := index(li)
	curAt := index(ci)
	// The items of kept the round trip lost whole, by the item of kept
	// before them (-1 for the start).
	lost := map[int][]int{}
	for j, k := range ki {
		if _, ok := lossyAt[k]; ok {
			continue
		}
		if _, ok := curAt[k]; ok {
			continue // current's item of its name wins
		}
		prev := j - 1
		for prev >= 0 {
			if _, ok := lossyAt[ki[prev]]; ok {
				if _, ok := curAt[ki[prev]]; ok {
					break
				}
			}
			prev--
		}
		lost[prev] = append(lost[prev], j)
	}
	out := make([]any, 0, len(cur)+len(lost))
	for _, j := range lost[-1] {
		out = append(out, kept[j])
	}
	for i, c := range cur {
		l, inLossy := lossyAt[ci[i]]
		k, inKept := keptAt[ci[i]]
		switch {
		case !inLossy:
			out = append(out, c) // added at the old version
		default:
			var kv any
			if inKept {
				kv = kept[k]
			}
			if v, ok := merge3(c, kv, lossy[l], true, inKept, true, items); ok {
				out = append(out, v)
			}
		}
		if inKept {
			for _, j := range lost[k] {
				out = append(out, kept[j])
			}
		}
	}
	return out
}

// index is the place of each of ids.
func index(ids []string) map[string]int {
	m := make(map[string]int, len(ids))
	for i, id := range ids {
		m[id] = i
	}
	return m
}

// identify is each of list's items' identity by id; false when an item
// has none, or two have one.
func identify(list []any, id func(any) (string, bool)) ([]string, bool) {
	out := make([]string, len(list))
	seen := make(map[string]bool, len(list))
	for i, item := range list {
		s, ok := id(item)
		if !ok || seen[s] {
			return nil, false
		}
		seen[s] = true
		out[i] = s
	}
	return out, true
}

// byKeys identifies an object by its values of keys, as JSON; an object
// without one of them has null there. Nil without keys.
func byKeys(keys []string) func(any) (string, bool) {
	if len(keys) == 0 {
		return nil
	}
	return func(item any) (string, bool) {
		m, ok := item.(map[string]any)
		if !ok {
			return "", false
		}
		if len(keys) == 1 {
			if s, ok := m[keys[0]].(string); ok {
				return "s" + s, true // no JSON starts with s
			}
		}
		vs := make([]any, len(keys))
		for i, k := range keys {
			vs[i] = m[k]
		}
		b, err := json.Marshal(vs)
		return string(b), err == nil
	}
}

// byName identifies an object by its string field name.
func byName(item any) (string, bool) {
	m, ok := item.(map[string]any)
	if !ok {
		return "", false
	}
	s, ok := m["name"].(string)
	return s, ok
}
