package kube

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// shardCounts are the shard counts the range tests try: every small one,
// and big ones that divide 2^64 or don't.
var shardCounts = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 100, 255, 256}

// boundaryHashes are the hashes where a mistake of rounding shows: each
// range's first, the one before it, its last, and the ends of the hashes.
func boundaryHashes(n int) []uint64 {
	hs := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
	for i := range n {
		r := newShardRange(i, n)
		hs = append(hs, r.from, r.from-1, r.from+1)
		if !r.last {
			hs = append(hs, r.to-1, r.to)
		}
	}
	return hs
}

// testUID is a UID as the API server makes them, from rng.
func testUID(rng *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
}

// Each range starts at ceil(i * 2^64 / n), ends where the next starts, and
// the last ends at 2^64: the ranges tile the hashes, none of them empty.
func TestShardRangesTileTheHashes(t *testing.T) {
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	for _, n := range shardCounts {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			for i := range n {
				r := newShardRange(i, n)
				if r.index != i || r.count != n {
					t.Errorf("newShardRange(%d, %d) is %s", i, n, r)
				}
				// ceil(i * 2^64 / n), in big numbers.
				want := new(big.Int).Mul(big.NewInt(int64(i)), two64)
				want.Add(want, big.NewInt(int64(n-1)))
				want.Div(want, big.NewInt(int64(n)))
				if r.from != want.Uint64() {
					t.Errorf("shard %s starts at %#x, want %#x", r, r.from, want)
				}
				if i == 0 && r.from != 0 {
					t.Errorf("the first shard starts at %#x, want 0", r.from)
				}
				if r.last != (i == n-1) {
					t.Errorf("shard %s: last is %t", r, r.last)
				}
				if !r.last {
					if next := newShardRange(i+1, n); r.to != next.from {
						t.Errorf("shard %s ends at %#x, shard %s starts at %#x", r, r.to, next, next.from)
					}
					if r.to <= r.from {
						t.Errorf("shard %s is empty: from %#x to %#x", r, r.from, r.to)
					}
				}
			}
		})
	}
}

// shardOf puts a hash in the one range that contains it, at every boundary
// of the ranges and anywhere else.
func TestShardOfIsTheRangeThatContainsTheHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range shardCounts {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			hs := boundaryHashes(n)
			for range 1000 {
				hs = append(hs, rng.Uint64())
			}
			for _, h := range hs {
				got := shardOf(h, n)
				var in []int
				for i := range n {
					if newShardRange(i, n).contains(h) {
						in = append(in, i)
					}
				}
				if len(in) != 1 || in[0] != got {
					t.Errorf("hash %#x: shardOf says %d of %d, the ranges that contain it are %v", h, got, n, in)
				}
			}
		})
	}
}

// hashOf is the API server's hash of a field: apimachinery's HashField,
// as a number.
func TestShardHashesAreTheAPIServersHashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	values := []string{"", "a", "default", "kube-system", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"}
	for range 1000 {
		values = append(values, testUID(rng))
	}
	for _, v := range values {
		if got, want := fmt.Sprintf("%016x", hashOf(v)), sharding.HashField(v); got != want {
			t.Errorf("hashOf(%q) is %s, HashField says %s", v, got, want)
		}
	}
}

// shardSelectorText reads a selector of shardRange.selector as
// apimachinery's requirement.
var shardSelectorText = regexp.MustCompile(`^shardRange\((object\.metadata\.(?:uid|namespace)), '(0x[0-9a-f]+)', '(0x[0-9a-f]+)'\)$`)

func shardRequirement(t *testing.T, selector string) sharding.ShardRangeRequirement {
	t.Helper()
	m := shardSelectorText.FindStringSubmatch(selector)
	if m == nil {
		t.Fatalf("selector %q isn't shardRange(field, 'start', 'end')", selector)
	}
	return sharding.ShardRangeRequirement{Key: m[1], Start: m[2], End: m[3]}
}

// The selector of a range is apimachinery's selector of its requirement,
// and matches an object exactly when the range contains its field's hash:
// the API server sends a shard's replica that shard's objects.
func TestShardSelectorsSelectWhatTheRangesContain(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, by := range []ShardKey{ShardByUID, ShardByNamespace} {
		for _, n := range shardCounts {
			t.Run(fmt.Sprintf("%s/%d", by, n), func(t *testing.T) {
				for i := range n {
					r := newShardRange(i, n)
					req := shardRequirement(t, r.selector(by))
					if req.Key != "object.metadata."+string(by) {
						t.Errorf("shard %s selects by %s, want by %s", r, req.Key, by)
					}
					sel := sharding.NewSelector(req)
					if sel.String() != r.selector(by) {
						t.Errorf("shard %s: apimachinery writes the selector %q, the shard %q", r, sel.String(), r.selector(by))
					}
					// Selector.Matches compares the hashes' text so: the
					// boundaries, where Matches needs an object whose field
					// hashes there.
					for _, h := range boundaryHashes(n) {
						hash := fmt.Sprintf("0x%016x", h)
						if got := !sharding.HexLess(hash, req.Start) && sharding.HexLess(hash, req.End); got != r.contains(h) {
							t.Errorf("hash %s: the selector of shard %s matches: %t, the range contains: %t", hash, r, got, r.contains(h))
						}
					}
					for range 50 {
						v := testUID(rng)
						obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: types.UID(v), Namespace: v}}
						got, err := sel.Matches(obj)
						if err != nil {
							t.Fatal(err)
						}
						if got != r.contains(hashOf(v)) {
							t.Errorf("%s %s (hash %016x): the selector of shard %s matches: %t, the range contains: %t", by, v, hashOf(v), r, got, !got)
						}
					}
				}
			})
		}
	}
}

// The selectors' text is the API server's, the last range ending at 2^64.
func TestShardSelectorsAreTheAPIServersText(t *testing.T) {
	for _, tc := range []struct {
		i, n int
		by   ShardKey
		want string
	}{
		{0, 1, ShardByUID, "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
		{0, 2, ShardByUID, "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"},
		{1, 2, ShardByUID, "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"},
		{0, 2, ShardByNamespace, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"},
		{1, 2, ShardByNamespace, "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"},
		{1, 3, ShardByUID, "shardRange(object.metadata.uid, '0x5555555555555556', '0xaaaaaaaaaaaaaaab')"},
		{3, 4, ShardByUID, "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"},
		{1, 256, ShardByUID, "shardRange(object.metadata.uid, '0x0100000000000000', '0x0200000000000000')"},
	} {
		if got := newShardRange(tc.i, tc.n).selector(tc.by); got != tc.want {
			t.Errorf("shard %d/%d by %s: selector %q, want %q", tc.i, tc.n, tc.by, got, tc.want)
		}
	}
}

// A shard's Lease name reads back as its index and count, under the
// controller's name only.
func TestShardLeaseNamesReadBack(t *testing.T) {
	for _, name := range []string{"memcached", "a", "memcached-1", "x-0-of-2", "of"} {
		for _, n := range []int{1, 2, 3, 7, 9, 10, 256} {
			for i := range n {
				lease := shardLeaseName(name, i, n)
				gi, gn, ok := parseShardLease(name, lease)
				if !ok || gi != i || gn != n {
					t.Errorf("parseShardLease(%q, %q) = %d, %d, %t; want %d, %d, true", name, lease, gi, gn, ok, i, n)
				}
			}
		}
	}
	if got := shardLeaseName("memcached", 2, 4); got != "memcached-2-of-4" {
		t.Errorf("shard 2/4's Lease is %q, want memcached-2-of-4", got)
	}
}

// A Lease that isn't one of the controller's shards, another controller's
// whose name starts the same among them, isn't read as one.
func TestParseShardLeaseRefusesOtherNames(t *testing.T) {
	for _, tc := range []struct{ name, lease string }{
		{"memcached", "other-0-of-2"},
		{"memcached", "memcached"},
		{"memcached", "memcached-"},
		{"memcached", "memcached-x-of-2"},
		{"memcached", "memcached-0-of-x"},
		{"memcached", "memcached-2-of-2"},
		{"memcached", "memcached-01-of-2"},
		{"memcached", "memcached-1-of-02"},
		{"memcached", "memcached-+1-of-2"},
		{"memcached", "memcached--1-of-2"},
		{"memcached", "memcached-0-of-0"},
		{"memcached", "memcached-0-of--1"},
		{"memcached", "memcached-0-of-"},
		{"memcached", "memcached--of-2"},
		{"memcached", "memcached-0of2"},
		{"memcached", "memcached-0-of-2-extra"},
		{"memcached", "memcachedx-0-of-2"},
		{"memcached", "memcached-cache-0-of-2"}, // controller memcached-cache's
		{"memcached", "memcached-1-0-of-2"},     // controller memcached-1's
		{"memcached", "memcached-of-0-of-2"},    // controller memcached-of's
		{"memcached-cache", "memcached-0-of-2"},
	} {
		if i, n, ok := parseShardLease(tc.name, tc.lease); ok {
			t.Errorf("parseShardLease(%q, %q) = %d, %d, true; want false", tc.name, tc.lease, i, n)
		}
	}
}

// Shards of different counts overlap when they share a hash, either way
// round; the one shard of a count of 1 overlaps every shard.
func TestShardsOfDifferentCountsOverlapWhereTheyShareHashes(t *testing.T) {
	for _, tc := range []struct {
		a, b [2]int
		want bool
	}{
		{[2]int{1, 2}, [2]int{1, 4}, false},
		{[2]int{1, 2}, [2]int{2, 4}, true},
		{[2]int{1, 2}, [2]int{3, 4}, true},
		{[2]int{0, 2}, [2]int{1, 4}, true},
		{[2]int{0, 2}, [2]int{2, 4}, false},
		{[2]int{0, 1}, [2]int{0, 2}, true},
		{[2]int{0, 1}, [2]int{1, 2}, true},
		{[2]int{0, 1}, [2]int{6, 7}, true},
		{[2]int{0, 1}, [2]int{255, 256}, true},
		{[2]int{0, 3}, [2]int{1, 2}, false},
		{[2]int{1, 3}, [2]int{1, 2}, true},
		{[2]int{0, 3}, [2]int{1, 3}, false},
		{[2]int{2, 3}, [2]int{2, 3}, true},
		{[2]int{127, 256}, [2]int{0, 2}, true},
		{[2]int{128, 256}, [2]int{0, 2}, false},
	} {
		a, b := newShardRange(tc.a[0], tc.a[1]), newShardRange(tc.b[0], tc.b[1])
		if got := overlaps(a, b); got != tc.want {
			t.Errorf("overlaps(%s, %s) = %t, want %t", a, b, got, tc.want)
		}
		if got := overlaps(b, a); got != tc.want {
			t.Errorf("overlaps(%s, %s) = %t, want %t", b, a, got, tc.want)
		}
	}
	// Two ranges share a hash exactly when both contain the later start.
	counts := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 255, 256}
	for _, n := range counts {
		for _, m := range counts {
			for i := range n {
				for j := range m {
					a, b := newShardRange(i, n), newShardRange(j, m)
					start := max(a.from, b.from)
					if want := a.contains(start) && b.contains(start); overlaps(a, b) != want {
						t.Fatalf("overlaps(%s, %s) = %t, want %t", a, b, !want, want)
					}
				}
			}
		}
	}
}

// planned is plan's answer read as the shards this replica takes, in
// order, every free shard it may try, and the shard whose holder it asks.
func planned(self string, shards []shardState, now time.Time, wantedFor time.Duration) (take, tried []int, ask int) {
	more, tried, ask := plan(self, shards, now, wantedFor)
	if more > len(tried) {
		panic(fmt.Sprintf("plan says to take %d more of %v", more, tried))
	}
	return tried[:more], tried, ask
}

// A replica holding no shard takes one, and the rest of its share at its
// next look, once it has seen the others starting with it.
func TestPlanTakesOneShardFirst(t *testing.T) {
	free := shardState{}
	for range 20 {
		take, tried, ask := planned("a", []shardState{free, free, free, free}, time.Now(), time.Minute)
		if len(take) != 1 || len(tried) != 4 || ask != -1 {
			t.Fatalf("holding none of 4 free shards, it takes %v of %v and asks %d; want one taken, 4 to try, none asked", take, tried, ask)
		}
	}
}

// plan takes free shards up to this replica's share, ceil(shards/members),
// and asks the busiest member for one only when this replica holds fewer
// than floor(shards/members) and finds none free.
func TestPlanTakesAFairShare(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const wantedFor = 15 * time.Second
	free := shardState{free: now.Add(-time.Hour)}
	mine := shardState{running: true}
	heldBy := func(holder string) shardState { return shardState{holder: holder} }
	wanted := func(s shardState, by string, freedAgo time.Duration) shardState {
		s.wantedBy = by
		if s.holder == "" {
			s.free = now.Add(-freedAgo)
		}
		return s
	}
	blocked := func(s shardState) shardState { s.blocked = true; return s }
	for _, tc := range []struct {
		name   string
		shards []shardState
		take   []int // the shards taken, in any order
		first  int   // the shard taken first, or -1: any
		ask    int
	}{
		{"alone, holding one, it takes every other free shard",
			[]shardState{mine, free, free, free}, []int{1, 2, 3}, -1, -1},
		{"with another holding 2 of 4, and one of its own, it takes the one free",
			[]shardState{heldBy("b"), mine, heldBy("b"), free}, []int{3}, -1, -1},
		{"holding its share of the ceiling, it takes the one free",
			[]shardState{mine, heldBy("b"), free}, []int{2}, -1, -1},
		{"at its ceiling, it takes no more",
			[]shardState{mine, mine, free, heldBy("b")}, nil, -1, -1},
		{"with every shard held by another, it asks that one for one",
			[]shardState{heldBy("b"), heldBy("b"), heldBy("b")}, nil, -1, 0},
		{"it asks the one holding the most",
			[]shardState{heldBy("a"), heldBy("a"), heldBy("b"), heldBy("b"), heldBy("b")}, nil, -1, 2},
		{"it asks for a shard no other replica has asked for",
			[]shardState{wanted(heldBy("b"), "c", 0), heldBy("b"), heldBy("b")}, nil, -1, 1},
		{"having asked already, it doesn't ask again",
			[]shardState{wanted(heldBy("b"), "self", 0), heldBy("b"), heldBy("b")}, nil, -1, -1},
		{"a free shard another replica asked for is left to it for wantedFor",
			[]shardState{wanted(free, "c", wantedFor-time.Nanosecond), heldBy("b")}, nil, -1, -1},
		{"after wantedFor, it takes a free shard another replica asked for",
			[]shardState{wanted(free, "c", wantedFor), heldBy("b")}, []int{0}, -1, -1},
		{"a free shard it asked for it takes first",
			[]shardState{mine, free, wanted(free, "self", time.Second), heldBy("b")}, []int{2}, 2, -1},
		{"it takes the shard it asked for before the other free ones",
			[]shardState{mine, free, wanted(free, "self", time.Second), free}, []int{1, 2, 3}, 2, -1},
		{"it never takes a blocked shard",
			[]shardState{free, blocked(free), blocked(wanted(free, "self", time.Second)), free, mine}, []int{0, 3}, -1, -1},
		{"with every shard blocked, it takes none and asks no one",
			[]shardState{blocked(free), blocked(free)}, nil, -1, -1},
		{"holding 1 of 4 beside replicas holding 2 and 1, it has nothing to do",
			[]shardState{heldBy("a"), heldBy("a"), heldBy("b"), mine}, nil, -1, -1},
		{"with 2 shards among 3 replicas, the one holding none doesn't ask",
			[]shardState{heldBy("a"), heldBy("b")}, nil, -1, -1},
		{"holding fewer than the floor of its share, it asks the busiest",
			[]shardState{mine, heldBy("a"), heldBy("a"), heldBy("a")}, nil, -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// plan shuffles the free shards: every order must do.
			for range 20 {
				take, tried, ask := planned("self", tc.shards, now, wantedFor)
				if !equalInts(take, tc.take) {
					t.Fatalf("plan takes %v, want %v in any order", take, tc.take)
				}
				if tc.first >= 0 && take[0] != tc.first {
					t.Fatalf("plan takes %v, want %d first", take, tc.first)
				}
				for _, i := range tried {
					if s := tc.shards[i]; s.blocked || s.running || s.holder != "" {
						t.Fatalf("plan tries shard %d, %+v", i, s)
					}
				}
				if ask != tc.ask {
					t.Fatalf("plan asks for shard %d, want %d", ask, tc.ask)
				}
			}
		})
	}
}

// equalInts reports whether a and b hold the same ints, in any order.
func equalInts(a, b []int) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// shardKeys returns k of rng's UIDs whose hash r contains, and k whose
// hash it doesn't.
func shardKeys(rng *rand.Rand, r shardRange, k int) (in, out []string) {
	for len(in) < k || len(out) < k {
		uid := testUID(rng)
		if r.contains(hashOf(uid)) {
			if len(in) < k {
				in = append(in, uid)
			}
		} else if len(out) < k {
			out = append(out, uid)
		}
	}
	return in, out
}

// uidKey is a shard's key by UID, no object's when it has none.
func uidKey(o metav1.Object) (string, bool) { return string(o.GetUID()), o.GetUID() != "" }

// A shard's list keeps that shard's objects, of the dynamic client's lists
// and of the metadata client's, drops an object no shard's, calls foreign
// for each of another shard's, and asks the API server with the selector.
func TestAShardsListKeepsItsOwnObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	r := newShardRange(1, 3)
	in, out := shardKeys(rng, r, 3)
	order := []string{out[0], in[0], in[1], out[1], "", out[2], in[2]}

	unstructuredList := func() runtime.Object {
		l := &unstructured.UnstructuredList{}
		for i, uid := range order {
			u := unstructured.Unstructured{}
			u.SetAPIVersion("example.com/v1")
			u.SetKind("Memcached")
			u.SetName(fmt.Sprint("m", i))
			u.SetUID(types.UID(uid))
			l.Items = append(l.Items, u)
		}
		return l
	}
	metadataList := func() runtime.Object {
		l := &metav1.PartialObjectMetadataList{}
		for i, uid := range order {
			l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("m", i), UID: types.UID(uid)}})
		}
		return l
	}
	uids := func(list runtime.Object) []string {
		var got []string
		switch l := list.(type) {
		case *unstructured.UnstructuredList:
			for _, o := range l.Items {
				got = append(got, string(o.GetUID()))
			}
		case *metav1.PartialObjectMetadataList:
			for _, o := range l.Items {
				got = append(got, string(o.UID))
			}
		}
		return got
	}

	for _, tc := range []struct {
		name string
		list func() runtime.Object
	}{
		{"the dynamic client's", unstructuredList},
		{"the metadata client's", metadataList},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked metav1.ListOptions
			foreign := 0
			lw := &listWatch{
				list: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
					asked = o
					return tc.list(), nil
				},
				filter:   shardFilter{r: r, key: uidKey, foreign: func() { foreign++ }},
				selector: r.selector(ShardByUID),
			}
			got, err := lw.ListWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "42", LabelSelector: "app=memcached", ShardSelector: "something else"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(uids(got), in) {
				t.Errorf("the list keeps %v, want %v", uids(got), in)
			}
			if foreign != len(out) {
				t.Errorf("foreign called %d times, want %d: one for each of another shard's", foreign, len(out))
			}
			if asked.ShardSelector != r.selector(ShardByUID) || asked.ResourceVersion != "42" || asked.LabelSelector != "app=memcached" {
				t.Errorf("listed with %+v, want the shard's selector %q and the caller's options", asked, r.selector(ShardByUID))
			}
		})
	}

	t.Run("of the shard's objects only", func(t *testing.T) {
		foreign := 0
		lw := &listWatch{
			list: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				l := &metav1.PartialObjectMetadataList{}
				for _, uid := range in {
					l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}})
				}
				return l, nil
			},
			filter: shardFilter{r: r, key: uidKey, foreign: func() { foreign++ }},
		}
		got, err := lw.ListWithContext(t.Context(), metav1.ListOptions{ShardSelector: "something else"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(uids(got), in) || foreign != 0 {
			t.Errorf("the list keeps %v and calls foreign %d times, want %v and 0", uids(got), foreign, in)
		}
	})

	t.Run("of another type", func(t *testing.T) {
		lw := &listWatch{
			list:   func(context.Context, metav1.ListOptions) (runtime.Object, error) { return &metav1.Status{}, nil },
			filter: shardFilter{r: r, key: uidKey, foreign: func() {}},
		}
		if _, err := lw.ListWithContext(t.Context(), metav1.ListOptions{}); err == nil {
			t.Error("a list of a *metav1.Status: no error")
		}
	})
}

// A shard's watch passes bookmarks and errors and the shard's events,
// drops other shards', and turns the change of a cached object that leaves
// the shard, an owned object's change of owner, into its deletion.
func TestAShardsWatchKeepsItsOwnEvents(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	r := newShardRange(0, 2)
	ours, theirs := shardKeys(rng, r, 2)
	owned := func(name, owner string) *metav1.PartialObjectMetadata {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
		if owner != "" {
			o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Memcached", Name: "m", UID: types.UID(owner), Controller: ptr.To(true)}}
		}
		return o
	}
	ownerKey := func(o metav1.Object) (string, bool) {
		ref := metav1.GetControllerOfNoCopy(o)
		if ref == nil {
			return "", false
		}
		return string(ref.UID), true
	}
	// The cache holds moved and released, owned by this shard's owners.
	cached := map[string]*metav1.PartialObjectMetadata{
		"moved":    owned("moved", ours[0]),
		"released": owned("released", ours[1]),
	}
	known := func(obj any) (any, bool) {
		o, ok := cached[obj.(metav1.Object).GetName()]
		return o, ok
	}

	fake := watch.NewFakeWithChanSize(16, false)
	var asked metav1.ListOptions
	foreign := 0
	lw := &listWatch{
		watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			asked = o
			return fake, nil
		},
		filter: shardFilter{r: r, key: ownerKey, foreign: func() { foreign++ }},
		known:  known,
	}
	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "7", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if asked.ShardSelector != "" || asked.ResourceVersion != "7" || !asked.AllowWatchBookmarks {
		t.Errorf("watched with %+v, want no shard selector and the caller's options", asked)
	}

	bookmark := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "8"}}
	status := &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired}
	for _, e := range []watch.Event{
		{Type: watch.Bookmark, Object: bookmark},
		{Type: watch.Added, Object: owned("ours", ours[0])},
		{Type: watch.Added, Object: owned("theirs", theirs[0])},
		{Type: watch.Added, Object: owned("nobodys", "")},
		{Type: watch.Modified, Object: owned("ours", ours[1])},
		{Type: watch.Modified, Object: owned("theirs", theirs[1])},
		{Type: watch.Modified, Object: owned("moved", theirs[0])},
		{Type: watch.Modified, Object: owned("released", "")},
		{Type: watch.Deleted, Object: owned("theirs", theirs[1])},
		{Type: watch.Deleted, Object: owned("ours", ours[1])},
		{Type: watch.Error, Object: status},
	} {
		fake.Action(e.Type, e.Object)
	}
	fake.Stop()

	type event struct {
		typ  watch.EventType
		name string
		obj  runtime.Object
	}
	var got []event
	timeout := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				done = true
				break
			}
			name := ""
			if m, ok := e.Object.(metav1.Object); ok {
				name = m.GetName()
			}
			got = append(got, event{e.Type, name, e.Object})
		case <-timeout:
			t.Fatalf("the watch hasn't ended: %v so far", got)
		}
	}
	want := []event{
		{watch.Bookmark, "", bookmark},
		{watch.Added, "ours", nil},
		{watch.Modified, "ours", nil},
		{watch.Deleted, "moved", cached["moved"]},
		{watch.Deleted, "released", cached["released"]},
		{watch.Deleted, "ours", nil},
		{watch.Error, "", status},
	}
	if len(got) != len(want) {
		t.Fatalf("the watch sends %v, want %v", got, want)
	}
	for i := range want {
		if got[i].typ != want[i].typ || got[i].name != want[i].name || (want[i].obj != nil && got[i].obj != want[i].obj) {
			t.Errorf("event %d is %s %q (%p), want %s %q (%p)", i, got[i].typ, got[i].name, got[i].obj, want[i].typ, want[i].name, want[i].obj)
		}
	}
	// The ADDED, MODIFIED and DELETED of other shards' owners', and moved's
	// change to one.
	if foreign != 4 {
		t.Errorf("foreign called %d times, want 4", foreign)
	}
}

// A watch without known, the controller's own resource's, drops a change
// that leaves the shard; with a selector, it watches with it.
func TestAShardsWatchWithoutTheCacheDropsWhatLeaves(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	r := newShardRange(2, 4)
	ours, theirs := shardKeys(rng, r, 1)
	fake := watch.NewFakeWithChanSize(4, false)
	var asked metav1.ListOptions
	lw := &listWatch{
		watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			asked = o
			return fake, nil
		},
		filter:   shardFilter{r: r, key: uidKey, foreign: func() {}},
		selector: r.selector(ShardByUID),
	}
	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if asked.ShardSelector != r.selector(ShardByUID) {
		t.Errorf("watched with the shard selector %q, want %q", asked.ShardSelector, r.selector(ShardByUID))
	}
	fake.Modify(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "theirs", UID: types.UID(theirs[0])}})
	fake.Modify(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "ours", UID: types.UID(ours[0])}})
	fake.Stop()
	var got []string
	for e := range w.ResultChan() {
		got = append(got, string(e.Type)+" "+e.Object.(metav1.Object).GetName())
	}
	if want := []string{"MODIFIED ours"}; !slices.Equal(got, want) {
		t.Errorf("the watch sends %v, want %v", got, want)
	}
}

// A shard's watch that is stopped while an event it kept waits to be
// read leaves no goroutine behind: the reflector stops a watch it no
// longer reads. (apimachinery's watch.Filter leaves one, blocked on the
// send, for every such watch; synctest fails the test on it.)
func TestAStoppedShardWatchLeavesNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		upstream := watch.NewFake()
		w := filterWatch(upstream, func(e watch.Event) (watch.Event, bool) { return e, true })
		go upstream.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "kept, never read"}})
		synctest.Wait()
		w.Stop()
		synctest.Wait()
		if _, open := <-w.ResultChan(); open {
			t.Error("the stopped watch's channel is open, want it closed")
		}
	})
}
