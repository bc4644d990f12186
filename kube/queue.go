package kube

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/time/rate"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/z5labs/humus/kube/internal/priorityqueue"
)

// queue is the controller's work queue of object keys, in two
// priorities (internal/priorityqueue): it never hands one key to two
// workers at once, folds a key added again while it waits, and hands out a
// key a change queued before the backlog of a cold start.
type queue interface {
	Add(key string, p priority, changed time.Time)
	Get() (priorityqueue.Item, bool)
	Done(key string)
	Restamp(key string, changed time.Time)
	Lead(now time.Time, keep time.Duration)
	Len() int
	ShutDown()
}

type priority = priorityqueue.Priority

const (
	low    = priorityqueue.Low
	normal = priorityqueue.Normal
)

// newQueue returns the controller's queue, named after it, with its own
// metrics provider in its config (never workqueue.SetProvider, which is
// global), or none when mp is nil. It has no delays of its own: the
// controller's later holds them.
func newQueue(name string, mp *queueMetrics) queue {
	cfg := priorityqueue.Config{Name: name}
	if mp != nil {
		cfg.MetricsProvider, cfg.OldestWait = mp, mp.oldestWait
	}
	return priorityqueue.New(cfg)
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
	q := newQueue(c.name, newQueueMetrics(c.tel.instruments, c.name, attrs))
	return &shard{r: r, q: q, later: newLater(q), attrs: attrs, stop: make(chan struct{})}
}

// lead begins a term of leading: the workers are about to start. Keys that
// have waited at normal priority for longer than the Lease's duration, a
// former leader's to handle, move down to low priority, as the new
// leader's backlog; those queued since then, which the former leader may
// never have taken, stay.
func (sh *shard) lead(le LeaderElection) { sh.q.Lead(time.Now(), le.LeaseDuration) }

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

// later holds each key's one pending reconcile: Result.After's, an
// error's backoff, or the wait to read its own write. A change to the
// object, or a reconcile of it that succeeds, replaces it, so "again after
// this long, unless it changes first" never reconciles once more for a
// wait that a change already ended. client-go's delaying queue can't take
// a delay back, so the controller keeps its own timers. A wait keeps the
// priority the key was taken at, and queues it at that priority when it
// ends.
type later struct {
	mu      sync.Mutex
	q       queue
	timers  map[string]pending
	stopped bool
}

type pending struct {
	t *time.Timer
	p priority
}

func newLater(q queue) *later { return &later{q: q, timers: map[string]pending{}} }

// add queues key at p after d, in place of any wait it had, at the higher
// of the two priorities.
func (l *later) add(key string, d time.Duration, p priority) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if w, ok := l.timers[key]; ok {
		w.t.Stop()
		p = max(p, w.p)
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		l.mu.Lock()
		if l.timers[key].t != t {
			l.mu.Unlock()
			return // replaced or cancelled meanwhile
		}
		delete(l.timers, key)
		l.mu.Unlock()
		l.q.Add(key, p, time.Time{})
	})
	l.timers[key] = pending{t: t, p: p}
}

// cancel drops key's wait, if it has one, and returns its priority and
// whether it had one.
func (l *later) cancel(key string) (priority, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.timers[key]
	if ok {
		w.t.Stop()
		delete(l.timers, key)
	}
	return w.p, ok
}

// stop drops every wait, for good.
func (l *later) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for key, w := range l.timers {
		w.t.Stop()
		delete(l.timers, key)
	}
}
