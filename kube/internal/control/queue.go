package control

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/z5labs/humus/kube/internal/priorityqueue"
)

// A key is queued here, whatever queues it:
//
//   - queueNow (doorway.go), which a change queues its key through, in
//     place of any wait it had; queueUnlessOwn, the same unless the change
//     is a reconcile's own write (ownwrites.go tells), and inFlight, which
//     holds a change that comes while its key is reconciled until the
//     reconcile ends.
//   - later, the one wait of each key: Result.After's, an error's backoff
//     (newRetryLimiter), or reading its own write.
//   - The work queue itself, in two priorities, over
//     kube/internal/priorityqueue.

// Queue is the controller's work queue of object keys, in two
// priorities (internal/priorityqueue): it never hands one key to two
// workers at once, folds a key added again while it waits, and hands out a
// key a change queued before the backlog of a cold start.
type Queue interface {
	Add(key string, p Priority, changed time.Time)
	Get() (priorityqueue.Item, bool)
	Done(key string)
	Restamp(key string, changed time.Time)
	Lead(now time.Time, keep time.Duration)
	Len() int
	ShutDown()
}

type Priority = priorityqueue.Priority

const (
	Low    = priorityqueue.Low
	Normal = priorityqueue.Normal
)

// NewQueue returns the controller's queue, named after it, whose low keys
// are aged up after lowMaxWait (Settings.LowPriorityMaxWait), with its own
// metrics provider in its config (never workqueue.SetProvider, which is
// global), or none when mp is nil. It has no delays of its own: the
// controller's later holds them.
func NewQueue(name string, lowMaxWait time.Duration, mp *queueMetrics) Queue {
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

// inFlight keeps, for each key being reconciled, the events held until its
// reconcile ends.
type inFlight struct {
	mu sync.Mutex
	m  map[string][]heldEvent
}

// heldEvent is an event held while its key is reconciled.
type heldEvent struct {
	redundant func() bool // reports whether the event was the reconcile's own
	p         Priority
	changed   time.Time
}

func (f *inFlight) Begin(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string][]heldEvent{}
	}
	f.m[key] = nil
}

// hold keeps an event of key's until its reconcile ends, and reports
// whether key is being reconciled.
func (f *inFlight) hold(key string, e heldEvent) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	held, ok := f.m[key]
	if ok {
		f.m[key] = append(held, e)
	}
	return ok
}

// End reports whether any event held for key's reconcile was not its own,
// so the key is to be queued again, at the highest priority of those, for
// the oldest change among them. Each is judged, in the order it came.
func (f *inFlight) End(key string) (again bool, p Priority, changed time.Time) {
	f.mu.Lock()
	held := f.m[key]
	delete(f.m, key)
	f.mu.Unlock()
	for _, e := range held {
		if e.redundant() {
			continue
		}
		again, p = true, max(p, e.p)
		if !e.changed.IsZero() && (changed.IsZero() || e.changed.Before(changed)) {
			changed = e.changed
		}
	}
	return again, p, changed
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
	q       Queue
	timers  map[string]pending
	stopped bool
}

type pending struct {
	t *time.Timer
	p Priority
}

func NewLater(q Queue) *later { return &later{q: q, timers: map[string]pending{}} }

// add queues key at p after d, in place of any wait it had, at the higher
// of the two priorities.
func (l *later) add(key string, d time.Duration, p Priority) {
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
func (l *later) cancel(key string) (Priority, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.timers[key]
	if ok {
		w.t.Stop()
		delete(l.timers, key)
	}
	return w.p, ok
}

// Stop drops every wait, for good.
func (l *later) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for key, w := range l.timers {
		w.t.Stop()
		delete(l.timers, key)
	}
}

// Key is u's key in the queue and the cache.
func Key(u metav1.Object) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}
