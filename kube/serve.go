package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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

	// The resources the Reconciler reads, shared with the Client's other
	// controllers, synced before any reconcile.
	reads, err := c.joinReads(inf.watch)
	if err != nil {
		return err
	}
	defer leaveAll(reads)
	if len(reads) > 0 && !inf.start(running, stopping, nil, reads...) {
		return nil // shutdown began, or a resource stopped being served
	}
	return c.leader.serve(ctx, stopping, inf)
}

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

// Shutdown, and the end of a term of leading, run on these signals. Each
// is closed or cancelled once; the third column says who waits on it.
//
//	signal                        closed or cancelled by                   waited on by
//	c.stop                        beginShutdown: Serve's context, Shutdown  Serve (cancels stopping), each worker before a key
//	stopping (serve.go)           c.stop, Serve's context, or a resource    step 1's retries, the cache sync, the leader
//	                              no longer served (with its cause)
//	informing.ctx (serve.go)      Serve, once the leader has returned       the informers
//	campaigning (lease.go)        lead's return, or the Lease lost          the elector
//	leading (lease.go)            the elector, once it holds the Lease      lead, to start the term
//	campaigned (lease.go)         the elector's return                      the term (held: no more renewals)
//	c.work (controller.go)        Shutdown, when its context ends first     the reconciles, the Lease's release
//	term.reconciles (term.go)     the Lease lost, or the term's end         the reconciles of one term
//	term.finished (term.go)       the term's workers, all returned          the term
//	c.crew (worker.go)            every term's workers, all returned        Shutdown
//	c.done (controller.go)        Serve's return                            Shutdown
//
// With shards, each shard's term has its own holding (shards.go), in place
// of campaigning, and its own held, in place of campaigned.
//
// On Serve's context (or Shutdown): c.stop closes, the workers stop taking
// keys and the queue shuts down, the reconciles in flight finish, the
// elector stops, the Lease is released, the informers stop, and Serve
// returns nil. When Shutdown's context ends first, c.work is cancelled too.
// On a lost Lease: the workers stop taking keys, the term's reconciles are
// cancelled, the elector stops, the connections are aborted, and Serve
// returns ErrLostLeadership by the lost deadline.

// Shutdown finishes the controller's shutdown within ctx. Shutdown begins
// when Serve's context is done, or when Shutdown is called: the controller
// stops taking keys, lets the reconciles in flight finish, releases the
// Lease and stops its informers, leaving its backlog for the next leader,
// and Serve returns nil. When ctx ends first, Shutdown cancels the
// reconciles in flight and the Lease's release, waits for the reconciles
// to return, and returns an error wrapping ctx's: it never waits on the API
// server, however slow the release or the informers are. A Reconciler that
// ignores its cancelled context holds Shutdown, and humus.Main's grace
// period bounds that.
func (c *Controller) Shutdown(ctx context.Context) error {
	c.beginShutdown()
	if !c.started.Load() {
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
	}
	c.cancelWork()
	c.crew.wait()
	return fmt.Errorf("kube: controller %s: shutting down: %w", c.name, ctx.Err())
}

func (c *Controller) beginShutdown() { c.stopOnce.Do(func() { close(c.stop) }) }

func (c *Controller) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// How long a controller waits on the API server before it gives up.
const (
	// startRetry bounds how long step 1 retries a transient error, such
	// as a refused connection, a 429 or a 5xx, before it ends Serve: long
	// enough for a rolling upgrade of the API server, short enough that a
	// controller that can't start says so.
	startRetry = time.Minute

	// unservedGrace is how long a resource must keep answering NotFound or
	// Forbidden while the controller runs before Serve ends: an API server
	// that has just restarted can answer so for a moment, before its CRDs
	// and RBAC are loaded.
	unservedGrace = 10 * time.Second

	// rightsProbe is how often a running controller lists and watches its
	// resource, and each it owns, once more: the API server checks a
	// request's rights when it begins, so an open watch goes on after
	// list and watch are taken away, until it times out (5 to 10 minutes).
	// So Serve ends within rightsProbe and unservedGrace of them taken
	// away.
	rightsProbe = 10 * time.Second

	retryFirst = 500 * time.Millisecond
	retryMax   = 8 * time.Second
)

// checkServed lists the controller's resource, and each it owns, once, with
// a limit of 1, so a resource that isn't served, or may not be listed, ends
// Serve loudly, rather than leaving an informer to retry its list forever
// and only log. A transient error is retried with backoff for startRetry.
func (c *Controller) checkServed(ctx context.Context) error {
	for i := range c.watched {
		delay, deadline := retryFirst, time.Now().Add(startRetry)
		for {
			_, err := c.list(ctx, i, metav1.ListOptions{Limit: 1})
			if err == nil {
				break
			}
			if !transient(err) || time.Now().Add(delay).After(deadline) {
				return err
			}
			c.tel.log.WarnContext(ctx, "the API server is unavailable: retrying", "error", err.Error(), "after", delay)
			if !sleep(ctx, delay) {
				return err
			}
			delay = min(2*delay, retryMax)
		}
	}
	return nil
}

// list lists the i-th resource once, with opts and the resource's
// selectors: the controller's own through the dynamic client, any other
// through the metadata client. It returns the list's resourceVersion.
func (c *Controller) list(ctx context.Context, i int, opts metav1.ListOptions) (string, error) {
	k := c.watched[i]
	gvr := k.gvr
	opts.LabelSelector, opts.FieldSelector = andSelector(opts.LabelSelector, k.labels), andSelector(opts.FieldSelector, k.fields)
	var list metav1.ListInterface
	var err error
	if i == 0 {
		list, err = c.clients.dynamic.Resource(gvr).Namespace(k.namespace).List(ctx, opts)
	} else {
		list, err = c.clients.metadata.Resource(gvr).Namespace(k.namespace).List(ctx, opts)
	}
	if err != nil {
		return "", fmt.Errorf("kube: listing %s: %w", gvr, err)
	}
	return list.GetResourceVersion(), nil
}

// probeName is the one name the rights probe lists: the API server reads
// a list of one name by its key, where a list of a namespace, even with a
// limit of 1, goes through every object of it (at 100,000 Memcacheds and
// their Deployments, 0.6% of kube-apiserver's CPU, the lists of two
// resources every rightsProbe, a cost that grows with the objects). It
// authorizes the list as a list of the resource, of that name: the same
// answer as for the informer's list unless a role names its objects one
// by one (resourceNames), which no informer's list passes, as the
// controller's start finds.
const probeName = "humus-kube-rights-probe"

// probeList is the rights probe's list: of probeName, in the controller's
// namespace. A controller of every namespace names one too when its
// resource is namespaced, as the objects it owns are then:
// the API server reads a list of every namespace by its key only when its
// selector names the namespace.
func (c *Controller) probeList(i int) metav1.ListOptions {
	selector := fields.OneTermEqualSelector("metadata.name", probeName)
	scope := c.scope // an owned resource's is taken to be its owner's
	if r := i - 1 - len(c.owned); r >= 0 {
		scope = c.reads[r].scope
	}
	if c.watched[i].namespace == "" && scope == Namespaced {
		selector = fields.AndSelectors(selector, fields.OneTermEqualSelector("metadata.namespace", metav1.NamespaceDefault))
	}
	return metav1.ListOptions{FieldSelector: selector.String(), Limit: 1}
}

// listAndWatch lists the i-th resource, of probeName, and opens a watch of
// it from the list's resourceVersion, as its informer does, and stops it
// at once: whether the API server lets this replica list and watch it. A
// watch without a resourceVersion would begin with every object there is
// (the API server makes and sends them until the watch stops); from the
// list's, it begins with none.
func (c *Controller) listAndWatch(ctx context.Context, i int) error {
	rv, err := c.list(ctx, i, c.probeList(i))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	k, opts := c.watched[i], metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: new(int64(1))}
	gvr := k.gvr
	var w watch.Interface
	if i == 0 {
		w, err = c.clients.dynamic.Resource(gvr).Namespace(k.namespace).Watch(ctx, opts)
	} else {
		w, err = c.clients.metadata.Resource(gvr).Namespace(k.namespace).Watch(ctx, opts)
	}
	if err != nil {
		return fmt.Errorf("kube: watching %s: %w", gvr, err)
	}
	w.Stop()
	return nil
}

// transient reports whether err may pass by itself: a 429, a 5xx, or no
// answer at all, such as a refused connection.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	return true
}

// unserved reports whether err says a resource isn't served, or may not be
// listed or watched.
func unserved(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// servedWatch sees the informers' list and watch errors while the
// controller runs. A resource that answers NotFound or Forbidden, such as
// one whose CRD was deleted or whose RBAC was taken away, is listed again
// until it answers; one that keeps answering so for unservedGrace ends
// Serve with the API server's answer, as a missing CRD does at start, so
// Synced never stays healthy on a controller that does nothing.
type servedWatch struct {
	c       *Controller
	ctx     context.Context
	fail    context.CancelCauseFunc
	running *sync.WaitGroup

	mu       sync.Mutex
	checking map[int]bool
}

func newServedWatch(c *Controller, ctx context.Context, fail context.CancelCauseFunc, running *sync.WaitGroup) *servedWatch {
	return &servedWatch{c: c, ctx: ctx, fail: fail, running: running, checking: map[int]bool{}}
}

// handler is the i-th resource's informer's watch error handler: client-go's
// own, which logs, and then a check when the error says the resource isn't
// served.
func (w *servedWatch) handler(i int) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *cache.Reflector, err error) {
		if unserved(err) {
			w.recheck(i)
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}
}

// check is a shared informer's check of the i-th resource's list and
// watch errors: a recheck when the error says the resource isn't served.
// The informer's own handler logs them.
func (w *servedWatch) check(i int) func(error) {
	return func(err error) {
		if unserved(err) {
			w.recheck(i)
		}
	}
}

// probe lists and watches each resource every rightsProbe until ctx ends,
// and rechecks one that answers NotFound or Forbidden. It runs on
// running.
func (w *servedWatch) probe() {
	w.running.Go(func() {
		t := time.NewTicker(rightsProbe)
		defer t.Stop()
		for {
			select {
			case <-w.ctx.Done():
				return
			case <-t.C:
			}
			for i := range w.c.watched {
				if err := w.c.listAndWatch(w.ctx, i); unserved(err) {
					w.recheck(i)
				}
			}
		}
	})
}

// recheck lists the i-th resource until it answers, at most once at a
// time. It runs on running, which the informer calling it is counted in.
func (w *servedWatch) recheck(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checking[i] {
		return
	}
	w.checking[i] = true
	w.running.Go(func() {
		defer func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.checking[i] = false
		}()
		if err := w.c.stillUnserved(w.ctx, i); err != nil {
			w.fail(err)
		}
	})
}

// stillUnserved lists and watches the i-th resource every second, and
// returns the API server's answer once it has answered NotFound or
// Forbidden for unservedGrace; nil once it answers otherwise, or when ctx
// is done.
func (c *Controller) stillUnserved(ctx context.Context, i int) error {
	deadline := time.Now().Add(unservedGrace)
	for {
		err := c.listAndWatch(ctx, i)
		if err == nil || !unserved(err) || ctx.Err() != nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		if !sleep(ctx, time.Second) {
			return nil
		}
	}
}
