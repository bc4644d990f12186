package kube

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// The informers' event handlers turn each event into the key of the object
// to reconcile. A change queues the key at once, in place of any wait for
// Result.After or a backoff that the key had.

// objectKeys queues an object's key on every change to it, its deletion
// and each resync, but for the change that is a reconcile's own write.
func (c *Controller) objectKeys(sh *shard) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queueNow(sh, k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(_, obj any) {
			m, ok := obj.(metav1.Object)
			k, err := cache.MetaNamespaceKeyFunc(obj)
			if !ok || err != nil {
				return
			}
			c.queueUnlessOwn(sh, k, func() bool { return c.versions.redundant(k, m, c.finalizer) })
		},
		DeleteFunc: enqueue,
	}
}

// ownerKeys queues the owner of an owned resource of gr that changes: the
// object its controller owner reference names, when that reference names
// the controller's group and kind; but for the change that is a
// reconcile's own write.
func (c *Controller) ownerKeys(sh *shard, gr schema.GroupResource) cache.ResourceEventHandler {
	queueOwner := func(old, obj any) {
		m, ok := obj.(metav1.Object)
		k, owned := c.ownerKey(obj)
		if !ok || !owned {
			return
		}
		before, _ := old.(metav1.Object)
		c.queueUnlessOwn(sh, k, func() bool { return c.ownWrites.redundant(gr, before, m) })
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { queueOwner(nil, obj) },
		UpdateFunc: func(old, obj any) {
			// A change of owner reconciles the old owner too. The same owner
			// is queued once: queued twice, a worker could take it between
			// the two, and reconcile it twice for one change.
			if k, ok := c.ownerKey(old); ok {
				if now, ok := c.ownerKey(obj); !ok || now != k {
					c.queueNow(sh, k)
				}
			}
			queueOwner(old, obj)
		},
		DeleteFunc: func(obj any) {
			if k, ok := c.ownerKey(obj); ok {
				c.queueNow(sh, k)
			}
		},
	}
}

// queueUnlessOwn queues key at once, unless the event is a reconcile's own
// write, which redundant tells. While key is being reconciled, the event
// is held until the reconcile ends: a write's event can come before its
// answer does, and so before the write is known.
func (c *Controller) queueUnlessOwn(sh *shard, key string, redundant func() bool) {
	if c.inFlight.hold(key, redundant) || redundant() {
		return
	}
	c.queueNow(sh, key)
}

// queueNow queues key at once, in place of any wait it had.
func (c *Controller) queueNow(sh *shard, key string) {
	sh.later.cancel(key)
	sh.q.Add(key)
}

// inFlight keeps, for each key being reconciled, the events held until its
// reconcile ends.
type inFlight struct {
	mu sync.Mutex
	m  map[string][]func() bool // each reports whether its event was the reconcile's own
}

func (f *inFlight) begin(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string][]func() bool{}
	}
	f.m[key] = nil
}

// hold keeps an event of key's until its reconcile ends, and reports
// whether key is being reconciled.
func (f *inFlight) hold(key string, redundant func() bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	held, ok := f.m[key]
	if ok {
		f.m[key] = append(held, redundant)
	}
	return ok
}

// end reports whether any event held for key's reconcile was not its own,
// so the key is to be queued again. Each is judged, in the order it came.
func (f *inFlight) end(key string) bool {
	f.mu.Lock()
	held := f.m[key]
	delete(f.m, key)
	f.mu.Unlock()
	again := false
	for _, redundant := range held {
		if !redundant() {
			again = true
		}
	}
	return again
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
