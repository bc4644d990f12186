package control

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	toolscache "k8s.io/client-go/tools/cache"
)

// Work is what a term of leading's workers work on: its queue of keys,
// the waits of its keys, and the resource's cache they read. The one
// Lease's is the replica's from its start, queued while it stands by; a
// shard's is its term's own. A shard's term that ends stops taking keys
// without shutting the controller down.
type Work struct {
	Q     Queue
	Later *later
	Store toolscache.Indexer
	attrs []attribute.KeyValue // on its spans and instruments: a shard's, or none

	Stop     chan struct{} // closed when its workers are to take no more keys
	stopOnce sync.Once
}

// lead begins a term of leading: the workers are about to start. Keys that
// have waited at normal priority for longer than the Lease's duration, a
// former leader's to handle, move down to low priority, as the new
// leader's backlog; those queued since then, which the former leader may
// never have taken, stay.
func (w *Work) lead(le LeaderElection) { w.Q.Lead(time.Now(), le.LeaseDuration) }

// stopTaking makes the workers take no more keys, and shuts the queue down
// with ShutDown, never ShutDownWithDrain: draining would hand the workers
// the backlog. ShutDown also stops the queue's own goroutines at once.
func (w *Work) stopTaking() {
	w.stopOnce.Do(func() { close(w.Stop) })
	w.Q.ShutDown()
}

// stopped reports whether w's workers are to take no more keys.
func (w *Work) stopped() bool { return closed(w.Stop) }

// crew is the replica's workers, across its terms of leading: it holds a
// token for each reconcile in flight, Settings.Workers of them, whichever
// term's; and it is what Shutdown waits for, once it has cancelled their
// reconciles. No worker starts once Shutdown waits.
type crew struct {
	tokens chan struct{}

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
}

func newCrew(workers int) *crew { return &crew{tokens: make(chan struct{}, workers)} }

// wait is Shutdown's wait for every worker, once it has cancelled their
// reconciles: no worker starts after it.
func (cr *crew) wait() {
	cr.mu.Lock()
	cr.closed = true
	cr.mu.Unlock()
	cr.running.Wait()
}

// acquire takes a token for a reconcile of w's, waiting while every one is
// taken, unless w stops taking keys or ctx ends first.
func (cr *crew) acquire(ctx context.Context, w *Work) bool {
	select {
	case cr.tokens <- struct{}{}:
		return true
	default:
	}
	select {
	case cr.tokens <- struct{}{}:
		return true
	case <-w.Stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// release gives back what acquire took.
func (cr *crew) release() { <-cr.tokens }

// has reports whether w's cache holds key: whether it is of w's shard.
func (w *Work) has(key string) bool {
	_, ok, err := w.Store.GetByKey(key)
	return ok && err == nil
}
