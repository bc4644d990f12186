package cache

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// A relist (a watch expired, or the API server restarted, and the informer
// listed again) brings each object at its version now, from whatever
// version the cache held: the versions between, which the cache never saw,
// can be other clients' writes. Their managedFields entries tell most of
// them, but not all: a manager that writes twice within a second, to
// fields it already owned, leaves its entry byte-equal, as
// kube-controller-manager does writing a Deployment's status, or a client
// writing a ConfigMap's data twice. So an update a list brought is never
// taken for an own write, even at the very version a write of the
// controller's answered: it queues the key, as any change does. One
// reconcile more after a watch gap, for a key whose write the relist
// folded in; never one less.

// listedMark marks a PartialObjectMetadata a list brought until the owned
// informer's transform (OwnedMetadata) keeps it as Owned.Listed: its
// metadata.selfLink, which the API server hasn't set since Kubernetes
// 1.20, carries it from the list to the transform, and no further. The
// watch of a streamed list has its objects checked for the informer's
// type, so the mark can't be a type of its own.
const listedMark = "humus.kube/listed"

// MarkingListed is lw with the objects a list brings marked as Listed: a
// list's items, and the initial events of a watch that streams a list
// (sendInitialEvents), up to the bookmark that ends them. Every informer's
// list and watch go through it (newInformer).
func MarkingListed(lw toolscache.ListWatch) toolscache.ListWatch {
	if list := lw.ListWithContextFunc; list != nil {
		lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := list(ctx, o)
			if err != nil {
				return l, err
			}
			return l, meta.EachListItem(l, func(obj runtime.Object) error {
				markListed(obj)
				return nil
			})
		}
	}
	if watchFn := lw.WatchFuncWithContext; watchFn != nil {
		lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := watchFn(ctx, o)
			if err != nil || o.SendInitialEvents == nil || !*o.SendInitialEvents {
				return w, err
			}
			marked := &listedWatch{Interface: w, out: make(chan watch.Event), stop: make(chan struct{})}
			go marked.run()
			return marked, nil
		}
	}
	return lw
}

// markListed marks obj, an object a list brought, as listed.
func markListed(obj runtime.Object) {
	switch o := obj.(type) {
	case *Object:
		o.Listed = true
	case *metav1.PartialObjectMetadata:
		o.SelfLink = listedMark //nolint:staticcheck // the API server no longer sets it: see listedMark
	}
}

// listed reports whether a list brought obj, a cached object.
func Listed(obj metav1.Object) bool {
	switch o := obj.(type) {
	case *Object:
		return o.Listed
	case *Owned:
		return o.Listed
	}
	return false
}

// listedWatch is a watch that streams a list, whose initial events it
// marks as listed on their way to the informer.
type listedWatch struct {
	watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *listedWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop stops the watch, and what hands its events on, even while no one
// reads them.
func (w *listedWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.Interface.Stop()
}

// run hands the watch's events on, marking the initial ones, until the
// watch ends or is stopped.
func (w *listedWatch) run() {
	defer close(w.out)
	initial := true
	for e := range w.Interface.ResultChan() {
		switch {
		case !initial:
		case e.Type == watch.Added:
			markListed(e.Object)
		case e.Type == watch.Bookmark:
			m, err := meta.Accessor(e.Object)
			initial = err != nil || m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true"
		}
		select {
		case w.out <- e:
		case <-w.stop:
			return
		}
	}
}
