// Package shard is the arithmetic of a sharded controller: how its objects
// are divided into ranges of their hash, how those ranges are named, which
// Leases of other shard counts cover them, which shards a replica takes,
// and the list and watch that keep one range's objects. It knows nothing of
// the controller: the field hashed, the Leases read and the objects listed
// are handed in. It promises:
//
//   - The i-th of n ranges is the hashes h with floor(h*n / 2^64) == i: the
//     ranges tile the 64-bit hashes, none of them empty, and Of puts each
//     hash in exactly one. Hash is the API server's hash of a field
//     (64-bit FNV-1a), and Range.Selector its shard selector of a range:
//     the API server sends a range's replica that range's objects.
//   - A shard's Lease is named name-i-of-n, or name-i-of-n-by-key when it
//     divides by another field than DefaultKey (uid), and ParseLease reads
//     back only such names of the controller named name: replicas that
//     divide the objects differently, by count or by field, never hold one
//     Lease for different objects.
//   - Foreign.Blocked says which shards a held Lease of another shard count
//     covers some of, a held Lease of another field every shard, each
//     Lease's expiry counted by this replica's clock from when it first
//     saw that version.
//   - Plan never takes a shard that is held, blocked or this replica's, and
//     takes up to ceil(shards / members), one only while this replica holds
//     none; it asks the busiest member for one only below floor(shards /
//     members), with none free and none asked for already.
//   - A ListWatch keeps its range's objects only, whatever the API server
//     sends, and a watch's object that leaves the range comes as its
//     deletion; a stopped watch leaves no goroutine behind.
package shard

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"strconv"
	"strings"
)

// Range is the i-th of n ranges of the 64-bit FNV-1a hashes that the API
// server's shard selectors divide objects by: from from, inclusive, to to,
// exclusive, where the last range ends at 2^64.
type Range struct {
	Index, Count int
	from, to     uint64
	last         bool // to is 2^64
}

// NewRange returns the i-th of n equal ranges: the hashes h with
// floor(h*n / 2^64) == i, so Of puts each hash in exactly one.
func NewRange(i, n int) Range {
	r := Range{Index: i, Count: n, from: rangeStart(i, n)}
	if i == n-1 {
		r.last = true
	} else {
		r.to = rangeStart(i+1, n)
	}
	return r
}

// rangeStart is the first hash of the i-th of n ranges: ceil(i * 2^64 / n).
func rangeStart(i, n int) uint64 {
	q, rem := bits.Div64(uint64(i), 0, uint64(n))
	if rem != 0 {
		q++
	}
	return q
}

// Of is the shard of n that hash h falls in.
func Of(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// Hash is the 64-bit FNV-1a hash of s: the API server's hash of a field.
func Hash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// Contains reports whether h is in the range.
func (r Range) Contains(h uint64) bool {
	return h >= r.from && (r.last || h < r.to)
}

// Selector is the API server's shard selector of the range, on the
// object's metadata field named field: uid or namespace.
func (r Range) Selector(field string) string {
	to := fmt.Sprintf("0x%016x", r.to)
	if r.last {
		to = "0x10000000000000000"
	}
	return fmt.Sprintf("shardRange(object.metadata.%s, '0x%016x', '%s')", field, r.from, to)
}

// String names the shard in log records, telemetry and errors: 2/4 is the
// third of four.
func (r Range) String() string { return strconv.Itoa(r.Index) + "/" + strconv.Itoa(r.Count) }

// DefaultKey is the field a shard's Lease whose name names none divides
// the objects by: uid, the default, whose Leases are named as they were
// before the field was written into the name, so replicas that divide by
// uid share their Leases with replicas of the code before. A replica of
// that code that divided by namespace named its Leases so too: it is read
// as one dividing by uid.
const DefaultKey = "uid"

// LeaseName is the name of the Lease of the i-th of n shards, by the
// field key, of the controller name: name-i-of-n for DefaultKey,
// name-i-of-n-by-key for any other. The count and the key are in the
// name, so replicas that divide the objects differently, during a rollout
// that changes the shard count or the field, never hold the same Lease
// for different objects.
func LeaseName(name, key string, i, n int) string {
	lease := name + "-" + strconv.Itoa(i) + "-of-" + strconv.Itoa(n)
	if key != DefaultKey {
		lease += "-by-" + key
	}
	return lease
}

// ParseLease reads a Lease's name as the controller name's shard Lease:
// its index, count and key, DefaultKey when the name names none.
func ParseLease(name, lease string) (i, n int, key string, ok bool) {
	rest, found := strings.CutPrefix(lease, name+"-")
	if !found {
		return 0, 0, "", false
	}
	key = DefaultKey
	if r, k, found := strings.Cut(rest, "-by-"); found {
		rest, key = r, k
	}
	is, ns, found := strings.Cut(rest, "-of-")
	if !found || !isKey(key) {
		return 0, 0, "", false
	}
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n || LeaseName(name, key, i, n) != lease {
		return 0, 0, "", false
	}
	return i, n, key, true
}

// isKey reports whether k can name a field in a Lease's name: one or more
// lowercase letters.
func isKey(k string) bool {
	return k != "" && strings.Trim(k, "abcdefghijklmnopqrstuvwxyz") == ""
}

// Overlaps reports whether two ranges share a hash.
func Overlaps(a, b Range) bool { return a.before(b) && b.before(a) }

// before reports whether r starts before o ends.
func (r Range) before(o Range) bool { return o.last || r.from < o.to }
