package kube

import (
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// Related reconciles the controller's objects that keys names when an
// object of r changes: keys is called with the object before and after
// each change (on its creation, the object; on its deletion, its last
// state), and every object either names is reconciled, so a reference
// that moves away reconciles its old referrer too. An object of the
// controller's resource is named by its namespace and name, its
// namespace "" when the resource is cluster-scoped.
//
// A related change queues as a change of the controller's own object
// does: at normal priority, ahead of a cold start's backlog. The
// controller's own writes to r's objects, made through a clientset built
// from Client.Config with the context Reconcile is handed, queue nothing,
// as those to the resources it owns don't. The objects r holds when the
// controller starts queue nothing either: every object of the
// controller's is reconciled at its start anyway. A panic in keys is
// recovered and recorded, and maps the change to nothing.
//
// Related reads r: NewController checks r as Reads does.
func Related[R any](r *Reader[R], keys func(obj R) []types.NamespacedName) Part {
	return related{r: r.reader, mapper: func(u *cache.Object) ([]types.NamespacedName, error) {
		var obj R
		if err := decode(u, &obj); err != nil {
			return nil, err
		}
		return keys(obj), nil
	}}
}

// References reconciles each of the controller's objects when an object
// of r it refers to changes, is created or is deleted: refs, a function
// of the controller's own object, names the objects of r it refers to,
// such as the ConfigMap a Website's spec names. The controller keeps an
// index of its objects by what refs returns, updated as they change, so a
// related change finds its referrers without a scan: every Website
// naming a ConfigMap is reconciled when it changes. A reference changed
// to another object follows the new one from then on. T is the
// Controller's object type, as Finalize's is: NewController checks it.
//
// A panic in refs, or an object that can't be decoded into T, is
// recovered and recorded once for that object, which is then indexed by
// nothing until it changes. Related's other promises hold for References
// too.
func References[R, T any](r *Reader[R], refs func(obj T) []types.NamespacedName) Part {
	return related{r: r.reader, typ: reflect.TypeFor[T](), index: func(u *cache.Object) ([]types.NamespacedName, error) {
		var obj T
		if err := decode(u, &obj); err != nil {
			return nil, err
		}
		return refs(obj), nil
	}}
}

type related struct {
	r *reader
	// mapper maps a related object to the controller's keys (Related), or
	// index maps a controller's object to the related objects it names
	// (References), of type typ.
	mapper func(u *cache.Object) ([]types.NamespacedName, error)
	index  func(u *cache.Object) ([]types.NamespacedName, error)
	typ    reflect.Type
}

func (related) part() {}

// relation is a Related or References part as the controller runs it.
type relation struct {
	related
	name string // References' index's name
	// failed holds the objects its function failed for: the related
	// objects (Related), or the controller's own (References).
	failed failedOnce
}

// indexers are the indexes the controller keeps of its own objects, one
// for each References.
func (c *Controller) indexers() toolscache.Indexers {
	idx := toolscache.Indexers{}
	for _, rel := range c.relations {
		if rel.index != nil {
			idx[rel.name] = c.indexFunc(rel)
		}
	}
	return idx
}

// indexFunc is rel's index of the controller's objects: each by the keys
// of the related objects it refers to. It never fails: client-go's
// indexer panics on an index function's error, in the informer's own
// goroutine.
func (c *Controller) indexFunc(rel *relation) toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		u, ok := obj.(*cache.Object)
		if !ok {
			return nil, nil
		}
		refs, ok := c.mapRecovered(rel, u, rel.index)
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
func (c *Controller) mapRecovered(rel *relation, u *cache.Object, f func(*cache.Object) ([]types.NamespacedName, error)) (refs []types.NamespacedName, ok bool) {
	k := key(u)
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
	rel.failed.forget(k)
	return refs, true
}

// mappingFailed records that rel's function failed for u, once for u's
// key until its mapping succeeds or u is deleted.
func (c *Controller) mappingFailed(rel *relation, u *cache.Object, k string, err error, stack []byte) {
	rel.failed.record(c.tel.log, k, "mapping a related object", "it maps to nothing until it changes",
		[]any{slog.String(attrRelated, rel.r.gr.String()), slog.String("object", describe(u))}, err, stack)
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

// relatedKeys queues the keys rel maps a change of a related object to, on
// each of the controller's works: at normal priority, with the time of
// the change; but for the change that is a reconcile's own write. The
// initial list, and a relist or resync that brings the same version,
// queue nothing.
func (c *Controller) relatedKeys(rel *relation) toolscache.ResourceEventHandler {
	gr := rel.r.gr
	queue := func(old, obj any) {
		was, _ := old.(metav1.Object)
		now, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		at := writtenAt(obj)
		c.leader.each(func(w *work) {
			for _, k := range c.referrers(rel, w, old, obj) {
				c.queueUnlessOwn(w, k, normal, at, func() bool { return c.ownWrites.redundant(gr, was, now) })
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
				c.leader.each(func(w *work) {
					for _, k := range c.referrers(rel, w, nil, m) {
						c.queueNow(w, k, normal, at)
					}
				})
				if rel.mapper != nil {
					rel.failed.forget(key(m))
				}
			}
		},
	}
}

// referrers is the keys of the controller's objects in w that rel maps
// old and obj, a related object before and after a change (old nil for
// none), to: each once.
func (c *Controller) referrers(rel *relation, w *work, old, obj any) []string {
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
		if rel.index != nil {
			if w.store == nil {
				continue // not synced: its initial list queues every object
			}
			ks, err := w.store.IndexKeys(rel.name, key(u))
			if err == nil {
				for _, k := range ks {
					add(k)
				}
			}
			continue
		}
		names, ok := c.mapRecovered(rel, u, rel.mapper)
		if !ok {
			continue
		}
		for _, n := range names {
			if c.scope == Cluster {
				n.Namespace = ""
			}
			if k := nameKey(n); n.Name != "" && (w.store == nil || c.settings.Shards <= 1 || w.has(k)) {
				add(k)
			}
		}
	}
	return keys
}

// has reports whether w's cache holds key: whether it is of w's shard.
func (w *work) has(key string) bool {
	_, ok, err := w.store.GetByKey(key)
	return ok && err == nil
}

// relationName is the name of the i-th References' index.
func relationName(i int) string { return "humus.kube.references." + strconv.Itoa(i) }
