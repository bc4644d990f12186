package cache

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Digest is a managedFields entry's: its key, whose entry it is,
// and its sum, of what the entry says.
type Digest struct{ key, sum uint64 }

// ManagedKey names a managedFields entry: its manager, operation and
// subresource, which the API server keeps one entry for.
func ManagedKey(manager string, op metav1.ManagedFieldsOperationType, subresource string) uint64 {
	h := fnv.New64a()
	for _, s := range []string{manager, string(op), subresource} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

// managedSum sums what a managedFields entry says: its API version, its
// time (to the second, as the API server keeps it) and its fields.
func managedSum(e *metav1.ManagedFieldsEntry) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(e.APIVersion))
	_, _ = h.Write([]byte{0})
	if e.Time != nil {
		_, _ = h.Write(binary.BigEndian.AppendUint64(nil, uint64(e.Time.Unix())))
	}
	_, _ = h.Write([]byte{0})
	if e.FieldsV1 != nil {
		_, _ = h.Write(e.FieldsV1.GetRawBytes())
	}
	return h.Sum64()
}

// Digests is a digest of each of obj's managedFields entries.
func Digests(obj metav1.Object) []Digest {
	switch o := obj.(type) {
	case *Owned:
		return o.managed
	case *Object:
		return o.managed
	}
	mf := obj.GetManagedFields()
	return appendDigests(make([]Digest, 0, len(mf)), mf)
}

// appendDigests appends a digest of each of mf's entries to ds.
func appendDigests(ds []Digest, mf []metav1.ManagedFieldsEntry) []Digest {
	for i := range mf {
		e := &mf[i]
		ds = append(ds, Digest{key: ManagedKey(e.Manager, e.Operation, e.Subresource), sum: managedSum(e)})
	}
	return ds
}

// managedRoom is room for an object's managedFields digests in what
// keeps them, enough for most objects': one entry an applier, one each
// for the status's and the creator's. More take a slice of their own.
type managedRoom [3]Digest

// keep is ds, in r if they fit.
func (r *managedRoom) keep(ds []Digest) []Digest {
	return append(r[:0:len(r)], ds...)
}

// SumOf is the sum of obj's managedFields entry of key, and whether
// it has one.
func SumOf(obj metav1.Object, key uint64) (uint64, bool) {
	for _, d := range Digests(obj) {
		if d.key == key {
			return d.sum, true
		}
	}
	return 0, false
}

// OthersUnchanged reports whether old and obj have the same managedFields
// entries but those of keys: no other writer's entry was added, dropped or
// changed between them.
func OthersUnchanged(old, obj metav1.Object, keys ...uint64) bool {
	others := func(o metav1.Object) []Digest {
		ds := slices.DeleteFunc(slices.Clone(Digests(o)), func(d Digest) bool { return slices.Contains(keys, d.key) })
		slices.SortFunc(ds, func(a, b Digest) int { return cmp.Compare(a.key, b.key) })
		return ds
	}
	return slices.Equal(others(old), others(obj))
}
