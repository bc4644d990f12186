package kube

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ShardKey is the field of an object whose hash puts it in a shard.
type ShardKey string

const (
	// ShardByUID divides the objects by their metadata.uid: evenly,
	// whatever their namespaces. An owned object belongs to the shard of
	// its controller owner's UID.
	ShardByUID ShardKey = "uid"
	// ShardByNamespace divides them by their metadata.namespace: every
	// object of a namespace in one shard, owned objects with their owners,
	// filtered by the API server too.
	ShardByNamespace ShardKey = "namespace"
)

// maxShards bounds Settings.Shards: each shard is a Lease, and a list and a
// watch of each resource on the replica that holds it.
const maxShards = 256

// shardRange is the i-th of n ranges of the 64-bit FNV-1a hashes that the
// API server's shard selectors divide objects by: from, inclusive, to to,
// exclusive, where the last range ends at 2^64.
type shardRange struct {
	index, count int
	from, to     uint64
	last         bool // to is 2^64
}

// newShardRange returns the i-th of n equal ranges: the hashes h with
// floor(h*n / 2^64) == i, so shardOf puts each hash in exactly one.
func newShardRange(i, n int) shardRange {
	r := shardRange{index: i, count: n, from: rangeStart(i, n)}
	if i == n-1 {
		r.last = true
	} else {
		r.to = rangeStart(i+1, n)
	}
	return r
}

// rangeStart is the first hash of the i-th of n ranges: ceil(i * 2^64 / n).
func rangeStart(i, n int) uint64 {
	q, rem := bits.Div64(uint64(i), 0, uint64(n))
	if rem != 0 {
		q++
	}
	return q
}

// shardOf is the shard of n that hash h falls in.
func shardOf(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// hashOf is the 64-bit FNV-1a hash of s: the API server's hash of a field.
func hashOf(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

func (r shardRange) contains(h uint64) bool {
	return h >= r.from && (r.last || h < r.to)
}

// selector is the API server's shard selector of the range, on field.
func (r shardRange) selector(by ShardKey) string {
	to := fmt.Sprintf("0x%016x", r.to)
	if r.last {
		to = "0x10000000000000000"
	}
	return fmt.Sprintf("shardRange(object.metadata.%s, '0x%016x', '%s')", by, r.from, to)
}

// String names the shard in log records, telemetry and errors: 2/4 is the
// third of four.
func (r shardRange) String() string { return strconv.Itoa(r.index) + "/" + strconv.Itoa(r.count) }

// shardLeaseName is the name of the Lease of the i-th of n shards of the
// controller name: name-i-of-n. The count is in the name, so replicas
// that divide the objects differently, during a rollout that changes
// Settings.Shards, never hold the same Lease for different objects.
func shardLeaseName(name string, i, n int) string {
	return name + "-" + strconv.Itoa(i) + "-of-" + strconv.Itoa(n)
}

// parseShardLease reads a Lease's name as the controller name's shard
// Lease: its index and count.
func parseShardLease(name, lease string) (i, n int, ok bool) {
	rest, found := strings.CutPrefix(lease, name+"-")
	if !found {
		return 0, 0, false
	}
	is, ns, found := strings.Cut(rest, "-of-")
	if !found {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n || shardLeaseName(name, i, n) != lease {
		return 0, 0, false
	}
	return i, n, true
}

// overlaps reports whether two ranges share a hash.
func overlaps(a, b shardRange) bool { return a.before(b) && b.before(a) }

// before reports whether r starts before o ends.
func (r shardRange) before(o shardRange) bool { return o.last || r.from < o.to }

// shardFilter keeps the objects of one shard, on the replica's side:
// whatever the API server sends of other shards, when it doesn't honour
// the selector (the ShardedListAndWatch feature gate is off), is dropped.
type shardFilter struct {
	r   shardRange
	key func(metav1.Object) (string, bool) // the field hashed; false: no shard's
	// foreign is called once an object of another shard has come: the API
	// server doesn't filter.
	foreign func()
}

func (f shardFilter) keeps(obj runtime.Object) bool {
	m, ok := obj.(metav1.Object)
	if !ok {
		return true
	}
	v, ok := f.key(m)
	if !ok {
		return false
	}
	if !f.r.contains(hashOf(v)) {
		f.foreign()
		return false
	}
	return true
}

// listWatch lists and watches one resource's objects of one shard: with
// the shard's selector when the API server can filter them (select), and
// always filtering them here too. An object that was kept and no longer
// is, which only an owned object's change of owner can do, comes as its
// deletion.
type listWatch struct {
	list     func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch    func(context.Context, metav1.ListOptions) (watch.Interface, error)
	filter   shardFilter
	selector string // the selector, or "" where the API server can't filter
	// known reports whether the cache holds an object, and gives it.
	known func(obj any) (any, bool)
}

func (lw *listWatch) options(o metav1.ListOptions) metav1.ListOptions {
	o.ShardSelector = lw.selector
	return o
}

func (lw *listWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	list, err := lw.list(ctx, lw.options(o))
	if err != nil {
		return nil, err
	}
	return filterList(list, lw.filter.keeps)
}

func (lw *listWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := lw.watch(ctx, lw.options(o))
	if err != nil {
		return nil, err
	}
	return filterWatch(w, func(e watch.Event) (watch.Event, bool) {
		switch e.Type {
		case watch.Added, watch.Modified, watch.Deleted:
		default:
			return e, true // bookmarks and errors
		}
		if lw.filter.keeps(e.Object) {
			return e, true
		}
		if e.Type == watch.Modified && lw.known != nil {
			if old, ok := lw.known(e.Object); ok {
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

func filterWatch(w watch.Interface, f func(watch.Event) (watch.Event, bool)) watch.Interface {
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

// filterList keeps the items of list that keep says to: a list of the
// dynamic client's or of the metadata client's.
func filterList(list runtime.Object, keep func(runtime.Object) bool) (runtime.Object, error) {
	switch l := list.(type) {
	case *metav1.PartialObjectMetadataList:
		l.Items = slices.DeleteFunc(l.Items, func(o metav1.PartialObjectMetadata) bool { return !keep(&o) })
	case *unstructured.UnstructuredList:
		l.Items = slices.DeleteFunc(l.Items, func(o unstructured.Unstructured) bool { return !keep(&o) })
	default:
		return nil, fmt.Errorf("kube: filtering a shard's list: a %T", list)
	}
	return list, nil
}

var _ cache.ListerWatcherWithContext = (*listWatch)(nil)
