package shard

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Filter keeps the objects of one shard, on the replica's side: whatever
// the API server sends of other shards, when it doesn't honour the
// selector (the ShardedListAndWatch feature gate is off), is dropped.
type Filter struct {
	Range Range
	Key   func(metav1.Object) (string, bool) // the field hashed; false: no shard's
	// Foreign is called once an object of another shard has come: the API
	// server doesn't filter.
	Foreign func()
}

// Keeps reports whether obj is of the filter's shard.
func (f Filter) Keeps(obj runtime.Object) bool {
	m, ok := obj.(metav1.Object)
	if !ok {
		return true
	}
	v, ok := f.Key(m)
	if !ok {
		return false
	}
	if !f.Range.Contains(Hash(v)) {
		f.Foreign()
		return false
	}
	return true
}

// ListWatch lists and watches one resource's objects of one shard: with
// the shard's selector when the API server can filter them (Selector), and
// always filtering them here too. An object that was kept and no longer
// is, which only an owned object's change of owner can do, comes as its
// deletion.
type ListWatch struct {
	List     func(context.Context, metav1.ListOptions) (runtime.Object, error)
	Watch    func(context.Context, metav1.ListOptions) (watch.Interface, error)
	Filter   Filter
	Selector string // the selector, or "" where the API server can't filter
	// Known reports whether the cache holds an object, and gives it.
	Known func(obj any) (any, bool)
}

var _ cache.ListerWatcherWithContext = (*ListWatch)(nil)

func (lw *ListWatch) options(o metav1.ListOptions) metav1.ListOptions {
	o.ShardSelector = lw.Selector
	return o
}

// ListWithContext lists the shard's objects.
func (lw *ListWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	list, err := lw.List(ctx, lw.options(o))
	if err != nil {
		return nil, err
	}
	return filterList(list, lw.Filter.Keeps)
}

// WatchWithContext watches the shard's objects.
func (lw *ListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := lw.Watch(ctx, lw.options(o))
	if err != nil {
		return nil, err
	}
	return FilterWatch(w, func(e watch.Event) (watch.Event, bool) {
		switch e.Type {
		case watch.Added, watch.Modified, watch.Deleted:
		default:
			return e, true // bookmarks and errors
		}
		if lw.Filter.Keeps(e.Object) {
			return e, true
		}
		if e.Type == watch.Modified && lw.Known != nil {
			if old, ok := lw.Known(e.Object); ok {
				if o, ok := old.(runtime.Object); ok {
					return watch.Event{Type: watch.Deleted, Object: o}, true
				}
			}
		}
		return e, false
	}), nil
}

// filteredWatch is w's events that f keeps, as f changes them. Unlike
// apimachinery's watch.Filter, whose goroutine blocks forever on an event
// nobody reads once the watch is stopped, Stop ends its goroutine.
type filteredWatch struct {
	w        watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

// FilterWatch is w's events that f keeps, as f changes them; Stop ends
// its goroutine, and w.
func FilterWatch(w watch.Interface, f func(watch.Event) (watch.Event, bool)) watch.Interface {
	fw := &filteredWatch{w: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go fw.loop(f)
	return fw
}

func (fw *filteredWatch) ResultChan() <-chan watch.Event { return fw.out }

func (fw *filteredWatch) Stop() {
	fw.stopOnce.Do(func() { close(fw.stop) })
	fw.w.Stop()
}

func (fw *filteredWatch) loop(f func(watch.Event) (watch.Event, bool)) {
	defer close(fw.out)
	for {
		select {
		case <-fw.stop:
			return
		case e, ok := <-fw.w.ResultChan():
			if !ok {
				return
			}
			e, keep := f(e)
			if !keep {
				continue
			}
			select {
			case fw.out <- e:
			case <-fw.stop:
				return
			}
		}
	}
}

// filterList keeps the items of list that keep says to.
func filterList(list runtime.Object, keep func(runtime.Object) bool) (runtime.Object, error) {
	items, err := meta.ExtractList(list)
	if err == nil {
		err = meta.SetList(list, slices.DeleteFunc(items, func(o runtime.Object) bool { return !keep(o) }))
	}
	if err != nil {
		return nil, fmt.Errorf("kube: filtering a shard's list: %w", err)
	}
	return list, nil
}
