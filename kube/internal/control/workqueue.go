package control

import (
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/z5labs/humus/kube/internal/priorityqueue"
)

// The work queue itself, what it holds (a key, at a priority), and how
// long an error's key waits to be retried; how a key gets into it is
// queue.go's.

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

// Priority is a key's priority in the queue: Normal for a change,
// Low when nothing changed (the initial list, a resync, a new leader's
// backlog).
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

// Key is u's key in the queue and the cache.
func Key(u metav1.Object) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}
