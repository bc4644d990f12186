package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// The informers' event handlers turn each event into the key of the object
// to reconcile. A change queues the key at once, in place of any wait for
// Result.After or a backoff that the key had.

// objectKeys queues an object's key on every change to it, its deletion
// and each resync, but for the change that is the controller's own write
// when a reconcile has already run on it.
func (c *Controller) objectKeys(q queue) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queueNow(q, k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(_, obj any) {
			if m, ok := obj.(metav1.Object); ok {
				if k, err := cache.MetaNamespaceKeyFunc(m); err == nil && c.versions.redundant(k, m.GetResourceVersion()) {
					return
				}
			}
			enqueue(obj)
		},
		DeleteFunc: enqueue,
	}
}

// ownerKeys queues the owner of an owned resource that changes: the
// object its controller owner reference names, when that reference names
// the controller's group and kind.
func (c *Controller) ownerKeys(q queue) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if k, ok := c.ownerKey(obj); ok {
			c.queueNow(q, k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			// A change of owner reconciles the old owner too. The same owner
			// is queued once: queued twice, a worker could take it between
			// the two, and reconcile it twice for one change.
			if k, ok := c.ownerKey(old); ok {
				if now, ok := c.ownerKey(obj); !ok || now != k {
					c.queueNow(q, k)
				}
			}
			enqueue(obj)
		},
		DeleteFunc: enqueue,
	}
}

// queueNow queues key at once, in place of any wait it had.
func (c *Controller) queueNow(q queue, key string) {
	c.later.cancel(key)
	q.Add(key)
}

func (c *Controller) ownerKey(obj any) (string, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", false
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || ref.Kind != c.kind {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != c.group {
		return "", false
	}
	if c.scope == Cluster {
		return ref.Name, true
	}
	return m.GetNamespace() + "/" + ref.Name, true
}
