package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// TestAnInformerRefusedByTheAPIServerStopsAtOnce: while every connection is
// refused, or every request throttled, an informer's reflector backs off,
// up to 30 s and more; stopped, it returns at once, so Serve, which waits
// for its informers, does too. client-go's reflector sleeps out the backoff
// of a refused or throttled watch-list request without looking at its
// context; newInformer keeps it from that sleep.
func TestAnInformerRefusedByTheAPIServerStopsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"refused", errRefusedAtConnect},
		{"throttled", apierrors.NewTooManyRequests("busy", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resetErrorBackoff(t)
			synctest.Test(t, func(t *testing.T) {
				var watchLists atomic.Int32
				lw := cache.ListWatch{
					ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, tc.err },
					WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
						if o.SendInitialEvents != nil && *o.SendInitialEvents {
							watchLists.Add(1)
						}
						return nil, tc.err
					},
				}
				inf := newInformer(lw, nil, clusterCaches.GVR(), &unstructured.Unstructured{}, 0, cache.Indexers{})
				ctx, stop := context.WithCancel(klog.NewContext(t.Context(), logr.Discard()))
				done := make(chan struct{})
				go func() {
					defer close(done)
					inf.RunWithContext(ctx)
				}()
				time.Sleep(2 * time.Minute) // the backoff has grown to its cap
				stop()
				stopped := time.Now()
				<-done
				if took := time.Since(stopped); took != 0 {
					t.Errorf("the informer returned %s after it was stopped, want at once", took)
				}
				if n := watchLists.Load(); n < 5 {
					t.Errorf("%d watch-list requests in 2 minutes, want the informer to keep trying", n)
				}
			})
		})
	}
}

// TestOnlyARefusedWatchListIsHandedBackAsAnotherError: the reflector sleeps
// without looking at its context only after a watch-list request refused
// at connect or throttled; every other error, and those of any other
// request, are kept as they are.
func TestOnlyARefusedWatchListIsHandedBackAsAnotherError(t *testing.T) {
	watchList := metav1.ListOptions{SendInitialEvents: new(true)}
	for _, tc := range []struct {
		name string
		o    metav1.ListOptions
		err  error
		same bool
	}{
		{"a refused watch-list", watchList, errRefusedAtConnect, false},
		{"a refused watch", metav1.ListOptions{}, errRefusedAtConnect, true},
		{"a refused watch without initial events", metav1.ListOptions{SendInitialEvents: new(false)}, errRefusedAtConnect, true},
		{"a watch-list throttled", watchList, apierrors.NewTooManyRequests("busy", 1), false},
		{"a watch throttled", metav1.ListOptions{}, apierrors.NewTooManyRequests("busy", 1), true},
		{"a watch-list refused as forbidden", watchList, apierrors.NewForbidden(clusterCaches.GVR().GroupResource(), "", errors.New("no")), true},
		{"no error", watchList, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := refusedWatchList(tc.o, tc.err)
			if tc.same {
				if got != tc.err { //nolint:errorlint // the very error, unwrapped
					t.Errorf("refusedWatchList = %v, want %v itself", got, tc.err)
				}
				return
			}
			if got == nil || utilnet.IsConnectionRefused(got) || apierrors.IsTooManyRequests(got) || got.Error() != tc.err.Error() {
				t.Errorf("refusedWatchList = %#v, want the text %q, neither a refusal nor a 429", got, tc.err.Error())
			}
		})
	}
}
