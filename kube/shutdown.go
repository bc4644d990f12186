package kube

import (
	"context"
	"fmt"
)

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
//	c.crew (reconcile.go)         every term's workers, all returned        Shutdown
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
