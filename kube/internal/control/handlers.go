package control

import (
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// The informers' event handlers turn each event into the key of the object
// to reconcile, and its priority: normal for a change, low for what a cold
// start, a relist or a resync queues. A change queues the key at once, in
// place of any wait for Result.After or a backoff that the key had, and
// with the time the API server stamped the change with.

// ObjectKeys queues an object's key on every change to it, its deletion
// and each resync, but for the change that is a reconcile's own write: at
// low priority when the initial list adds it, or an update brings nothing
// the controller reads (changed); otherwise at normal. A relist that finds
// the object unchanged (a watch expired, listed again) queues nothing: a
// resync hands the cache's own object again, a relist a new one of the
// same resourceVersion.
func (c *Controller) ObjectKeys(w *Work) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			k, err := toolscache.MetaNamespaceKeyFunc(obj)
			switch {
			case err != nil:
			case initial:
				c.queueNow(w, k, Low, time.Time{})
			default:
				c.queueNow(w, k, Normal, writtenAt(obj))
			}
		},
		UpdateFunc: func(old, obj any) {
			m, ok := obj.(metav1.Object)
			k, err := toolscache.MetaNamespaceKeyFunc(obj)
			if !ok || err != nil {
				return
			}
			if old != obj && sameVersion(old, obj) {
				return // a relist that found it unchanged
			}
			p, at := Low, time.Time{}
			if was, ok := old.(metav1.Object); !ok || c.changed(was, m) {
				p, at = Normal, writtenAt(obj)
			}
			c.queueUnlessOwn(w, k, p, at, func() bool { return c.Versions.redundant(k, m, c.Finalizer) })
		},
		DeleteFunc: func(obj any) {
			if k, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.queueNow(w, k, Normal, time.Now())
				for _, rel := range c.Relations {
					if rel.Index != nil {
						rel.Failed.Forget(k) // its References' failure, if any
					}
				}
			}
		},
	}
}

// writtenAt is when obj's last write was made, for an event of it that
// arrives now: the API server stamps a write to the second (the newest
// time among its managedFields, which the cache keeps apart, in
// cache.Object.written or cache.Owned.written, or its deletion or
// creation), and the event can't have come before the write. So it is
// the stamp's second's end, or now if earlier: never more than a second
// after the write, and no later than the event. With no stamp, it is now.
func writtenAt(obj any) time.Time {
	now := time.Now()
	at := stampOf(obj)
	if at.IsZero() {
		return now
	}
	if end := at.Add(time.Second); end.Before(now) {
		return end
	}
	return now
}

// stampOf is the newest time the API server stamped obj with: among its
// managedFields, its deletion and its creation; zero when it has none.
func stampOf(obj any) time.Time {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	var at time.Time
	switch o := obj.(type) {
	case *cache.Object:
		at = o.Written
	case *cache.Owned:
		at = o.Written
	case metav1.Object:
		for _, f := range o.GetManagedFields() {
			if f.Time != nil && f.Time.After(at) {
				at = f.Time.Time
			}
		}
	}
	if m, ok := obj.(metav1.Object); ok {
		if d := m.GetDeletionTimestamp(); d != nil && d.After(at) {
			at = d.Time
		}
		if created := m.GetCreationTimestamp(); created.After(at) {
			at = created.Time
		}
	}
	return at
}

// OwnerKeys queues the owner of an owned resource of gr that changes: the
// object its controller owner reference names, when that reference names
// the controller's group and kind; but for the change that is a
// reconcile's own write. The initial list, and an update that brings the
// same resourceVersion, queue it at low priority; any other change at
// normal.
func (c *Controller) OwnerKeys(w *Work, gr schema.GroupResource) toolscache.ResourceEventHandler {
	queueOwner := func(old, obj any, p Priority) {
		m, ok := obj.(metav1.Object)
		k, owned := c.OwnerKey(obj)
		if !ok || !owned {
			return
		}
		before, _ := old.(metav1.Object)
		var at time.Time
		if p == Normal {
			at = writtenAt(obj)
		}
		c.queueUnlessOwn(w, k, p, at, func() bool { return c.OwnWrites.redundant(gr, before, m) })
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if initial {
				queueOwner(nil, obj, Low)
				return
			}
			queueOwner(nil, obj, Normal)
		},
		UpdateFunc: func(old, obj any) {
			// A change of owner reconciles the old owner too. The same owner
			// is queued once: queued twice, a worker could take it between
			// the two, and reconcile it twice for one change.
			if k, ok := c.OwnerKey(old); ok {
				if now, ok := c.OwnerKey(obj); !ok || now != k {
					c.queueNow(w, k, Normal, writtenAt(obj))
				}
			}
			// An owned informer has no resync: the same version again is a
			// relist that found it unchanged.
			if sameVersion(old, obj) {
				return
			}
			queueOwner(old, obj, Normal)
		},
		DeleteFunc: func(obj any) {
			if k, ok := c.OwnerKey(obj); ok {
				c.queueNow(w, k, Normal, time.Now())
			}
		},
	}
}

// sameVersion reports whether old and obj are objects of the same
// resourceVersion. An object without one, which only a fake client makes,
// is of no version.
func sameVersion(old, obj any) bool {
	was, ok := old.(metav1.Object)
	now, ok2 := obj.(metav1.Object)
	return ok && ok2 && was.GetResourceVersion() != "" && was.GetResourceVersion() == now.GetResourceVersion()
}

func (c *Controller) OwnerKey(obj any) (string, bool) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", false
	}
	ref := c.controllerRef(m)
	if ref == nil {
		return "", false
	}
	if c.Scope == Cluster {
		return ref.Name, true
	}
	return m.GetNamespace() + "/" + ref.Name, true
}

// controllerRef is m's controller owner reference when it names an object
// of the controller's group and kind, or nil.
func (c *Controller) controllerRef(m metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || ref.Kind != c.Kind {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != c.Group {
		return nil
	}
	return ref
}

// changed reports whether now, the version of an object an update brings,
// differs from was, the one the cache held, in anything the controller
// reads: its generation (its spec, for a resource with a status
// subresource), labels, annotations, deletion, owner references or
// finalizers other than the controller's own, or anything at all for a
// kind that keeps no generation. A resync, or a relist that found the
// object unchanged, brings the same resourceVersion; a status written by
// another, or the controller's finalizer added by another replica, changes
// nothing it reads.
func (c *Controller) changed(was, now metav1.Object) bool {
	if was.GetResourceVersion() == now.GetResourceVersion() {
		return false
	}
	if now.GetGeneration() == 0 {
		return true
	}
	return !unchangedButOwn(was, now, c.Finalizer, c.name)
}
