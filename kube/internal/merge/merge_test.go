package merge

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	if s == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// The servers of a pool, whose port the old version can't hold.
var servers = &Lists{Fields: map[string]*Lists{"servers": {Keys: []string{"host"}}}}

// valuesCase is three values, the list-maps, and their merge.
type valuesCase struct {
	name                 string
	current, kept, lossy string
	lists                *Lists
	want                 string
}

func testValues(t *testing.T, cases []valuesCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			cur, kept, lossy := decode(t, tt.current), decode(t, tt.kept), decode(t, tt.lossy)
			keptBefore, _ := json.Marshal(kept)
			got := Values(cur, kept, lossy, tt.lists)
			if want := decode(t, tt.want); !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("merged\n %s\nwant\n %s", g, tt.want)
			}
			if after, _ := json.Marshal(kept); string(after) != string(keptBefore) {
				t.Errorf("kept modified: %s, was %s", after, keptBefore)
			}
		})
	}
}

func TestValuesObjects(t *testing.T) {
	testValues(t, []valuesCase{{
		name:    "a field the old version can't hold comes back",
		current: `{"size":3}`, kept: `{"size":2,"port":1}`, lossy: `{"size":2}`,
		want: `{"size":3,"port":1}`,
	}, {
		name:    "a field changed at the old version wins",
		current: `{"a":"x2","b":0}`, kept: `{"a":"x","b":1}`, lossy: `{"a":"x","b":0}`,
		want: `{"a":"x2","b":1}`,
	}, {
		name:    "where kept and lossy agree, current's stands",
		current: `{"l":[1,2,3]}`, kept: `{"l":[1,2]}`, lossy: `{"l":[1,2]}`,
		want: `{"l":[1,2,3]}`,
	}, {
		name:    "nested list-maps",
		current: `{"pools":{"p":{"servers":[{"host":"a","image":"2"}]}}}`,
		kept:    `{"pools":{"p":{"servers":[{"host":"a","image":"1","port":1}]}}}`,
		lossy:   `{"pools":{"p":{"servers":[{"host":"a","image":"1"}]}}}`,
		lists:   &Lists{Fields: map[string]*Lists{"pools": {Values: servers}}},
		want:    `{"pools":{"p":{"servers":[{"host":"a","image":"2","port":1}]}}}`,
	}, {
		name:    "a list removed at the old version stays removed",
		current: `{}`, kept: `{"s":[{"i":"a","p":1}]}`, lossy: `{"s":[{"i":"a"}]}`,
		want: `{}`,
	}})
}

// TestValuesByKeysAndNames: list items paired by their list-map keys, or
// their names.
func TestValuesByKeysAndNames(t *testing.T) {
	testValues(t, []valuesCase{{
		name:    "by list-map keys: one item changed",
		current: `{"servers":[{"host":"a","image":"1"},{"host":"b","image":"2"}]}`,
		kept:    `{"servers":[{"host":"a","image":"1","port":1},{"host":"b","image":"1","port":2}]}`,
		lossy:   `{"servers":[{"host":"a","image":"1"},{"host":"b","image":"1"}]}`,
		lists:   servers,
		want:    `{"servers":[{"host":"a","image":"1","port":1},{"host":"b","image":"2","port":2}]}`,
	}, {
		name:    "by list-map keys: moved, removed and added",
		current: `{"servers":[{"host":"c","image":"1"},{"host":"d","image":"1"},{"host":"a","image":"1"}]}`,
		kept:    `{"servers":[{"host":"a","image":"1","port":1},{"host":"b","image":"1","port":2},{"host":"c","image":"1","port":3}]}`,
		lossy:   `{"servers":[{"host":"a","image":"1"},{"host":"b","image":"1"},{"host":"c","image":"1"}]}`,
		lists:   servers,
		want:    `{"servers":[{"host":"c","image":"1","port":3},{"host":"d","image":"1"},{"host":"a","image":"1","port":1}]}`,
	}, {
		name:    "by list-map keys: an item the old version can't hold comes back after the one before it",
		current: `{"servers":[{"host":"a","image":"2"},{"host":"c","image":"1"}]}`,
		kept:    `{"servers":[{"host":"a","image":"1","port":1},{"host":"b","image":"1","grpc":true},{"host":"c","image":"1","port":3}]}`,
		lossy:   `{"servers":[{"host":"a","image":"1"},{"host":"c","image":"1"}]}`,
		lists:   servers,
		want:    `{"servers":[{"host":"a","image":"2","port":1},{"host":"b","image":"1","grpc":true},{"host":"c","image":"1","port":3}]}`,
	}, {
		name:    "by list-map keys: an item added at the old version under a lost item's key is current's",
		current: `{"servers":[{"host":"a","image":"1"},{"host":"b","image":"9"}]}`,
		kept:    `{"servers":[{"host":"a","image":"1","port":1},{"host":"b","image":"1","grpc":true}]}`,
		lossy:   `{"servers":[{"host":"a","image":"1"}]}`,
		lists:   servers,
		want:    `{"servers":[{"host":"a","image":"1","port":1},{"host":"b","image":"9"}]}`,
	}, {
		name:    "by name, undeclared",
		current: `{"s":[{"name":"b","image":"2"},{"name":"a","image":"1"}]}`,
		kept:    `{"s":[{"name":"a","image":"1","port":1},{"name":"b","image":"1","port":2}]}`,
		lossy:   `{"s":[{"name":"a","image":"1"},{"name":"b","image":"1"}]}`,
		want:    `{"s":[{"name":"b","image":"2","port":2},{"name":"a","image":"1","port":1}]}`,
	}, {
		name:    "keys that don't identify the items (a hub-only key) fall back to names",
		current: `{"servers":[{"name":"a","image":"2"},{"name":"b","image":"1"}]}`,
		kept:    `{"servers":[{"name":"a","host":"x","image":"1"},{"name":"b","host":"y","image":"1"}]}`,
		lossy:   `{"servers":[{"name":"a","image":"1"},{"name":"b","image":"1"}]}`,
		lists:   servers,
		want:    `{"servers":[{"name":"a","host":"x","image":"2"},{"name":"b","host":"y","image":"1"}]}`,
	}})
}

// TestValuesByPlace: list items paired by their place.
func TestValuesByPlace(t *testing.T) {
	testValues(t, []valuesCase{{
		name:    "by place: one changed",
		current: `{"s":[{"i":"1"},{"i":"2"},{"i":"1"}]}`,
		kept:    `{"s":[{"i":"1","p":1},{"i":"1","p":2},{"i":"1","p":3}]}`,
		lossy:   `{"s":[{"i":"1"},{"i":"1"},{"i":"1"}]}`,
		want:    `{"s":[{"i":"1","p":1},{"i":"2","p":2},{"i":"1","p":3}]}`,
	}, {
		name:    "by place: the first removed",
		current: `{"s":[{"i":"b"},{"i":"c"}]}`,
		kept:    `{"s":[{"i":"a","p":1},{"i":"b","p":2},{"i":"c","p":3}]}`,
		lossy:   `{"s":[{"i":"a"},{"i":"b"},{"i":"c"}]}`,
		want:    `{"s":[{"i":"b","p":2},{"i":"c","p":3}]}`,
	}, {
		name:    "by place: two removed, one changed between them: paired with nothing",
		current: `{"s":[{"i":"a"},{"i":"x"},{"i":"e"}]}`,
		kept:    `{"s":[{"i":"a","p":1},{"i":"b","p":2},{"i":"c","p":3},{"i":"e","p":5}]}`,
		lossy:   `{"s":[{"i":"a"},{"i":"b"},{"i":"c"},{"i":"e"}]}`,
		want:    `{"s":[{"i":"a","p":1},{"i":"x"},{"i":"e","p":5}]}`,
	}, {
		name:    "by place: kept and lossy of other lengths merge whole",
		current: `{"s":[1,3]}`, kept: `{"s":[1,2,3]}`, lossy: `{"s":[1,2]}`,
		want: `{"s":[1,3]}`,
	}, {
		name:    "by place: kept and lossy of other lengths, unchanged: kept's",
		current: `{"s":[1,2]}`, kept: `{"s":[1,2,3]}`, lossy: `{"s":[1,2]}`,
		want: `{"s":[1,2,3]}`,
	}})
}

// TestAlignBounded: a list past the table's bound pairs by place, without
// the table.
func TestAlignBounded(t *testing.T) {
	n := 1000
	cur, lossy := make([]any, n), make([]any, n)
	for i := range n {
		cur[i], lossy[i] = float64(i), float64(-i-1)
	}
	pairs := align(cur, lossy)
	for i, j := range pairs {
		if i != j {
			t.Fatalf("pairs[%d] = %d, want by place", i, j)
		}
	}
	pairs = align(cur, lossy[:n-1])
	for i, j := range pairs {
		if j != -1 {
			t.Fatalf("pairs[%d] = %d, want none: the numbers differ", i, j)
		}
	}
}

// FuzzValues: Values doesn't panic on any three JSON values, modifies
// none of them, and where kept and lossy agree gives current.
func FuzzValues(f *testing.F) {
	f.Add(`{"s":[{"name":"a","p":1}]}`, `{"s":[{"name":"a","p":1,"q":2},{"name":"b"}]}`, `{"s":[{"name":"a","p":1}]}`)
	f.Add(`{"servers":[{"host":"a"},{"host":"a"}]}`, `{"servers":[{"host":"a","port":1}]}`, `{"servers":[{"host":"a"}]}`)
	f.Add(`[1,2,3]`, `[1,{"a":2},3]`, `[1,2]`)
	f.Add(`{"a":{"b":[[1],[2]]}}`, `{"a":{"b":[[1,9],[2]]}}`, `{"a":{"b":[[1],[2]]}}`)
	f.Fuzz(func(t *testing.T, current, kept, lossy string) {
		var c, k, l any
		if json.Unmarshal([]byte(current), &c) != nil || json.Unmarshal([]byte(kept), &k) != nil || json.Unmarshal([]byte(lossy), &l) != nil {
			return
		}
		before := func() string {
			b, _ := json.Marshal([]any{c, k, l})
			return string(b)
		}
		was := before()
		_ = Values(c, k, l, servers)
		if now := before(); now != was {
			t.Fatalf("an input modified: %s, was %s", now, was)
		}
		if got := Values(c, k, k, servers); !reflect.DeepEqual(got, c) {
			t.Fatalf("kept and lossy agree, and Values isn't current: %v, want %v", got, c)
		}
	})
}

// BenchmarkValues merges a list of n servers, one image changed at the
// old version, each pairing.
func BenchmarkValues(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, by := range []struct {
			name, id string
			lists    *Lists
		}{{"keys", "host", servers}, {"name", "name", nil}, {"place", "host", nil}} {
			cur, kept, lossy := make([]any, n), make([]any, n), make([]any, n)
			for i := range n {
				id := strconv.Itoa(i)
				cur[i] = map[string]any{by.id: id, "image": "memcached:1"}
				kept[i] = map[string]any{by.id: id, "image": "memcached:1", "port": float64(i)}
				lossy[i] = map[string]any{by.id: id, "image": "memcached:1"}
			}
			cur[n/2] = map[string]any{by.id: strconv.Itoa(n / 2), "image": "memcached:2"}
			c := map[string]any{"servers": cur}
			k := map[string]any{"servers": kept}
			l := map[string]any{"servers": lossy}
			b.Run(fmt.Sprintf("%d servers by %s", n, by.name), func(b *testing.B) {
				for b.Loop() {
					Values(c, k, l, by.lists)
				}
			})
		}
	}
}
