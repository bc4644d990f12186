package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

var errNotServing = errors.New("kube: the controller isn't serving")

// errShutdown is the cause of Serve's stopping context when shutdown
// begins; any other cause but a done context is a failure Serve returns.
var errShutdown = errors.New("kube: shutting down")

// Serve runs the controller until its context is done, and then returns
// nil once the reconciles in flight have finished and the Lease is
// released. It returns an error naming the resource when the resource, or
// one it owns, isn't served or may not be listed, such as when its CRD
// isn't installed or is deleted while the controller runs; an error naming
// the Lease when this replica may not read or write it; and
// ErrLostLeadership when the replica loses the Lease.
//
// Every replica lists and watches, and keeps its caches warm; only the
// Lease's holder reconciles, with Settings.Workers workers.
func (c *Controller) Serve(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return fmt.Errorf("kube: controller %s: Serve was called twice", c.name)
	}
	defer close(c.done)
	defer c.closeConnections()
	defer c.synced.MarkUnhealthy(errNotServing)

	ctx = klog.NewContext(ctx, c.tel.logr)
	stopping, stop := context.WithCancelCause(ctx)
	defer stop(errShutdown)
	go func() {
		select {
		case <-c.stop:
			stop(errShutdown)
		case <-stopping.Done():
		}
	}()
	err := c.serve(ctx, stopping, stop)
	if err == nil {
		// A cause other than shutdown's or Serve's context's is a failure,
		// such as a resource that stopped being served.
		if cause := context.Cause(stopping); !errors.Is(cause, errShutdown) && cause != context.Cause(ctx) { //nolint:errorlint // the very error Serve's context ended with
			return cause
		}
	}
	return err
}

// closeConnections closes the transport's idle connections once Serve is
// done with them, so no connection's goroutine outlives Serve by the idle
// timeout. HTTP/2 forgets a finished stream in the connection's own
// goroutine, a moment after its caller has the response: a connection whose
// last stream is still being forgotten isn't idle yet, so while any is
// open, it is closed on a second pass, a moment later.
func (c *Controller) closeConnections() {
	c.clients.closeIdle()
	if c.clients.open() == 0 {
		return
	}
	time.Sleep(closeIdleAgain)
	c.clients.closeIdle()
}

// closeIdleAgain is how long after its first pass closeConnections makes its
// second.
const closeIdleAgain = 50 * time.Millisecond

// serve runs Serve's steps, numbered as in the package doc's How one key is
// reconciled.
func (c *Controller) serve(ctx, stopping context.Context, fail context.CancelCauseFunc) error {
	// 1. Check the resource, and each it owns, is served.
	if err := c.checkServed(stopping); err != nil {
		if stopping.Err() != nil {
			return nil
		}
		return err
	}

	// 2 to 5, on the one Lease or on a Lease of each shard. The informers
	// run until Serve returns, after the Lease is released, so a new
	// leader's caches stay warm meanwhile.
	running, stopInformers := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), c.tel.logr))
	inf := &informing{ctx: running}
	defer inf.running.Wait()
	defer stopInformers()
	inf.watch = newServedWatch(c, running, fail, &inf.running)
	inf.watch.probe()
	return c.leader.serve(ctx, stopping, inf)
}

// informing runs the replica's informers, from step 2 until Serve returns.
type informing struct {
	ctx     context.Context // the informers run until it ends, at the latest
	running sync.WaitGroup  // the informers, and the watch's probes
	watch   *servedWatch    // sees their list and watch errors
}

// start starts informers, each until run or the informing ends, and waits
// for their caches to sync until syncing ends: it reports whether they
// synced.
func (inf *informing) start(run, syncing context.Context, informers []cache.SharedIndexInformer) bool {
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, i := range informers {
		inf.running.Go(func() { i.RunWithContext(run) })
		synced = append(synced, i.HasSynced)
	}
	return cache.WaitForNamedCacheSyncWithContext(syncing, synced...)
}

// informers returns the resource's informer first, through the dynamic
// client, and one for each owned resource, through the metadata client,
// all limited to Settings.Namespace.
func (c *Controller) informers() []cache.SharedIndexInformer {
	ns := c.settings.Namespace
	res := c.clients.dynamic.Resource(c.gvr).Namespace(ns)
	lw := cache.ListWatch{ListWithContextFunc: listing(res.List), WatchFuncWithContext: res.Watch}
	infs := []cache.SharedIndexInformer{newInformer(lw, c.clients.dynamic, c.gvr, &unstructured.Unstructured{}, c.settings.Resync)}
	for _, gvr := range c.owned {
		md := c.clients.metadata.Resource(gvr).Namespace(ns)
		lw := cache.ListWatch{ListWithContextFunc: listing(md.List), WatchFuncWithContext: md.Watch}
		// An owned resource's resync would only repeat the owner's.
		infs = append(infs, newInformer(lw, c.clients.metadata, gvr, &metav1.PartialObjectMetadata{}, 0))
	}
	return infs
}

// handle gives informers, the resource's first and then each owned
// resource's, their event handlers, queueing keys on w, their watch error
// handlers, seen by watch, and the transforms of what their caches keep.
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
		transform := ownedMetadata
		if i == 0 {
			transform = compact
		}
		if err := inf.SetTransform(transform); err != nil {
			return fmt.Errorf("kube: setting a transform: %w", err)
		}
	}
	return nil
}

// newInformer is an informer of what lw lists and watches, through client,
// which says whether it can stream a list in a watch. Its cache has no
// index: the workers only look keys up.
func newInformer(lw cache.ListWatch, client any, gvr schema.GroupVersionResource, example runtime.Object, resync time.Duration) cache.SharedIndexInformer {
	watchFn := lw.WatchFuncWithContext
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		w, err := watchFn(ctx, o)
		return w, refusedWatchList(o, err)
	}
	return cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(&lw, client),
		example,
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}, ObjectDescription: gvr.String()},
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
