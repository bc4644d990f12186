package kube

import (
	"context"
	"encoding/json"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// applyStatus applies status to u's status subresource with server-side
// apply, under the controller's field manager, forced: the controller owns
// the status whole.
func (c *Controller) applyStatus(ctx context.Context, u *unstructured.Unstructured, status []byte) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": u.GetAPIVersion(),
		"kind":       u.GetKind(),
		"metadata":   identity(u),
		"status":     json.RawMessage(status),
	})
	if err != nil {
		return wrapf(u, err, "encoding the status of")
	}
	if err := c.apply(ctx, u, body, "status"); err != nil {
		return wrapf(u, err, "applying the status of")
	}
	return nil
}

// applyFinalizer adds the controller's finalizer to u, or removes it, with
// server-side apply under the controller's field manager. Removing is an
// apply of u's metadata without it: the controller's field manager is the
// only one that owns it, so the API server removes it.
func (c *Controller) applyFinalizer(ctx context.Context, u *unstructured.Unstructured, add bool) error {
	meta := identity(u)
	verb := "removing the finalizer from"
	if add {
		meta["finalizers"] = []string{c.finalizer}
		verb = "adding the finalizer to"
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": u.GetAPIVersion(),
		"kind":       u.GetKind(),
		"metadata":   meta,
	})
	if err != nil {
		return wrapf(u, err, verb)
	}
	if err := c.apply(ctx, u, body); err != nil {
		return wrapf(u, err, verb)
	}
	return nil
}

func (c *Controller) apply(ctx context.Context, u *unstructured.Unstructured, body []byte, subresource ...string) error {
	force := true
	res, err := c.clients.dynamic.Resource(c.gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: c.name, Force: &force}, subresource...)
	if err != nil {
		return err
	}
	c.versions.wrote(key(u), res.GetResourceVersion())
	return nil
}

// identity is the metadata that names u in an apply.
func identity(u *unstructured.Unstructured) map[string]any {
	meta := map[string]any{"name": u.GetName()}
	if ns := u.GetNamespace(); ns != "" {
		meta["namespace"] = ns
	}
	return meta
}

// writtenVersions keeps, per key, the resourceVersion the controller's own
// last write returned, until the cache holds it or a newer one, or the
// object is gone. A key is not reconciled on a cache older than its own
// write, since that reconcile would apply what the write already did.
type writtenVersions struct {
	mu sync.Mutex
	m  map[string]string
}

func (w *writtenVersions) wrote(key, rv string) {
	if rv == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]string{}
	}
	w.m[key] = rv
}

// ahead reports whether key's last write is newer than cached, the
// resourceVersion the cache holds. Once it isn't, the write is forgotten.
func (w *writtenVersions) ahead(key, cached string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	written, ok := w.m[key]
	if !ok {
		return false
	}
	if cmp, err := resourceversion.CompareResourceVersion(cached, written); err == nil && cmp < 0 {
		return true
	}
	delete(w.m, key)
	return false
}

func (w *writtenVersions) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
