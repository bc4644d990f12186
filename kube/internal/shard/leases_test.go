package shard

import (
	"maps"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lease is a Lease named name, at version rv, held by holder ("" for
// none) for seconds (0: it doesn't say).
func lease(name, rv, holder string, seconds int32) coordinationv1.Lease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	if seconds > 0 {
		l.Spec.LeaseDurationSeconds = &seconds
	}
	return l
}

// A held Lease of another shard count blocks the shards it shares hashes
// with, the unsharded controller's one Lease and a Lease of another key
// every shard; a Lease of the same count and key, one held by no one, and
// another controller's block none.
func TestForeignLeasesBlockTheShardsTheyCover(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leases []coordinationv1.Lease
		want   map[int]bool
	}{
		{"a shard of two covers two of four",
			[]coordinationv1.Lease{lease("m-1-of-2", "1", "a", 15)}, map[int]bool{2: true, 3: true}},
		{"the one Lease covers all",
			[]coordinationv1.Lease{lease("m", "1", "a", 15)}, map[int]bool{0: true, 1: true, 2: true, 3: true}},
		{"a shard of three covers the two of four it overlaps",
			[]coordinationv1.Lease{lease("m-0-of-3", "1", "a", 15)}, map[int]bool{0: true, 1: true}},
		{"a Lease of the same count is its own shard's",
			[]coordinationv1.Lease{lease("m-1-of-4", "1", "a", 15)}, map[int]bool{}},
		{"a released Lease covers nothing",
			[]coordinationv1.Lease{lease("m-1-of-2", "1", "", 1)}, map[int]bool{}},
		{"a held Lease of another key covers all",
			[]coordinationv1.Lease{lease("m-1-of-4-by-namespace", "1", "a", 15)}, map[int]bool{0: true, 1: true, 2: true, 3: true}},
		{"a held Lease of another key and count covers all",
			[]coordinationv1.Lease{lease("m-0-of-2-by-namespace", "1", "a", 15)}, map[int]bool{0: true, 1: true, 2: true, 3: true}},
		{"a released Lease of another key covers nothing",
			[]coordinationv1.Lease{lease("m-1-of-4-by-namespace", "1", "", 1)}, map[int]bool{}},
		{"another controller's Lease covers nothing",
			[]coordinationv1.Lease{lease("mm-1-of-2", "1", "a", 15), lease("other", "1", "a", 15)}, map[int]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewForeign("m", "uid", 15*time.Second).Blocked(tc.leases, 4); !maps.Equal(got, tc.want) {
				t.Errorf("blocked = %v, want %v", got, tc.want)
			}
		})
	}
}

// A foreign Lease blocks for its duration from when this replica first saw
// its version, or for the fallback when it doesn't say: a new version
// starts its duration again, the same version doesn't.
func TestAForeignLeaseBlocksForItsDurationFromItsVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := NewForeign("m", "uid", 10*time.Second)
		blocked := func(l coordinationv1.Lease) bool { return f.Blocked([]coordinationv1.Lease{l}, 2)[0] }
		if !blocked(lease("m", "1", "a", 15)) {
			t.Fatal("a held Lease blocks nothing")
		}
		time.Sleep(14 * time.Second)
		if !blocked(lease("m", "1", "a", 15)) {
			t.Error("the Lease stopped blocking before its 15s")
		}
		time.Sleep(time.Second)
		if blocked(lease("m", "1", "a", 15)) {
			t.Error("the Lease, unrenewed for its 15s, still blocks")
		}
		if !blocked(lease("m", "2", "a", 15)) {
			t.Error("a renewal, a new version, doesn't block again")
		}
		time.Sleep(10 * time.Second)
		if !blocked(lease("m", "3", "a", 0)) {
			t.Error("a new version that doesn't say its duration doesn't block")
		}
		time.Sleep(10 * time.Second)
		if blocked(lease("m", "3", "a", 0)) {
			t.Error("a Lease that doesn't say its duration blocks past the fallback's 10s")
		}
	})
}

// A replica dividing by namespace counts a held Lease named without a key,
// by uid (a replica of the code before the key was named, whatever it
// divided by), as another key's: it blocks every shard. Its own key's
// Lease of its count blocks none.
func TestAKeylessLeaseBlocksAReplicaOfAnotherKey(t *testing.T) {
	f := NewForeign("m", "namespace", 15*time.Second)
	if got, want := f.Blocked([]coordinationv1.Lease{lease("m-1-of-4", "1", "a", 15)}, 4), (map[int]bool{0: true, 1: true, 2: true, 3: true}); !maps.Equal(got, want) {
		t.Errorf("blocked by m-1-of-4 = %v, want %v", got, want)
	}
	if got := f.Blocked([]coordinationv1.Lease{lease("m-1-of-4-by-namespace", "1", "a", 15)}, 4); len(got) != 0 {
		t.Errorf("blocked by its own key's Lease = %v, want none", got)
	}
}
