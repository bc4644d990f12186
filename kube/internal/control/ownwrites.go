package control

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/z5labs/humus/kube/internal/transport"
)

// A controller's own writes are its outcome, so the watch events they
// bring would only reconcile an object again to find nothing to do; and a
// reconcile on a cache older than its key's last write would apply again
// what that write did. This file holds what tells the controller's own
// writes from anyone else's, which queueUnlessOwn (queue.go) asks of each
// event, and what makes a reconcile read its own last write:
//
//   - writtenVersions: the resourceVersions of the controller's own writes
//     to its resource's objects (their finalizer and status, which apply
//     records), to read one's own writes and to know their events.
//   - ownedWrites: a reconcile's writes to the resources it Owns, which the
//     Client's transport records by resourceVersion.
//   - The digests of each object's managedFields entries, which the cache
//     keeps, and which tell whose write made a version.
//   - cache.MarkingListed, which marks the versions a list brought, which are
//     never own writes.

// rywBound is how long a write is remembered for reading one's own writes.
// The watch event that brings it normally comes within a second; a
// remembered version that never comes, such as after etcd was restored and
// the API server's resourceVersions went backwards, holds its key back no
// longer than this.
const rywBound = 30 * time.Second

// WrittenVersions keeps, per key, the resourceVersions of the
// controller's own writes: the last one, to read one's own writes, and
// those whose watch events are still to come, which queue nothing.
//
// Reading one's own writes: a key is not reconciled on a cache older than
// its last write, since that reconcile would apply what the write already
// did. The write is remembered until the cache holds it or a newer
// version, the object is gone, or rywBound has passed.
//
// Own events: a reconcile's writes (its finalizer, its status) are its own
// outcome, so their watch events would only reconcile the object again to
// find nothing to do. Such an event queues nothing, unless the object it
// brings differs from the one the reconcile started from in anything but
// its status and the controller's finalizer: its generation (the spec, or
// a deletion begun), labels, annotations, owner references or other
// finalizers. That catches a change of someone else's that a relist folded
// into the event of the controller's write, and would otherwise go
// unreconciled until the resync.
type WrittenVersions struct {
	Manager string // the controller's field manager: its name

	mu sync.Mutex
	m  map[string]written
}

type written struct {
	rv      string // the last write's
	at      time.Time
	pending []ownWrite // the writes whose events haven't come
}

// ownWrite is a write of a reconcile's, and the object that reconcile
// started from.
type ownWrite struct {
	rv    string
	input metav1.Object
}

// Wrote records a write of the reconcile that started from input, which
// returned rv.
func (w *WrittenVersions) Wrote(key, rv string, input metav1.Object) {
	if rv == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]written{}
	}
	wr := w.m[key]
	wr.rv, wr.at = rv, time.Now()
	wr.pending = append(wr.pending, ownWrite{rv: rv, input: input})
	w.m[key] = wr
}

// AheadFor reports whether key's last write is newer than cached, and for
// how long it is remembered still. A cache past the last write, or a write
// older than rywBound, forgets the key's writes.
func (w *WrittenVersions) AheadFor(key, cached string) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wr, ok := w.m[key]
	if !ok {
		return 0, false
	}
	if left := rywBound - time.Since(wr.at); left > 0 {
		cmp, err := resourceversion.CompareResourceVersion(cached, wr.rv)
		switch {
		case err != nil:
		case cmp < 0:
			return left, true
		case cmp == 0:
			return 0, false // its event may be still to come
		}
	}
	delete(w.m, key)
	return 0, false
}

// redundant reports whether the watch event bringing obj, a version of
// key, would only reconcile what a reconcile already did: obj is that
// reconcile's own write, and nothing but its status and the controller's
// finalizer changed since the reconcile's object.
func (w *WrittenVersions) redundant(key string, obj metav1.Object, finalizer string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	wr, ok := w.m[key]
	if !ok {
		return false
	}
	rv := obj.GetResourceVersion()
	cmp, err := resourceversion.CompareResourceVersion(rv, wr.rv)
	if err != nil || cmp > 0 {
		// Past every write of the controller's: their events came, or a
		// relist folded them into this one.
		delete(w.m, key)
		return false
	}
	i := slices.IndexFunc(wr.pending, func(p ownWrite) bool { return p.rv == rv })
	if i < 0 {
		return false
	}
	input := wr.pending[i].input
	wr.pending = slices.Delete(wr.pending, 0, i+1) // events come in order
	if cmp == 0 {
		delete(w.m, key) // the cache holds the last write
	} else {
		w.m[key] = wr
	}
	return !cache.Listed(obj) && unchangedButOwn(input, obj, finalizer, w.Manager)
}

// forget forgets key's writes: its object is gone, or its shard's term
// ended.
func (w *WrittenVersions) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}

// unchangedButOwn reports whether now differs from was in nothing a
// reconcile reads but the status, and finalizer: nor in any managedFields
// entry but manager's two applies (its finalizer's and its status's). The
// entries tell a change of someone else's that the rest can't, such as to
// a ConfigMap's data, which bumps no generation.
func unchangedButOwn(was, now metav1.Object, finalizer, manager string) bool {
	others := func(fs []string) []string {
		return slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return f == finalizer })
	}
	return was.GetUID() == now.GetUID() &&
		was.GetGeneration() == now.GetGeneration() &&
		was.GetDeletionTimestamp().Equal(now.GetDeletionTimestamp()) &&
		maps.Equal(was.GetLabels(), now.GetLabels()) &&
		maps.Equal(was.GetAnnotations(), now.GetAnnotations()) &&
		equality.Semantic.DeepEqual(was.GetOwnerReferences(), now.GetOwnerReferences()) &&
		slices.Equal(others(was.GetFinalizers()), others(now.GetFinalizers())) &&
		cache.OthersUnchanged(was, now,
			cache.ManagedKey(manager, metav1.ManagedFieldsOperationApply, ""),
			cache.ManagedKey(manager, metav1.ManagedFieldsOperationApply, "status"))
}

// A reconcile's writes to the resources its controller Owns are its own
// outcome too: the Reconciler has their responses. The Client's transport
// (internal/transport) records the resourceVersion each of them returned,
// and the event that brings that version queues nothing, provided the
// write made that version. A write is recorded when it goes through the
// Client's transport (a clientset built from Client.Config), with the
// reconcile's context, and its answer is JSON or protobuf, as client-go's
// clients ask for; any other write's event queues the owner as a change of
// someone else's does.
//
// A write that changes nothing makes no version: kube-apiserver's store
// writes nothing when the object's bytes are unchanged, and answers with
// the stored object, whose resourceVersion can be another client's write
// that the informer hasn't brought yet. The answer can't tell the two
// apart, but the event can: a write that changed the object changed its
// writer's managedFields entry too (server-side apply and update set the
// entry's time, to the second, whenever they change the object, and the
// entry's fields when they change what the writer owns), while another
// client's write leaves the writer's entry as it was. So the event of a
// recorded version is the reconcile's own only when the writer's entry
// differs between the version before it and that version, or, for an
// object new to the cache, when the write created it (201). A change of
// the writer's within the second of its last one, to fields it already
// owned, is taken for someone else's: one reconcile more, never one less.

// OwnedAnswer is what a write's answer says of it: the object's
// resourceVersion after it, whether it created the object, which
// managedFields entry is the writer's (managedKey), and the object's
// labels, which say whether a Reader's selector keeps it.
type OwnedAnswer struct {
	RV      string
	Created bool
	Entry   uint64
	Labels  map[string]string
}

// RecordingWrites returns ctx carrying w, so the writes a reconcile makes
// with it through the Client's transport are recorded in w.
func RecordingWrites(ctx context.Context, w *OwnedWrites) context.Context {
	return transport.RecordingWrites(ctx, w)
}

// OwnedWrites keeps the writes that a controller's reconciles made to the
// resources it Owns, until their events come, or for rywBound.
type OwnedWrites struct {
	owned []schema.GroupResource

	mu    sync.Mutex
	m     map[ownedKey]ownedWrite
	swept time.Time
}

type ownedKey struct {
	gr              schema.GroupResource
	namespace, name string
}

type ownedWrite struct {
	writes []OwnedAnswer // in the order written
	at     time.Time
}

func NewOwnedWrites(owned []schema.GroupVersionResource) *OwnedWrites {
	w := &OwnedWrites{m: map[ownedKey]ownedWrite{}}
	for _, gvr := range owned {
		w.owned = append(w.owned, gvr.GroupResource())
	}
	return w
}

// Owns reports whether w records the writes to gr: whether gr is one of
// the resources the controller Owns.
func (w *OwnedWrites) Owns(gr schema.GroupResource) bool {
	return w != nil && slices.Contains(w.owned, gr)
}

// RecordWrite records a write's answer, as the Client's transport reads
// it.
func (w *OwnedWrites) RecordWrite(gr schema.GroupResource, namespace, name string, a transport.Answer) {
	e := a.Writer
	w.RecordAnswer(gr, namespace, name, OwnedAnswer{RV: a.ResourceVersion, Created: a.Created, Entry: cache.ManagedKey(e.Manager, e.Operation, e.Subresource), Labels: a.Labels})
}

func (w *OwnedWrites) RecordAnswer(gr schema.GroupResource, namespace, name string, wr OwnedAnswer) {
	if wr.RV == "" || !w.Owns(gr) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.swept) > rywBound {
		// Forget the writes whose events never came, such as those a
		// relist folded into a later version's.
		for k, ow := range w.m {
			if now.Sub(ow.at) > rywBound {
				delete(w.m, k)
			}
		}
		w.swept = now
	}
	k := ownedKey{gr, namespace, name}
	ow := w.m[k]
	ow.writes, ow.at = append(ow.writes, wr), now
	w.m[k] = ow
}

// redundant reports whether the event that brings obj, an owned object of
// gr, after old (nil when the object is new to the cache), is that of a
// reconcile's own write: its version is one a write of the reconcile's
// answered, that write made it, and no list brought it as an update. An
// event past the last write forgets the object's writes.
func (w *OwnedWrites) redundant(gr schema.GroupResource, old, obj metav1.Object) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := ownedKey{gr, obj.GetNamespace(), obj.GetName()}
	ow, ok := w.m[k]
	if !ok {
		return false
	}
	rv := obj.GetResourceVersion()
	relisted := old != nil && cache.Listed(obj)
	last := ow.writes[len(ow.writes)-1]
	if cmp, err := resourceversion.CompareResourceVersion(rv, last.RV); err != nil || cmp >= 0 {
		delete(w.m, k)
		return err == nil && cmp == 0 && !relisted && last.made(old, obj)
	}
	i := slices.IndexFunc(ow.writes, func(wr OwnedAnswer) bool { return wr.RV == rv })
	if i < 0 {
		return false
	}
	made := ow.writes[i].made(old, obj)
	ow.writes = slices.Delete(ow.writes, 0, i+1) // events come in order
	w.m[k] = ow
	return made && !relisted
}

// made reports whether the write made obj, the version it answered, from
// old, the version before it in the cache, and nobody else changed it
// between them: it created the object; or it changed the writer's
// managedFields entry and no other entry changed (a relist can fold
// another client's change into the event of the reconcile's write: the
// other client's entry tells).
func (wr OwnedAnswer) made(old, obj metav1.Object) bool {
	if old == nil {
		return wr.Created
	}
	after, ok := cache.SumOf(obj, wr.Entry)
	if !ok {
		return false
	}
	before, ok := cache.SumOf(old, wr.Entry)
	return (!ok || before != after) && cache.OthersUnchanged(old, obj, wr.Entry)
}
