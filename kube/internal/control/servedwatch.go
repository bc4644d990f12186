package control

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
)

// How long a running controller waits on a resource that isn't served.
const (
	// UnservedGrace is how long a resource must keep answering NotFound or
	// Forbidden while the controller runs before Serve ends: an API server
	// that has just restarted can answer so for a moment, before its CRDs
	// and RBAC are loaded.
	UnservedGrace = 10 * time.Second

	// RightsProbe is how often a running controller lists and watches its
	// resource, and each it owns, once more: the API server checks a
	// request's rights when it begins, so an open watch goes on after
	// list and watch are taken away, until it times out (5 to 10 minutes).
	// So Serve ends within rightsProbe and unservedGrace of them taken
	// away.
	RightsProbe = 10 * time.Second
)

// servedWatch sees the informers' list and watch errors while the
// controller runs. A resource that answers NotFound or Forbidden, such as
// one whose CRD was deleted or whose RBAC was taken away, is listed again
// until it answers; one that keeps answering so for unservedGrace ends
// Serve with the API server's answer, as a missing CRD does at start, so
// Synced never stays healthy on a controller that does nothing.
type servedWatch struct {
	// resources is how many resources the controller lists and watches,
	// and listAndWatch lists and watches the i-th of them as a probe.
	resources    int
	listAndWatch func(ctx context.Context, i int) error

	ctx     context.Context
	fail    context.CancelCauseFunc
	running *sync.WaitGroup

	mu       sync.Mutex
	checking map[int]bool
}

// handler is the i-th resource's informer's watch error handler: client-go's
// own, which logs, and then a check when the error says the resource isn't
// served.
func (w *servedWatch) handler(i int) toolscache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *toolscache.Reflector, err error) {
		if unserved(err) {
			w.recheck(i)
		}
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	}
}

// check is a shared informer's check of the i-th resource's list and
// watch errors: a recheck when the error says the resource isn't served.
// The informer's own handler logs them.
func (w *servedWatch) check(i int) func(error) {
	return func(err error) {
		if unserved(err) {
			w.recheck(i)
		}
	}
}

// probe lists and watches each resource every rightsProbe until ctx ends,
// and rechecks one that answers NotFound or Forbidden. It runs on
// running.
func (w *servedWatch) probe() {
	w.running.Go(func() {
		t := time.NewTicker(RightsProbe)
		defer t.Stop()
		for {
			select {
			case <-w.ctx.Done():
				return
			case <-t.C:
			}
			for i := range w.resources {
				if err := w.listAndWatch(w.ctx, i); unserved(err) {
					w.recheck(i)
				}
			}
		}
	})
}

// recheck lists the i-th resource until it answers, at most once at a
// time. It runs on running, which the informer calling it is counted in.
func (w *servedWatch) recheck(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checking[i] {
		return
	}
	w.checking[i] = true
	w.running.Go(func() {
		defer func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.checking[i] = false
		}()
		if err := w.stillUnserved(i); err != nil {
			w.fail(err)
		}
	})
}

// stillUnserved lists and watches the i-th resource every second, and
// returns the API server's answer once it has answered NotFound or
// Forbidden for unservedGrace; nil once it answers otherwise, or when the
// watch ends.
func (w *servedWatch) stillUnserved(i int) error {
	deadline := time.Now().Add(UnservedGrace)
	for {
		err := w.listAndWatch(w.ctx, i)
		if err == nil || !unserved(err) || w.ctx.Err() != nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		if !sleep(w.ctx, time.Second) {
			return nil
		}
	}
}

// unserved reports whether err says a resource isn't served, or may not be
// listed or watched.
func unserved(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) }
