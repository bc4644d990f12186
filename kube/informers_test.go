package kube

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
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
				lw := toolscache.ListWatch{
					ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, tc.err },
					WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
						if o.SendInitialEvents != nil && *o.SendInitialEvents {
							watchLists.Add(1)
						}
						return nil, tc.err
					},
				}
				inf := cache.NewInformer(lw, nil, clusterCaches.GVR(), &unstructured.Unstructured{}, 0, toolscache.Indexers{})
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

// errRefusedAtConnect is a dial refused as net gives it, ECONNREFUSED
// within: what client-go's reflector takes for a refusal.
var errRefusedAtConnect = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// resetErrorBackoff readies apimachinery's global error backoff for a test
// whose bubble reaches utilruntime.HandleError, as client-go's watch error
// handler does. The backoff sleeps for however long time went backwards
// since its last error: made with the real clock, it would hold the first
// error in a bubble, whose clock starts in 2000, for decades of fake time.
// Handled once in a bubble of its own, where those decades pass at once,
// the last error is at the time every bubble starts at.
func resetErrorBackoff(t *testing.T) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		ctx := klog.NewContext(t.Context(), logr.Discard())
		utilruntime.HandleErrorWithContext(ctx, nil, "resetting the error backoff")
	})
}
