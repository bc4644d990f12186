package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// The informers a controller runs, from Serve's step 2 until it returns:
// informing, which starts them and waits for their caches; the informer
// of the controller's own resource (ownInformer) and its handlers
// (handle); its joins of the Client's shared informers (cache.go) of each
// resource it Owns or reads; and newInformer, which every informer of the
// package is made by. Whether the resources they list and watch are
// served is checked in informers_served.go.

// informing runs the replica's informers, from step 2 until Serve returns.
type informing struct {
	ctx     context.Context // the informers run until it ends, at the latest
	running sync.WaitGroup  // the informers, and the watch's probes
	watch   *servedWatch    // sees their list and watch errors
}

// start starts informers, each until run or the informing ends, and waits
// for their caches, and those of the shared informers' users, to sync
// until syncing ends: it reports whether they synced.
func (inf *informing) start(run, syncing context.Context, informers []cache.SharedIndexInformer, shared ...*cacheUser) bool {
	synced := make([]cache.InformerSynced, 0, len(informers)+len(shared))
	for _, i := range informers {
		inf.running.Go(func() { i.RunWithContext(run) })
		synced = append(synced, i.HasSynced)
	}
	for _, u := range shared {
		synced = append(synced, u.synced)
	}
	return cache.WaitForNamedCacheSyncWithContext(syncing, synced...)
}

// ownInformer is the informer of the controller's own resource, through
// its objects' REST client (clients.objects), limited to
// Settings.Namespace and its selectors, with an index for each
// References.
func (c *Controller) ownInformer() cache.SharedIndexInformer {
	res := c.clients.objects(c.gvr, c.settings.Namespace)
	list, watch := selecting(c.watched[0], res.List, res.Watch)
	lw := cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watch}
	return newInformer(lw, c.clients.dynamic, c.gvr, &cachedObject{}, c.settings.Resync, c.indexers())
}

// joinOwned joins the shared informer of each resource the controller
// owns, in Settings.Namespace, with its selectors, queueing their owners
// on w.
func (c *Controller) joinOwned(w *work, watch *servedWatch) ([]*cacheUser, error) {
	var users []*cacheUser
	for i, gvr := range c.owned {
		e := c.cache.entry(c.watched[1+i], false)
		u, err := e.join(c.clients, c.tel.logr, c.ownerKeys(w, gvr.GroupResource()), watch.check(1+i))
		if err != nil {
			leaveAll(users)
			return nil, err
		}
		users = append(users, u)
	}
	return users, nil
}

// joinReads joins the shared informer of each resource the controller
// reads, and adds each Related's and References' handler.
func (c *Controller) joinReads(watch *servedWatch) ([]*cacheUser, error) {
	var users []*cacheUser
	for i, r := range c.reads {
		u, err := r.entry.join(c.clients, c.tel.logr, nil, watch.check(1+len(c.owned)+i))
		if err != nil {
			leaveAll(users)
			return nil, err
		}
		users = append(users, u)
	}
	for _, rel := range c.relations {
		u, err := rel.r.entry.join(c.clients, c.tel.logr, c.relatedKeys(rel), nil)
		if err != nil {
			leaveAll(users)
			return nil, err
		}
		users = append(users, u)
	}
	return users, nil
}

// leaveAll ends each of users' use of its informer.
func leaveAll(users []*cacheUser) {
	for _, u := range users {
		u.leave()
	}
}

// handle gives informers, the resource's first and then each owned
// resource's, their event handlers, queueing keys on w, their watch error
// handlers, seen by watch, and each owned resource's the transform of
// what its cache keeps; the resource's objects come decoded into the
// cache's form (clients.objects).
func (c *Controller) handle(informers []cache.SharedIndexInformer, w *work, watch *servedWatch) error {
	handlers := []cache.ResourceEventHandler{c.objectKeys(w)}
	for _, gvr := range c.owned {
		handlers = append(handlers, c.ownerKeys(w, gvr.GroupResource()))
	}
	for i, inf := range informers {
		logger := c.tel.logr
		if _, err := inf.AddEventHandlerWithOptions(handlers[i], cache.HandlerOptions{Logger: &logger}); err != nil {
			return fmt.Errorf("kube: adding an event handler: %w", err)
		}
		if err := inf.SetWatchErrorHandlerWithContext(watch.handler(i)); err != nil {
			return fmt.Errorf("kube: setting a watch error handler: %w", err)
		}
		if i == 0 {
			continue // its objects are decoded into the cache's form
		}
		if err := inf.SetTransform(ownedMetadata); err != nil {
			return fmt.Errorf("kube: setting a transform: %w", err)
		}
	}
	return nil
}

// newInformer is an informer of what lw lists and watches, through client,
// which says whether it can stream a list in a watch, with indexers.
func newInformer(lw cache.ListWatch, client any, gvr schema.GroupVersionResource, example runtime.Object, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	lw = markingListed(lw) // a relist's versions are no own writes (ownwrites.go)
	watchFn := lw.WatchFuncWithContext
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		w, err := watchFn(ctx, o)
		return w, refusedWatchList(o, err)
	}
	return cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(&lw, client),
		example,
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: indexers, ObjectDescription: gvr.String()},
	)
}

// listing is a client's typed list as an informer's list.
func listing[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error)) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		l, err := list(ctx, o)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// refusedWatchList keeps an informer stoppable while the API server refuses
// its connections or throttles it. When a request to stream a list in a
// watch is refused at connect, or answered 429 Too Many Requests (after the
// REST client's own retries), client-go's reflector (v0.37) sleeps out its
// backoff, which grows to 30 s and is jittered up to twice that, without
// looking at its context; Serve, which waits for its informers to stop,
// would wait that long too, and return past the lost deadline. So that
// error is handed back as one the reflector doesn't retry in place: it
// then lists, as it did before it streamed lists, and when that fails too
// it waits out the same backoff in its run loop, which stops with the
// informer. Any other error, and any other request's, is err itself.
func refusedWatchList(o metav1.ListOptions, err error) error {
	if err == nil || o.SendInitialEvents == nil || !*o.SendInitialEvents {
		return err
	}
	if !utilnet.IsConnectionRefused(err) && !apierrors.IsTooManyRequests(err) {
		return err
	}
	return refusedError{err.Error()}
}

// refusedError is a refused request's error text, without the error.
type refusedError struct{ text string }

func (e refusedError) Error() string { return e.text }
