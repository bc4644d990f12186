package kube

import (
	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// queue is the controller's work queue of object keys: it never hands one
// key to two workers at once, and folds a key added again while it waits.
type queue = workqueue.TypedRateLimitingInterface[string]

// newQueue returns the controller's queue, named after it, with its own
// metrics provider in its config (never workqueue.SetProvider, which is
// global). A failed key backs off from RetryBaseDelay, doubling to
// RetryMaxDelay, and retries overall are limited to 10 a second, bursting
// to 100: client-go's DefaultTypedControllerRateLimiter, with the delays
// from Settings.
//
// The delaying queue under it logs, if its goroutine ever crashes, through
// logger rather than klog's global one.
func newQueue(name string, s Settings, mp workqueue.MetricsProvider, logger logr.Logger) queue {
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](s.RetryBaseDelay, s.RetryMaxDelay),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{
		Name:            name,
		MetricsProvider: mp,
		DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
			Logger:          &logger,
			Name:            name,
			MetricsProvider: mp,
		}),
	})
}
