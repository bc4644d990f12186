package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"
)

var errNotServing = errors.New("kube: the controller isn't serving")

// errShutdown is the cause of Serve's stopping context when shutdown
// begins; any other cause but a done context is a failure Serve returns.
var errShutdown = errors.New("kube: shutting down")

// Serve runs the controller: kube.Controller.Serve.
func (c *Controller) Serve(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return fmt.Errorf("kube: controller %s: Serve was called twice", c.name)
	}
	defer close(c.Done)
	defer c.closeConnections()
	defer c.Ready.MarkUnhealthy(errNotServing)

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
	c.API.CloseIdle()
	if c.API.Open() == 0 {
		return
	}
	time.Sleep(closeIdleAgain)
	c.API.CloseIdle()
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
	return c.Leader.serve(ctx, stopping, inf)
}

// Shutdown, and the end of a term of leading, run on these signals. Each
// is closed or cancelled once; the third column says who waits on it.
//
//	signal                        closed or cancelled by                   waited on by
//	c.stop                        beginShutdown: Serve's context, Shutdown  Serve (cancels stopping), each worker before a key
//	stopping (serve.go)           c.stop, Serve's context, or a resource    step 1's retries, the cache sync, the leader
//	                              no longer served (with its cause)
//	informing.ctx (informing.go)  Serve, once the leader has returned       the informers
//	campaigning (lease.go)        lead's return, or the Lease lost          the elector
//	leading (lease.go)            the elector, once it holds the Lease      lead, to start the term
//	campaigned (lease.go)         the elector's return                      the term (held: no more renewals)
//	c.work (controller.go)        Shutdown, when its context ends first     the reconciles, the Lease's release
//	term.reconciles (term.go)     the Lease lost, or the term's end         the reconciles of one term
//	term.finished (term.go)       the term's workers, all returned          the term
//	c.crew (work.go)              every term's workers, all returned        Shutdown
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

// Shutdown begins the controller's shutdown: kube.Controller.Shutdown.
func (c *Controller) Shutdown(ctx context.Context) error {
	c.beginShutdown()
	if !c.started.Load() {
		return nil
	}
	select {
	case <-c.Done:
		return nil
	case <-ctx.Done():
	}
	c.cancelWork()
	c.crew.wait()
	return fmt.Errorf("kube: controller %s: shutting down: %w", c.name, ctx.Err())
}

// beginShutdown begins shutdown: it stops taking keys.
func (c *Controller) beginShutdown() { c.stopOnce.Do(func() { close(c.stop) }) }

// stopped reports whether shutdown has begun.
func (c *Controller) stopped() bool { return closed(c.stop) }
