package shard

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
)

// shardCounts are the shard counts the range tests try: every small one,
// and big ones that divide 2^64 or don't.
var shardCounts = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 100, 255, 256}

// boundaryHashes are the hashes where a mistake of rounding shows: each
// range's first, the one before it, its last, and the ends of the hashes.
func boundaryHashes(n int) []uint64 {
	hs := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
	for i := range n {
		r := NewRange(i, n)
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
				r := NewRange(i, n)
				if r.Index != i || r.Count != n {
					t.Errorf("NewRange(%d, %d) is %s", i, n, r)
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
					if next := NewRange(i+1, n); r.to != next.from {
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
				got := Of(h, n)
				var in []int
				for i := range n {
					if NewRange(i, n).Contains(h) {
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
		if got, want := fmt.Sprintf("%016x", Hash(v)), sharding.HashField(v); got != want {
			t.Errorf("Hash(%q) is %s, HashField says %s", v, got, want)
		}
	}
}

// shardSelectorText reads a selector of Range.Selector as
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
	for _, by := range []string{"uid", "namespace"} {
		for _, n := range shardCounts {
			t.Run(fmt.Sprintf("%s/%d", by, n), func(t *testing.T) {
				for i := range n {
					r := NewRange(i, n)
					req := shardRequirement(t, r.Selector(by))
					if req.Key != "object.metadata."+by {
						t.Errorf("shard %s selects by %s, want by %s", r, req.Key, by)
					}
					sel := sharding.NewSelector(req)
					if sel.String() != r.Selector(by) {
						t.Errorf("shard %s: apimachinery writes the selector %q, the shard %q", r, sel.String(), r.Selector(by))
					}
					// Selector.Matches compares the hashes' text so: the
					// boundaries, where Matches needs an object whose field
					// hashes there.
					for _, h := range boundaryHashes(n) {
						hash := fmt.Sprintf("0x%016x", h)
						if got := !sharding.HexLess(hash, req.Start) && sharding.HexLess(hash, req.End); got != r.Contains(h) {
							t.Errorf("hash %s: the selector of shard %s matches: %t, the range contains: %t", hash, r, got, r.Contains(h))
						}
					}
					for range 50 {
						v := testUID(rng)
						obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: types.UID(v), Namespace: v}}
						got, err := sel.Matches(obj)
						if err != nil {
							t.Fatal(err)
						}
						if got != r.Contains(Hash(v)) {
							t.Errorf("%s %s (hash %016x): the selector of shard %s matches: %t, the range contains: %t", by, v, Hash(v), r, got, !got)
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
		by   string
		want string
	}{
		{0, 1, "uid", "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
		{0, 2, "uid", "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"},
		{1, 2, "uid", "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"},
		{0, 2, "namespace", "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"},
		{1, 2, "namespace", "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"},
		{1, 3, "uid", "shardRange(object.metadata.uid, '0x5555555555555556', '0xaaaaaaaaaaaaaaab')"},
		{3, 4, "uid", "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"},
		{1, 256, "uid", "shardRange(object.metadata.uid, '0x0100000000000000', '0x0200000000000000')"},
	} {
		if got := NewRange(tc.i, tc.n).Selector(tc.by); got != tc.want {
			t.Errorf("shard %d/%d by %s: selector %q, want %q", tc.i, tc.n, tc.by, got, tc.want)
		}
	}
}

// A shard's Lease name reads back as its index, count and key, under the
// controller's name only; the default key's names name no key, as before
// the key was written into them.
func TestShardLeaseNamesReadBack(t *testing.T) {
	for _, name := range []string{"memcached", "a", "memcached-1", "x-0-of-2", "of", "by", "m-by-x"} {
		for _, key := range []string{"uid", "namespace"} {
			for _, n := range []int{1, 2, 3, 7, 9, 10, 256} {
				for i := range n {
					lease := LeaseName(name, key, i, n)
					gi, gn, gk, ok := ParseLease(name, lease)
					if !ok || gi != i || gn != n || gk != key {
						t.Errorf("ParseLease(%q, %q) = %d, %d, %q, %t; want %d, %d, %q, true", name, lease, gi, gn, gk, ok, i, n, key)
					}
				}
			}
		}
	}
	if got := LeaseName("memcached", "uid", 2, 4); got != "memcached-2-of-4" {
		t.Errorf("shard 2/4's Lease by uid is %q, want memcached-2-of-4", got)
	}
	if got := LeaseName("memcached", "namespace", 2, 4); got != "memcached-2-of-4-by-namespace" {
		t.Errorf("shard 2/4's Lease by namespace is %q, want memcached-2-of-4-by-namespace", got)
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
		{"memcached", "memcached-0-of-2-by-uid"}, // the default key is never named
		{"memcached", "memcached-0-of-2-by-"},
		{"memcached", "memcached-0-of-2-by-Namespace"},
		{"memcached", "memcached-0-of-2-by-name-space"},
		{"memcached", "memcached-0-of-2-by-namespace-by-uid"},
		{"memcached", "memcached-by-namespace-0-of-2"},
		{"memcached", "memcached-by-namespace"},
	} {
		if i, n, key, ok := ParseLease(tc.name, tc.lease); ok {
			t.Errorf("ParseLease(%q, %q) = %d, %d, %q, true; want false", tc.name, tc.lease, i, n, key)
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
		a, b := NewRange(tc.a[0], tc.a[1]), NewRange(tc.b[0], tc.b[1])
		if got := Overlaps(a, b); got != tc.want {
			t.Errorf("Overlaps(%s, %s) = %t, want %t", a, b, got, tc.want)
		}
		if got := Overlaps(b, a); got != tc.want {
			t.Errorf("Overlaps(%s, %s) = %t, want %t", b, a, got, tc.want)
		}
	}
	// Two ranges share a hash exactly when both contain the later start.
	counts := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 255, 256}
	for _, n := range counts {
		for _, m := range counts {
			for i := range n {
				for j := range m {
					a, b := NewRange(i, n), NewRange(j, m)
					start := max(a.from, b.from)
					if want := a.Contains(start) && b.Contains(start); Overlaps(a, b) != want {
						t.Fatalf("Overlaps(%s, %s) = %t, want %t", a, b, !want, want)
					}
				}
			}
		}
	}
}
