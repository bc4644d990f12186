package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// applyStatus applies status to u's status subresource with server-side
// apply, under the controller's field manager, forced: the controller owns
// the status whole. The API server ignores metadata.uid on the status
// subresource, so the apply is conditioned on rv, the resourceVersion the
// status was computed from: u's own, or the one the finalizer's apply just
// returned. A status computed from an object that has since changed, been
// deleted or been replaced is refused, and the change's watch event queues
// the key again.
func (c *Controller) applyStatus(ctx context.Context, u *cachedObject, rv string, status []byte) error {
	meta := identity(u)
	meta["resourceVersion"] = rv
	body, err := json.Marshal(map[string]any{
		"apiVersion": u.APIVersion,
		"kind":       u.Kind,
		"metadata":   meta,
		"status":     json.RawMessage(status),
	})
	if err != nil {
		return wrapf(u, err, "encoding the status of")
	}
	if _, err := c.apply(ctx, u, body, "status"); err != nil {
		return wrapf(u, err, "applying the status of")
	}
	return nil
}

// applyFinalizer adds the controller's finalizer to u, or removes it, with
// server-side apply under the controller's field manager. Removing is an
// apply of u's metadata without it: the controller's field manager is the
// only one that owns it, so the API server removes it. It returns the
// object's resourceVersion after the write.
func (c *Controller) applyFinalizer(ctx context.Context, u *cachedObject, add bool) (string, error) {
	meta := identity(u)
	verb := "removing the finalizer from"
	if add {
		meta["finalizers"] = []string{c.finalizer}
		verb = "adding the finalizer to"
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": u.APIVersion,
		"kind":       u.Kind,
		"metadata":   meta,
	})
	if err != nil {
		return "", wrapf(u, err, verb)
	}
	rv, err := c.apply(ctx, u, body)
	if err != nil {
		return "", wrapf(u, err, verb)
	}
	return rv, nil
}

// apply is every write of the controller's own. It is sent only while this
// replica can prove it holds the Lease, and its context ends with that
// proof, so no write of its own is in flight after its renew deadline.
func (c *Controller) apply(ctx context.Context, u *cachedObject, body []byte, subresource ...string) (rv string, err error) {
	until := proofOf(ctx)
	if until == nil {
		return "", errNotLeading
	}
	ctx, cancel := context.WithDeadlineCause(ctx, until(), errNotLeading)
	defer cancel()
	if ctx.Err() != nil {
		// errNotLeading past the deadline; else the reconcile was
		// cancelled: the Lease was lost, or Shutdown's context ended.
		return "", context.Cause(ctx)
	}
	force := true
	res, err := c.clients.dynamic.Resource(c.gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: c.name, Force: &force}, subresource...)
	if err != nil {
		if staleAnswer(err, u.GetName()) {
			return "", fmt.Errorf("%w: %w", errStale, err)
		}
		if errors.Is(context.Cause(ctx), errNotLeading) {
			return "", fmt.Errorf("%w: %w", errNotLeading, err)
		}
		return "", err
	}
	c.versions.wrote(key(u), res.GetResourceVersion(), u)
	return res.GetResourceVersion(), nil
}

// proof is what every write of the controller's own checks before it is
// sent: the deadline until which this replica can prove it holds the Lease
// the write is made under, as of now. A term of leading (term.go) gives it
// to its reconciles' context; a write without one isn't sent.
type proof func() time.Time

type proofKey struct{}

// withProof is ctx carrying the proof of the Lease its writes are made
// under: the reconciles' context of a term of leading.
func withProof(ctx context.Context, until proof) context.Context {
	return context.WithValue(ctx, proofKey{}, until)
}

// proofOf is the proof ctx carries, or nil.
func proofOf(ctx context.Context) proof {
	until, _ := ctx.Value(proofKey{}).(proof)
	return until
}

// errNotLeading is the error of a write this replica can't prove it may
// make: it can't prove it holds the Lease.
var errNotLeading = errors.New("kube: this replica can't prove it holds the Lease")

// errStale is the error of a write computed from an object that the API
// server no longer holds: it was deleted, or replaced by a new object of
// the same name. The key is dropped, not retried: the watch event that
// brings the change queues it again.
var errStale = errors.New("kube: the object changed since the write was computed")

// staleAnswer reports whether err is the API server's answer to a write
// computed from an object named name that it no longer holds, as the real
// API server gives them: 404 Not Found naming the object, from the status
// subresource of a deleted one (a 404 naming nothing, such as for a CRD
// without the status subresource, is an error like any other); 409
// Conflict from an apply that would create it ("uid mismatch"), or from a
// status apply whose resourceVersion is no longer the object's; and 422
// Invalid on metadata.uid, which is immutable, from an apply onto another
// object of the same name.
func staleAnswer(err error, name string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	switch {
	case apierrors.IsConflict(err):
		return true
	case details == nil:
		return false
	case apierrors.IsNotFound(err):
		return details.Name == name
	case !apierrors.IsInvalid(err):
		return false
	}
	for _, cause := range details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// identity is the metadata that names u in an apply: its name, its
// namespace, and its UID, so the API server refuses the write, rather than
// create an object or write onto another one of the same name, when u is
// stale.
func identity(u *cachedObject) map[string]any {
	meta := map[string]any{"name": u.GetName(), "uid": string(u.GetUID())}
	if ns := u.GetNamespace(); ns != "" {
		meta["namespace"] = ns
	}
	return meta
}

// rywBound is how long a write is remembered for reading one's own writes.
// The watch event that brings it normally comes within a second; a
// remembered version that never comes, such as after etcd was restored and
// the API server's resourceVersions went backwards, holds its key back no
// longer than this.
const rywBound = 30 * time.Second

// writtenVersions keeps, per key, the resourceVersions of the
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
type writtenVersions struct {
	manager string // the controller's field manager: its name

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

// wrote records a write of the reconcile that started from input, which
// returned rv.
func (w *writtenVersions) wrote(key, rv string, input metav1.Object) {
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

// aheadFor reports whether key's last write is newer than cached, and for
// how long it is remembered still. A cache past the last write, or a write
// older than rywBound, forgets the key's writes.
func (w *writtenVersions) aheadFor(key, cached string) (time.Duration, bool) {
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
func (w *writtenVersions) redundant(key string, obj metav1.Object, finalizer string) bool {
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
	return unchangedButOwn(input, obj, finalizer, w.manager)
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
		othersUnchanged(was, now,
			managedKey(manager, metav1.ManagedFieldsOperationApply, ""),
			managedKey(manager, metav1.ManagedFieldsOperationApply, "status"))
}

func (w *writtenVersions) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
