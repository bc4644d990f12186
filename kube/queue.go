package kube

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/time/rate"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// queue is the controller's work queue of object keys: it never hands one
// key to two workers at once, and folds a key added again while it waits.
type queue = workqueue.TypedInterface[string]

// newQueue returns the controller's queue, named after it, with its own
// metrics provider in its config (never workqueue.SetProvider, which is
// global). It has no delays of its own: the controller's later holds them.
func newQueue(name string, mp workqueue.MetricsProvider) queue {
	return workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name, MetricsProvider: mp})
}

// shard is the work of one shard of the controller's objects, or of all of
// them with one shard: its queue, the waits of its keys, and the
// resource's cache its workers read. A shard handed to another replica, or
// lost, stops taking keys without shutting the controller down.
type shard struct {
	r     shardRange
	q     queue
	later *later
	store cache.Indexer
	attrs []attribute.KeyValue // the shard's, on its spans and instruments; none with one shard
	// workers, with shards, holds a token for each reconcile in flight on
	// this replica, whichever shard it is of: Settings.Workers of them.
	workers chan struct{}

	stop     chan struct{} // closed when the shard's workers are to take no more keys
	stopOnce sync.Once
}

// newShard returns the r shard's work, with a queue of its own.
func (c *Controller) newShard(r shardRange) *shard {
	var attrs []attribute.KeyValue
	if r.count > 1 {
		attrs = []attribute.KeyValue{attribute.String(attrShard, r.String())}
	}
	q := newQueue(c.name, &queueMetrics{inst: c.tel.instruments, attrs: attrs})
	return &shard{r: r, q: q, later: newLater(q), attrs: attrs, stop: make(chan struct{})}
}

// stopTaking makes the shard's workers take no more keys, and shuts its
// queue down with ShutDown, never ShutDownWithDrain: draining would hand
// the workers the backlog. ShutDown also stops the queue's own goroutines
// at once.
func (sh *shard) stopTaking() {
	sh.stopOnce.Do(func() { close(sh.stop) })
	sh.q.ShutDown()
}

// acquire takes one of the replica's workers for a reconcile of the
// shard's, waiting while all are busy, unless the shard stops taking keys
// or ctx ends first.
func (sh *shard) acquire(ctx context.Context) bool {
	if sh.workers == nil {
		return true
	}
	select {
	case sh.workers <- struct{}{}:
		return true
	case <-sh.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// release gives back what acquire took.
func (sh *shard) release() {
	if sh.workers != nil {
		<-sh.workers
	}
}

func (sh *shard) stopped() bool {
	select {
	case <-sh.stop:
		return true
	default:
		return false
	}
}

// newRetryLimiter returns how long a failed key backs off: from
// RetryBaseDelay, doubling to RetryMaxDelay, with retries overall limited
// to 10 a second, bursting to 100: client-go's
// DefaultTypedControllerRateLimiter, with the delays from Settings.
func newRetryLimiter(s Settings) workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](s.RetryBaseDelay, s.RetryMaxDelay),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// later holds each key's one pending reconcile: Result.After's, or an
// error's backoff. A change to the object, or a reconcile of it that
// succeeds, replaces it, so "again after this long, unless it changes
// first" never reconciles once more for a wait that a change already
// ended. client-go's delaying queue can't take a delay back, so the
// controller keeps its own timers.
type later struct {
	mu      sync.Mutex
	q       queue
	timers  map[string]*time.Timer
	stopped bool
}

func newLater(q queue) *later { return &later{q: q, timers: map[string]*time.Timer{}} }

// add queues key after d, in place of any wait it had.
func (l *later) add(key string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if t, ok := l.timers[key]; ok {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		l.mu.Lock()
		if l.timers[key] != t {
			l.mu.Unlock()
			return // replaced or cancelled meanwhile
		}
		delete(l.timers, key)
		l.mu.Unlock()
		l.q.Add(key)
	})
	l.timers[key] = t
}

// cancel drops key's wait, if it has one.
func (l *later) cancel(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.timers[key]; ok {
		t.Stop()
		delete(l.timers, key)
	}
}

// stop drops every wait, for good.
func (l *later) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for key, t := range l.timers {
		t.Stop()
		delete(l.timers, key)
	}
}
