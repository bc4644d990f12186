package kube

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube/internal/priorityqueue"
)

// worker takes keys from q and reconciles them until q shuts down: the
// canonical controller loop. A key taken once shutdown has begun is marked
// done unreconciled, and left for the next leader.
func (c *Controller) worker(ctx context.Context, sh *shard) {
	for {
		item, shutdown := sh.q.Get()
		if shutdown {
			return
		}
		if c.stopped() || sh.stopped() || ctx.Err() != nil || !sh.acquire(ctx) {
			sh.q.Done(item.Key)
			continue
		}
		c.process(ctx, sh, item)
		sh.release()
	}
}

// process reconciles one key: steps 1 to 7 of How one key is reconciled,
// in the package doc, which the step comments below name.
func (c *Controller) process(ctx context.Context, sh *shard, item priorityqueue.Item) {
	key := item.Key
	defer sh.q.Done(key)
	c.inFlight.begin(key)
	defer func() {
		// An event held while the key was reconciled, and not of its own
		// writes, queues it again at once.
		if again, p, changed := c.inFlight.end(key); again {
			c.queueNow(sh, key, p, changed)
		}
	}()

	// 1. Look it up in the cache. An object that is gone needs nothing: its
	// owned resources are garbage collected, through their owner
	// references.
	cached, exists, err := sh.store.GetByKey(key)
	if err != nil || !exists {
		c.settle(sh, key)
		c.versions.forget(key)
		c.tel.handled(ctx, item.Changed, sh.attrs)
		return
	}
	u := cached.(*cachedObject)

	// Read your own writes: a cache older than this key's last write would
	// reconcile, and apply, what that write already did. The watch event
	// that brings the write queues the key again; should none come, such
	// as after the API server's resourceVersions went backwards, the write
	// is forgotten after rywBound, and the key reconciled then.
	if left, ahead := c.versions.aheadFor(key, u.GetResourceVersion()); ahead {
		sh.q.Restamp(key, item.Changed)
		sh.later.add(key, left, item.Priority)
		return
	}

	ctx, record := c.tel.start(ctx, c.kind, u, sh.attrs)
	ctx = recordingWrites(ctx, c.ownWrites)
	after, pv, err := c.reconcileOrPanic(ctx, u)
	c.conclude(ctx, sh, item, record, after, pv, err)
}

// conclude is step 7: it records how the reconcile of item ended, and
// settles its key, or waits to reconcile it again, at the priority it was
// taken at. The change the key was queued for is handled by a reconcile
// that succeeds; any other keeps its time for the next.
func (c *Controller) conclude(ctx context.Context, sh *shard, item priorityqueue.Item, record *reconcileRecord, after time.Duration, pv *panicValue, err error) {
	key := item.Key
	switch {
	case pv != nil:
		// 7. A panic is recovered, recorded and forgotten: a retry would run
		// the same code on the same object, and panic the same way.
		record.panicked(pv)
		c.settle(sh, key)
	case errors.Is(err, errStale):
		// The cache's object was deleted, or replaced by a new one of the
		// same name: the watch event that says so queues the key again.
		record.stale(err)
		sh.q.Restamp(key, item.Changed)
		c.settle(sh, key)
	case err != nil:
		// 7. An error retries the object after a backoff of its own.
		record.failed(err)
		sh.q.Restamp(key, item.Changed)
		sh.later.add(key, c.retry.When(key), item.Priority)
	default:
		record.succeeded()
		c.tel.handled(ctx, item.Changed, sh.attrs)
		c.settle(sh, key)
		if after > 0 {
			sh.later.add(key, after, item.Priority)
		}
	}
}

// settle forgets key's backoff and any wait it had.
func (c *Controller) settle(sh *shard, key string) {
	c.retry.Forget(key)
	sh.later.cancel(key)
}

// reconcileOrPanic runs steps 2 to 6, recovering a panic in the end user's
// code.
func (c *Controller) reconcileOrPanic(ctx context.Context, u *cachedObject) (after time.Duration, pv *panicValue, err error) {
	defer func() {
		if r := recover(); r != nil {
			pv = &panicValue{value: r, stack: debug.Stack()}
		}
	}()
	after, err = c.reconcile(ctx, u)
	return after, nil, err
}

// reconcile runs steps 2 to 6 for u: the decode, the finalizer, the
// Reconciler and the status.
func (c *Controller) reconcile(ctx context.Context, u *cachedObject) (time.Duration, error) {
	deleting := u.GetDeletionTimestamp() != nil
	hasFinalizer := c.finalizer != "" && slices.Contains(u.GetFinalizers(), c.finalizer)
	if deleting && !hasFinalizer {
		// 4. Leave an object that is being deleted alone: without Finalize,
		// or once its finalizer has run, there is nothing to do, not even a
		// decode.
		return 0, nil
	}

	// 2. Decode it: the copy is the end user's. An object that can't be
	// decoded gets no finalizer, and a deleting one keeps it: either is
	// retried with backoff, its error naming the object and the field.
	obj, err := c.objType.decode(u)
	if err != nil {
		return 0, err
	}
	if err := obj.statusErr(); err != nil {
		// The status is the controller's own output: the status apply
		// mends it.
		c.tel.log.WarnContext(ctx, "the status can't be decoded: reconciling from a zero status", "error", err.Error())
	}

	// 3. Handle the finalizer: one arm for each of its states.
	rv := u.GetResourceVersion()
	switch {
	case c.finalizer == "":
		// No Finalize: nothing to add, nothing to run.
	case deleting && hasFinalizer:
		// Finalize instead of reconciling, then remove the finalizer.
		if err := obj.finalize(ctx); err != nil {
			return 0, err
		}
		_, err := c.applyFinalizer(ctx, u, false)
		return 0, err
	case hasFinalizer:
		// Not being deleted, and the finalizer is there: reconcile.
	default:
		// Not being deleted, without the finalizer: add it before the
		// first reconcile.
		if rv, err = c.applyFinalizer(ctx, u, true); err != nil {
			return 0, err
		}
	}

	// 5. Call the Reconciler.
	status, after, err := obj.reconcile(ctx)

	// 6. Apply the status, whether or not Reconcile returned an error.
	if status != nil {
		if applyErr := c.applyStatus(ctx, u, rv, status); applyErr != nil {
			err = errors.Join(err, applyErr)
		}
	}
	return after, err
}

// key is u's key in the queue and the cache.
func key(u metav1.Object) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// wrapf names the object an error is about.
func wrapf(u *cachedObject, err error, format string) error {
	return fmt.Errorf("kube: "+format+" %s: %w", describe(u), err)
}
