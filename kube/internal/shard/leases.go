package shard

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// Foreign are the Leases of a controller's other shard counts and fields,
// as one replica sees them: each version from when it first saw it, by its
// own clock, as an elector sees its own Lease.
type Foreign struct {
	name     string        // the controller's
	key      string        // the field this replica divides by
	duration time.Duration // a Lease's, when it doesn't say
	seen     map[string]seenLease
}

// seenLease is when this replica first saw a Lease's version.
type seenLease struct {
	version string
	at      time.Time
}

// NewForeign returns the Leases of the controller name's shard counts
// other than a replica's, and of fields other than key, the replica's,
// none seen yet; a Lease that doesn't say how long it runs runs for
// duration.
func NewForeign(name, key string, duration time.Duration) *Foreign {
	return &Foreign{name: name, key: key, duration: duration, seen: map[string]seenLease{}}
}

// Blocked says which of n shards a held Lease among leases, of a shard
// count other than n, covers some of: the unsharded controller's one
// Lease, named after the controller, covers all, and so does a shard's
// Lease of another field, whose objects are spread over every shard of
// this replica's field.
func (f *Foreign) Blocked(leases []coordinationv1.Lease, n int) map[int]bool {
	blocked := map[int]bool{}
	now := time.Now()
	seen := map[string]bool{}
	for _, l := range leases {
		j, k, key, ok := ParseLease(f.name, l.Name)
		if l.Name == f.name {
			j, k, key, ok = 0, 1, f.key, true
		}
		if !ok || (k == n && key == f.key) {
			continue
		}
		seen[l.Name] = true
		if s, ok := f.seen[l.Name]; !ok || s.version != l.ResourceVersion {
			f.seen[l.Name] = seenLease{version: l.ResourceVersion, at: now}
		}
		if !heldAt(&l, f.seen[l.Name].at, now, f.duration) {
			continue
		}
		theirs := NewRange(j, k)
		for i := range n {
			if key != f.key || Overlaps(NewRange(i, n), theirs) {
				blocked[i] = true
			}
		}
	}
	for name := range f.seen {
		if !seen[name] {
			delete(f.seen, name)
		}
	}
	return blocked
}

// heldAt reports whether a Lease first seen as it is at seen is held at
// now: it names a holder, and hasn't gone unrenewed for its duration.
func heldAt(l *coordinationv1.Lease, seen, now time.Time, fallback time.Duration) bool {
	if ptr.Deref(l.Spec.HolderIdentity, "") == "" {
		return false
	}
	d := fallback
	if s := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); s > 0 {
		d = time.Duration(s) * time.Second
	}
	return now.Before(seen.Add(d))
}
