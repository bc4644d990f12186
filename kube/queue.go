package kube

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
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

// newQueue returns the controller's queue, named after it, whose low keys
// are aged up after lowMaxWait (Settings.LowPriorityMaxWait), with its own
// metrics provider in its config (never workqueue.SetProvider, which is
// global), or none when mp is nil. It has no delays of its own: the
// controller's later holds them.
func newQueue(name string, lowMaxWait time.Duration, mp *queueMetrics) queue {
	cfg := priorityqueue.Config{Name: name, LowMaxWait: lowMaxWait}
	if mp != nil {
		cfg.MetricsProvider, cfg.OldestWait = mp, mp.oldestWait
	}
	return priorityqueue.New(cfg)
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
