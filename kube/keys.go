package kube

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// The informers' event handlers turn each event into the key of the object
// to reconcile, and its priority: normal for a change, low for what a cold
// start, a relist or a resync queues. A change queues the key at once, in
// place of any wait for Result.After or a backoff that the key had, and
// with the time the API server stamped the change with.

// objectKeys queues an object's key on every change to it, its deletion
// and each resync, but for the change that is a reconcile's own write: at
// low priority when the initial list adds it, or an update brings nothing
// the controller reads (changed); otherwise at normal.
func (c *Controller) objectKeys(w *work) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			k, err := cache.MetaNamespaceKeyFunc(obj)
			switch {
			case err != nil:
			case initial:
				c.queueNow(w, k, low, time.Time{})
			default:
				c.queueNow(w, k, normal, writtenAt(obj))
			}
		},
		UpdateFunc: func(old, obj any) {
			m, ok := obj.(metav1.Object)
			k, err := cache.MetaNamespaceKeyFunc(obj)
			if !ok || err != nil {
				return
			}
			p, at := low, time.Time{}
			if was, ok := old.(metav1.Object); !ok || c.changed(was, m) {
				p, at = normal, writtenAt(obj)
			}
			c.queueUnlessOwn(w, k, p, at, func() bool { return c.versions.redundant(k, m, c.finalizer) })
		},
		DeleteFunc: func(obj any) {
			if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.queueNow(w, k, normal, time.Now())
			}
		},
	}
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
	return !unchangedButOwn(was, now, c.finalizer, c.name)
}

// writtenAt is when obj's last write was made, for an event of it that
// arrives now: the API server stamps a write to the second (the newest
// time among its managedFields, which the cache keeps apart, in
// cachedObject.written or ownedObject.written, or its deletion or
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
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	var at time.Time
	switch o := obj.(type) {
	case *cachedObject:
		at = o.written
	case *ownedObject:
		at = o.written
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

// ownerKeys queues the owner of an owned resource of gr that changes: the
// object its controller owner reference names, when that reference names
// the controller's group and kind; but for the change that is a
// reconcile's own write. The initial list, and an update that brings the
// same resourceVersion, queue it at low priority; any other change at
// normal.
func (c *Controller) ownerKeys(w *work, gr schema.GroupResource) cache.ResourceEventHandler {
	queueOwner := func(old, obj any, p priority) {
		m, ok := obj.(metav1.Object)
		k, owned := c.ownerKey(obj)
		if !ok || !owned {
			return
		}
		before, _ := old.(metav1.Object)
		var at time.Time
		if p == normal {
			at = writtenAt(obj)
		}
		c.queueUnlessOwn(w, k, p, at, func() bool { return c.ownWrites.redundant(gr, before, m) })
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if initial {
				queueOwner(nil, obj, low)
				return
			}
			queueOwner(nil, obj, normal)
		},
		UpdateFunc: func(old, obj any) {
			// A change of owner reconciles the old owner too. The same owner
			// is queued once: queued twice, a worker could take it between
			// the two, and reconcile it twice for one change.
			if k, ok := c.ownerKey(old); ok {
				if now, ok := c.ownerKey(obj); !ok || now != k {
					c.queueNow(w, k, normal, writtenAt(obj))
				}
			}
			p := normal
			if was, ok := old.(metav1.Object); ok && sameVersion(was, obj) {
				p = low
			}
			queueOwner(old, obj, p)
		},
		DeleteFunc: func(obj any) {
			if k, ok := c.ownerKey(obj); ok {
				c.queueNow(w, k, normal, time.Now())
			}
		},
	}
}

func sameVersion(was metav1.Object, obj any) bool {
	now, ok := obj.(metav1.Object)
	return ok && was.GetResourceVersion() == now.GetResourceVersion()
}

// queueUnlessOwn queues key at once at p, for a change made at changed,
// unless the event is a reconcile's own write, which redundant tells.
// While key is being reconciled, the event is held until the reconcile
// ends: a write's event can come before its answer does, and so before the
// write is known.
func (c *Controller) queueUnlessOwn(w *work, key string, p priority, changed time.Time, redundant func() bool) {
	if c.inFlight.hold(key, heldEvent{redundant: redundant, p: p, changed: changed}) || redundant() {
		return
	}
	c.queueNow(w, key, p, changed)
}

// queueNow queues key at once, in place of any wait it had, at p or at the
// wait's priority if higher.
func (c *Controller) queueNow(w *work, key string, p priority, changed time.Time) {
	if waited, ok := w.later.cancel(key); ok {
		p = max(p, waited)
	}
	w.q.Add(key, p, changed)
}

// inFlight keeps, for each key being reconciled, the events held until its
// reconcile ends.
type inFlight struct {
	mu sync.Mutex
	m  map[string][]heldEvent
}

// heldEvent is an event held while its key is reconciled.
type heldEvent struct {
	redundant func() bool // reports whether the event was the reconcile's own
	p         priority
	changed   time.Time
}

func (f *inFlight) begin(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string][]heldEvent{}
	}
	f.m[key] = nil
}

// hold keeps an event of key's until its reconcile ends, and reports
// whether key is being reconciled.
func (f *inFlight) hold(key string, e heldEvent) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	held, ok := f.m[key]
	if ok {
		f.m[key] = append(held, e)
	}
	return ok
}

// end reports whether any event held for key's reconcile was not its own,
// so the key is to be queued again, at the highest priority of those, for
// the oldest change among them. Each is judged, in the order it came.
func (f *inFlight) end(key string) (again bool, p priority, changed time.Time) {
	f.mu.Lock()
	held := f.m[key]
	delete(f.m, key)
	f.mu.Unlock()
	for _, e := range held {
		if e.redundant() {
			continue
		}
		again, p = true, max(p, e.p)
		if !e.changed.IsZero() && (changed.IsZero() || e.changed.Before(changed)) {
			changed = e.changed
		}
	}
	return again, p, changed
}

func (c *Controller) ownerKey(obj any) (string, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
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
	if c.scope == Cluster {
		return ref.Name, true
	}
	return m.GetNamespace() + "/" + ref.Name, true
}

// controllerRef is m's controller owner reference when it names an object
// of the controller's group and kind, or nil.
func (c *Controller) controllerRef(m metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || ref.Kind != c.kind {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != c.group {
		return nil
	}
	return ref
}
