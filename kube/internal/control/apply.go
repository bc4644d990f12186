package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/z5labs/humus/kube/internal/cache"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApplyStatus applies status to u's status subresource with server-side
// apply, under the controller's field manager, forced: the controller owns
// the status whole. The API server ignores metadata.uid on the status
// subresource, so the apply is conditioned on rv, the resourceVersion the
// status was computed from: u's own, or the one the finalizer's apply just
// returned. A status computed from an object that has since changed, been
// deleted or been replaced is refused, and the change's watch event queues
// the key again.
func (c *Controller) ApplyStatus(ctx context.Context, proof *Proof, u *cache.Object, rv string, status []byte) error {
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
	if _, err := c.apply(ctx, proof, u, body, "status"); err != nil {
		return wrapf(u, err, "applying the status of")
	}
	return nil
}

// ApplyFinalizer adds the controller's finalizer to u, or removes it, with
// server-side apply under the controller's field manager. Removing is an
// apply of u's metadata without it: the controller's field manager is the
// only one that owns it, so the API server removes it. As the status's, the
// apply is conditioned on u's resourceVersion, the version the reconcile
// read: a finalizer decided from an object that has since changed (by a
// newer leader, whose writes advance it) is refused, never stored late.
// It returns the object's resourceVersion after the write.
func (c *Controller) ApplyFinalizer(ctx context.Context, proof *Proof, u *cache.Object, add bool) (string, error) {
	meta := identity(u)
	meta["resourceVersion"] = u.GetResourceVersion()
	verb := "removing the finalizer from"
	if add {
		meta["finalizers"] = []string{c.Finalizer}
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
	rv, err := c.apply(ctx, proof, u, body)
	if err != nil {
		return "", wrapf(u, err, verb)
	}
	return rv, nil
}

// apply is every write of the controller's own. It is sent only while this
// replica can prove it holds the Lease, by proof, the proof of the term
// whose worker reconciled u, and its context ends with that proof, so no
// write of its own is in flight after its renew deadline.
func (c *Controller) apply(ctx context.Context, proof *Proof, u *cache.Object, body []byte, subresource ...string) (rv string, err error) {
	if proof == nil {
		return "", ErrNotLeading
	}
	ctx, cancel := context.WithDeadlineCause(ctx, proof.Until(), ErrNotLeading)
	defer cancel()
	if ctx.Err() != nil {
		// errNotLeading past the deadline; else the reconcile was
		// cancelled: the Lease was lost, or Shutdown's context ended.
		return "", context.Cause(ctx)
	}
	force := true
	rv, err = c.API.Objects(c.gvr, u.GetNamespace()).Apply(ctx, u.GetName(), body,
		metav1.PatchOptions{FieldManager: c.name, Force: &force}, subresource...)
	if err != nil {
		if staleAnswer(err, u.GetName()) {
			return "", fmt.Errorf("%w: %w", ErrStale, err)
		}
		if errors.Is(context.Cause(ctx), ErrNotLeading) {
			// The Lease may well have been renewed since: what ran out is
			// the proof the write was sent under, which no write outlasts.
			return "", fmt.Errorf("%w: the write was still unanswered when the proof it was sent under ran out, RenewDeadline after the renewal before it: %w", ErrNotLeading, err)
		}
		return "", err
	}
	c.Versions.Wrote(Key(u), rv, u)
	return rv, nil
}

// ErrStale is the error of a write computed from an object that the API
// server no longer holds: it was deleted, or replaced by a new object of
// the same name. The key is dropped, not retried: the watch event that
// brings the change queues it again.
var ErrStale = errors.New("kube: the object changed since the write was computed")

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
func identity(u *cache.Object) map[string]any {
	meta := map[string]any{"name": u.GetName(), "uid": string(u.GetUID())}
	if ns := u.GetNamespace(); ns != "" {
		meta["namespace"] = ns
	}
	return meta
}
