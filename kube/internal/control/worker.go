package control

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	"go.opentelemetry.io/otel/attribute"

	"github.com/z5labs/humus/kube/internal/priorityqueue"
)

// The workers of a term of leading: the worker loop, and how one key is
// reconciled, in the steps package kube's doc names (reconcile). The work
// they share and the crew of Settings.Workers across the replica's terms
// are in work.go; what a user writes, the Reconciler, is package kube's.

// NewWork returns a term's work, with a queue of its own, whose spans and
// instruments carry attrs.
func (c *Controller) NewWork(attrs []attribute.KeyValue) *Work {
	q := NewQueue(c.name, c.settings.LowPriorityMaxWait, newQueueMetrics(c.tel.instruments, c.name, attrs))
	return &Work{Q: q, Later: NewLater(q), attrs: attrs, Stop: make(chan struct{})}
}

// startWorkers begins w's work for a term of leading (w.lead), and starts
// Settings.Workers workers on it, reconciling with ctx; unless Shutdown
// waits for every worker already: then w takes no key. The channel it
// returns is closed once its workers have returned.
func (c *Controller) startWorkers(ctx context.Context, w *Work, proof *Proof) <-chan struct{} {
	var workers sync.WaitGroup
	c.crew.mu.Lock()
	if c.crew.closed {
		w.stopTaking()
	} else {
		w.lead(c.settings.LeaderElection)
		for range c.settings.Workers {
			workers.Add(1)
			c.crew.running.Go(func() {
				defer workers.Done()
				c.worker(ctx, w, proof)
			})
		}
	}
	c.crew.mu.Unlock()
	finished := make(chan struct{})
	go func() {
		workers.Wait()
		close(finished)
	}()
	return finished
}

// worker takes keys from w's queue and reconciles them until it shuts
// down: the canonical controller loop. A key taken once shutdown has begun
// is marked done unreconciled, and left for the next leader.
func (c *Controller) worker(ctx context.Context, w *Work, proof *Proof) {
	for {
		item, shutdown := w.Q.Get()
		if shutdown {
			return
		}
		if c.stopped() || w.stopped() || ctx.Err() != nil || !c.crew.acquire(ctx, w) {
			w.Q.Done(item.Key)
			continue
		}
		c.Process(ctx, w, proof, item)
		c.crew.release()
	}
}

// Process reconciles one key: steps 1 to 7 of How one key is reconciled,
// in the package doc, which the step comments below name.
func (c *Controller) Process(ctx context.Context, w *Work, proof *Proof, item priorityqueue.Item) {
	key := item.Key
	defer w.Q.Done(key)
	c.InFlight.begin(key)
	defer func() {
		// An event held while the key was reconciled, and not of its own
		// writes, queues it again at once.
		if again, p, changed := c.InFlight.end(key); again {
			c.queueNow(w, key, p, changed)
		}
	}()

	// 1. Look it up in the cache. An object that is gone needs nothing: its
	// owned resources are garbage collected, through their owner
	// references.
	cached, exists, err := w.Store.GetByKey(key)
	if err != nil || !exists {
		c.settle(w, key)
		c.Versions.forget(key)
		c.tel.handled(ctx, item.Changed, w.attrs)
		return
	}
	u := cached.(*cache.Object)

	// Read your own writes: a cache older than this key's last write would
	// reconcile, and apply, what that write already did. The watch event
	// that brings the write queues the key again; should none come, such
	// as after the API server's resourceVersions went backwards, the write
	// is forgotten after rywBound, and the key reconciled then.
	if left, ahead := c.Versions.AheadFor(key, u.GetResourceVersion()); ahead {
		w.Q.Restamp(key, item.Changed)
		w.Later.add(key, left, item.Priority)
		return
	}

	ctx, record := c.tel.start(ctx, c.Kind, u, w.attrs)
	ctx = RecordingWrites(ctx, c.OwnWrites)
	after, pv, err := c.reconcileOrPanic(ctx, proof, u)
	c.conclude(ctx, w, item, record, after, pv, err)
}

// conclude is step 7: it records how the reconcile of item ended, and
// settles its key, or waits to reconcile it again, at the priority it was
// taken at. The change the key was queued for is handled by a reconcile
// that succeeds; any other keeps its time for the next.
func (c *Controller) conclude(ctx context.Context, w *Work, item priorityqueue.Item, record *reconcileRecord, after time.Duration, pv *PanicValue, err error) {
	key := item.Key
	switch {
	case pv != nil:
		// 7. A panic is recovered, recorded and forgotten: a retry would run
		// the same code on the same object, and panic the same way.
		record.panicked(pv)
		c.settle(w, key)
	case errors.Is(err, ErrStale):
		// The cache's object was deleted, or replaced by a new one of the
		// same name: the watch event that says so queues the key again.
		record.stale(err)
		w.Q.Restamp(key, item.Changed)
		c.settle(w, key)
	case errors.As(err, new(*timeoutError)):
		// 7. A reconcile that ran past Settings.ReconcileTimeout and failed
		// is retried as an error is (one that returned nil late succeeded).
		record.timedOut(err)
		w.Q.Restamp(key, item.Changed)
		w.Later.add(key, c.retry.When(key), item.Priority)
	case err != nil:
		// 7. An error retries the object after a backoff of its own.
		record.failed(err)
		w.Q.Restamp(key, item.Changed)
		w.Later.add(key, c.retry.When(key), item.Priority)
	default:
		record.succeeded()
		c.tel.handled(ctx, item.Changed, w.attrs)
		c.settle(w, key)
		if after > 0 {
			w.Later.add(key, after, item.Priority)
		}
	}
}

// settle forgets key's backoff, its failures' records and any wait it had.
func (c *Controller) settle(w *Work, key string) {
	c.retry.Forget(key)
	c.tel.failures.forget(key)
	w.Later.cancel(key)
}

// reconcileOrPanic runs steps 2 to 6, recovering a panic in the end user's
// code.
func (c *Controller) reconcileOrPanic(ctx context.Context, proof *Proof, u *cache.Object) (after time.Duration, pv *PanicValue, err error) {
	defer func() {
		if r := recover(); r != nil {
			pv = &PanicValue{Value: r, Stack: debug.Stack()}
		}
	}()
	after, err = c.reconcile(ctx, proof, u)
	return after, nil, err
}

// reconcile runs steps 2 to 6 for u: the decode, the finalizer, the
// Reconciler and the status.
func (c *Controller) reconcile(ctx context.Context, proof *Proof, u *cache.Object) (time.Duration, error) {
	deleting := u.GetDeletionTimestamp() != nil
	hasFinalizer := c.Finalizer != "" && slices.Contains(u.GetFinalizers(), c.Finalizer)
	if deleting && !hasFinalizer {
		// 4. Leave an object that is being deleted alone: without Finalize,
		// or once its finalizer has run, there is nothing to do, not even a
		// decode.
		return 0, nil
	}

	// 2. Decode it: the copy is the end user's. An object that can't be
	// decoded gets no finalizer, and a deleting one keeps it: either is
	// retried with backoff, its error naming the object and the field.
	obj, err := c.objType.Decode(u)
	if err != nil {
		return 0, err
	}
	if err := obj.StatusErr(); err != nil {
		// The status is the controller's own output: the status apply
		// mends it.
		c.tel.log.WarnContext(ctx, "the status can't be decoded: reconciling from a zero status", "error", err.Error())
	}

	// 3. Handle the finalizer: one arm for each of its states.
	rv := u.GetResourceVersion()
	switch {
	case c.Finalizer == "":
		// No Finalize: nothing to add, nothing to run.
	case deleting && hasFinalizer:
		// Finalize instead of reconciling, then remove the finalizer.
		bounded, end := c.bounded(ctx)
		if err := end(obj.Finalize(bounded)); err != nil {
			return 0, err
		}
		_, err := c.ApplyFinalizer(ctx, proof, u, false)
		return 0, err
	case hasFinalizer:
		// Not being deleted, and the finalizer is there: reconcile.
	default:
		// Not being deleted, without the finalizer: add it before the
		// first reconcile.
		if rv, err = c.ApplyFinalizer(ctx, proof, u, true); err != nil {
			return 0, err
		}
	}

	// 5. Call the Reconciler, within Settings.ReconcileTimeout.
	bounded, end := c.bounded(ctx)
	status, after, err := obj.Reconcile(bounded)
	err = end(err)

	// 6. Apply the status, whether or not Reconcile returned an error.
	if status != nil {
		if applyErr := c.ApplyStatus(ctx, proof, u, rv, status); applyErr != nil {
			err = errors.Join(err, applyErr)
		}
	}
	return after, err
}

// bounded is ctx, ended after Settings.ReconcileTimeout when it has one,
// for the end user's code, and what to call with that code's error once
// it has returned: the error, or, when the bound ended ctx first and the
// code then returned an error, a *timeoutError wrapping it. A nil is a
// success whenever it comes: a Finalize's f that cleaned up after the
// bound has cleaned up, and a Reconciler's Result.After holds. Its overrun
// is recorded, on the span and in a WARN record.
func (c *Controller) bounded(ctx context.Context) (context.Context, func(error) error) {
	d := c.settings.ReconcileTimeout
	if d <= 0 {
		return ctx, func(err error) error { return err }
	}
	limit := &timeoutError{after: d}
	start := time.Now()
	bounded, cancel := context.WithTimeoutCause(ctx, d, limit)
	return bounded, func(err error) error {
		defer cancel()
		if context.Cause(bounded) != limit { //nolint:errorlint // the very error the bound ends it with
			return err
		}
		if err == nil {
			c.tel.overran(ctx, d, time.Since(start))
			return nil
		}
		limit.err = err
		return limit
	}
}

// timeoutError is a reconcile that Settings.ReconcileTimeout ended: the
// error it returned then, if any, wrapped.
type timeoutError struct {
	after time.Duration
	err   error
}

func (e *timeoutError) Error() string {
	if e.err == nil || errors.Is(e.err, context.DeadlineExceeded) {
		return fmt.Sprintf("kube: the reconcile timed out after %v", e.after)
	}
	return fmt.Sprintf("kube: the reconcile timed out after %v: %v", e.after, e.err)
}

func (e *timeoutError) Unwrap() error { return e.err }

// wrapf names the object an error is about.
func wrapf(u *cache.Object, err error, format string) error {
	return fmt.Errorf("kube: "+format+" %s: %w", Describe(u), err)
}
