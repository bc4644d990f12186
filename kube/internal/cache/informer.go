package cache

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// newInformer is an informer of what lw lists and watches, through client,
// which says whether it can stream a list in a watch, with indexers.
func NewInformer(lw toolscache.ListWatch, client any, gvr schema.GroupVersionResource, example runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	lw = MarkingListed(lw) // a relist's versions are no own writes (ownwrites.go)
	watchFn := lw.WatchFuncWithContext
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		w, err := watchFn(ctx, o)
		return w, refusedWatchList(o, err)
	}
	return toolscache.NewSharedIndexInformerWithOptions(
		toolscache.ToListWatcherWithWatchListSemantics(&lw, client),
		example,
		toolscache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: indexers, ObjectDescription: gvr.String()},
	)
}

// listing is a client's typed list as an informer's list.
func Listing[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error)) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		l, err := list(ctx, o)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// refusedWatchList keeps an informer stoppable while the API server refuses
// its connections or throttles it. When a request to stream a list in a
// watch is refused at connect, or answered 429 Too Many Requests (after the
// REST client's own retries), client-go's reflector (v0.37) sleeps out its
// backoff, which grows to 30 s and is jittered up to twice that, without
// looking at its context; Serve, which waits for its informers to stop,
// would wait that long too, and return past the lost deadline. So that
// error is handed back as one the reflector doesn't retry in place: it
// then lists, as it did before it streamed lists, and when that fails too
// it waits out the same backoff in its run loop, which stops with the
// informer. Any other error, and any other request's, is err itself.
func refusedWatchList(o metav1.ListOptions, err error) error {
	if err == nil || o.SendInitialEvents == nil || !*o.SendInitialEvents {
		return err
	}
	if !utilnet.IsConnectionRefused(err) && !apierrors.IsTooManyRequests(err) {
		return err
	}
	return refusedError{err.Error()}
}

// refusedError is a refused request's error text, without the error.
type refusedError struct{ text string }

func (e refusedError) Error() string { return e.text }
