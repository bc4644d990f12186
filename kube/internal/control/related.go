package control

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// Indexers are the indexes the controller keeps of its own objects, one
// for each References.
func (c *Controller) Indexers() toolscache.Indexers {
	idx := toolscache.Indexers{}
	for _, rel := range c.Relations {
		if rel.Index != nil {
			idx[rel.name] = c.IndexFunc(rel)
		}
	}
	return idx
}

// IndexFunc is rel's index of the controller's objects: each by the keys
// of the related objects it refers to. It never fails: client-go's
// indexer panics on an index function's error, in the informer's own
// goroutine.
func (c *Controller) IndexFunc(rel *Relation) toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		u, ok := obj.(*cache.Object)
		if !ok {
			return nil, nil
		}
		refs, ok := c.mapRecovered(rel, u, rel.Index)
		if !ok {
			return nil, nil
		}
		values := make([]string, 0, len(refs))
		for _, ref := range refs {
			values = append(values, nameKey(ref))
		}
		return values, nil
	}
}

// mapRecovered runs f on u, recovering a panic; a failure is recorded once
// for u, until f succeeds for it again.
func (c *Controller) mapRecovered(rel *Relation, u *cache.Object, f func(*cache.Object) ([]types.NamespacedName, error)) (refs []types.NamespacedName, ok bool) {
	k := Key(u)
	defer func() {
		if p := recover(); p != nil {
			ok = false
			c.mappingFailed(rel, u, k, fmt.Errorf("panic: %v", p), debug.Stack())
		}
	}()
	refs, err := f(u)
	if err != nil {
		c.mappingFailed(rel, u, k, err, nil)
		return nil, false
	}
	rel.Failed.Forget(k)
	return refs, true
}

// mappingFailed records that rel's function failed for u, once for u's
// key until its mapping succeeds or u is deleted.
func (c *Controller) mappingFailed(rel *Relation, u *cache.Object, k string, err error, stack []byte) {
	rel.Failed.Record(c.tel.log, k, "mapping a related object", "it maps to nothing until it changes",
		[]any{slog.String(attrRelated, rel.Source.GR.String()), slog.String("object", Describe(u))}, err, stack)
}

// attrRelated names, in a mapping's records, the related resource whose
// object it failed for, beside humus.kube.resource, the controller's.
const attrRelated = "humus.kube.related.resource"

// nameKey is the cache key of the object named n.
func nameKey(n types.NamespacedName) string {
	if n.Namespace == "" {
		return n.Name
	}
	return n.Namespace + "/" + n.Name
}

// RelatedKeys queues the keys rel maps a change of a related object to, on
// each of the controller's works: at normal priority, with the time of
// the change; but for the change that is a reconcile's own write. The
// initial list, and a relist or resync that brings the same version,
// queue nothing.
func (c *Controller) RelatedKeys(rel *Relation) toolscache.ResourceEventHandler {
	gr := rel.Source.GR
	queue := func(old, obj any) {
		was, _ := old.(metav1.Object)
		now, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		at := writtenAt(obj)
		c.Leader.each(func(w *Work) {
			for _, k := range c.referrers(rel, w, old, obj) {
				c.queueUnlessOwn(w, k, Normal, at, func() bool { return c.OwnWrites.redundant(gr, was, now) })
			}
		})
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				queue(nil, obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			if sameVersion(old, obj) {
				return
			}
			queue(old, obj)
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				// A deletion is no write of the controller's, and is stamped
				// now.
				at := time.Now()
				c.Leader.each(func(w *Work) {
					for _, k := range c.referrers(rel, w, nil, m) {
						c.queueNow(w, k, Normal, at)
					}
				})
				if rel.Mapper != nil {
					rel.Failed.Forget(Key(m))
				}
			}
		},
	}
}

// referrers is the keys of the controller's objects in w that rel maps
// old and obj, a related object before and after a change (old nil for
// none), to: each once.
func (c *Controller) referrers(rel *Relation, w *Work, old, obj any) []string {
	var keys []string
	seen := map[string]bool{}
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, o := range []any{old, obj} {
		u, ok := o.(*cache.Object)
		if !ok {
			continue
		}
		if rel.Index != nil {
			if w.Store == nil {
				continue // not synced: its initial list queues every object
			}
			ks, err := w.Store.IndexKeys(rel.name, Key(u))
			if err == nil {
				for _, k := range ks {
					add(k)
				}
			}
			continue
		}
		names, ok := c.mapRecovered(rel, u, rel.Mapper)
		if !ok {
			continue
		}
		for _, n := range names {
			if c.Scope == Cluster {
				n.Namespace = ""
			}
			if k := nameKey(n); n.Name != "" && (w.Store == nil || c.settings.Shards <= 1 || w.has(k)) {
				add(k)
			}
		}
	}
	return keys
}
