package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/z5labs/humus"
)

// Before returns one humus.Service that serves s before the Services
// then, and stops it after them: the order a conversion webhook and the
// controllers whose requests it converts need, which humus.Run, starting
// and stopping its Services together, doesn't give. Return it from Init
// in place of s and of then, not beside them.
//
// Its Serve listens, and calls each of then's Serve only once s is ready:
// listening, with the certificate NewService loaded. So a controller among
// then finds this process's webhook answering from its first list, watch
// or write, wherever the API server's calls reach it: a URL naming this
// process, or a Service once the pod is among its endpoints, which its
// readiness decides (make that Ready's, not a controller's Synced, whose
// caches may fill through the webhook).
// On the way down, s goes on serving until every one of then has stopped:
// it serves on a context of its own, which keeps the values of Serve's
// but not its end, and only Shutdown ends it. Shutdown shuts then down
// first, waits within its ctx for their Shutdowns and Serves to return,
// and only then stops s and lets its requests in flight finish. So a
// controller's last reconciles, whose status applies the API server
// converts through the webhook, are answered. Serve, once its context is
// done, returns once then's Serves have, with s still serving, for
// Shutdown to stop.
//
// When s fails to listen, Serve returns its error, and none of then is
// served, nor shut down. When s fails while then serve, Serve returns its
// error at once, having cancelled their context, and Shutdown waits for
// their Serves, within its ctx, as humus.Run waits for any Service's: so a
// reconcile that outlasts its context holds nothing past the App's grace
// period. When one of then's Serve returns before Serve's context is done,
// with an error or not, Serve returns the same, as that Service would end
// the App under humus.Run, and s, with the rest of then, goes on serving
// until Shutdown. Each error, of any Serve or Shutdown, is returned once,
// by Serve or by Shutdown.
func (s *Service) Before(then ...humus.Service) humus.Service {
	return &ordered{
		hook:     s,
		then:     then,
		hookDone: make(chan struct{}),
		oneDone:  make(chan struct{}),
		thenDone: make(chan struct{}),
	}
}

// Services are the Services o serves: the webhook's, then then's, for a
// caller that asks what a Service holds, such as kube.MarshalRBAC does.
func (o *ordered) Services() []humus.Service {
	return append([]humus.Service{o.hook}, o.then...)
}

// ordered is the Service Before returns.
type ordered struct {
	hook *Service
	then []humus.Service

	mu       sync.Mutex
	served   bool               // Serve was called
	stopping bool               // Shutdown was called: then serve no more
	stopHook context.CancelFunc // the end of s's context, once s serves
	stopThen context.CancelFunc // the end of then's context, once they serve
	pending  []error            // errors not yet returned

	hookDone chan struct{} // closed once s has stopped, or failed to listen
	oneDone  chan struct{} // closed once any of then's Serves has returned
	thenDone chan struct{} // closed once all of then's Serves have returned
}

func (o *ordered) Serve(ctx context.Context) error {
	o.mu.Lock()
	if o.served {
		o.mu.Unlock()
		return fmt.Errorf("webhook: Before: the Service on %s has already served", o.hook.addr)
	}
	o.served = true
	if o.stopping || ctx.Err() != nil {
		// Shutdown came first, or the App stopped before this Serve:
		// nothing to open the port for.
		o.mu.Unlock()
		return nil
	}
	for i, svc := range o.then {
		if svc == nil {
			o.mu.Unlock()
			return fmt.Errorf("webhook: the Service on %s: Before was given a nil Service at index %d", o.hook.addr, i)
		}
	}
	hookCtx, stopHook := context.WithCancel(context.WithoutCancel(ctx))
	o.stopHook = stopHook
	o.mu.Unlock()

	l, err := o.hook.listen(hookCtx)
	if err != nil {
		close(o.hookDone)
		if hookCtx.Err() != nil {
			return nil // Shutdown came first
		}
		return err
	}
	go func() {
		defer close(o.hookDone)
		o.add(o.hook.serve(hookCtx, l))
	}()

	if !o.startThen(ctx) {
		// Stopped while s was listening, before then started: none of
		// then serves, and s serves until Shutdown stops it.
		return o.take()
	}
	select {
	case <-o.hookDone:
		// s stopped: it failed, or Shutdown stopped it.
		o.stopThen()
		return o.take()
	case <-o.oneDone:
		if ctx.Err() == nil {
			// One of then ended, as a Service ends the App under Run.
			return o.take()
		}
	case <-ctx.Done():
	}
	// Stopping: then's Serves return, and s serves on until Shutdown has
	// shut them down.
	select {
	case <-o.thenDone:
	case <-o.hookDone:
	}
	return o.take()
}

// startThen runs each of then's Serve, on a context ending with ctx,
// unless ctx is done or Shutdown was called, and reports whether it did.
func (o *ordered) startThen(ctx context.Context) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopping || ctx.Err() != nil {
		return false
	}
	thenCtx, stopThen := context.WithCancel(ctx)
	o.stopThen = stopThen
	var served sync.WaitGroup
	var once sync.Once
	for _, svc := range o.then {
		served.Go(func() {
			o.add(svc.Serve(thenCtx))
			once.Do(func() { close(o.oneDone) })
		})
	}
	go func() {
		served.Wait()
		close(o.thenDone)
	}()
	return true
}

func (o *ordered) Shutdown(ctx context.Context) error {
	o.mu.Lock()
	o.stopping = true
	stopThen, stopHook := o.stopThen, o.stopHook
	o.mu.Unlock()

	if stopThen != nil {
		stopThen()
		o.shutdownThen(ctx)
	}
	if stopHook != nil {
		stopHook()
	}
	o.add(o.hook.Shutdown(ctx))
	if stopHook != nil && !wait(ctx, o.hookDone) {
		o.add(fmt.Errorf("webhook: the Service on %s didn't stop within the shutdown: %w", o.hook.addr, ctx.Err()))
	}
	return o.take()
}

// shutdownThen calls each of then's Shutdown with ctx, at once, and waits
// for those and for their Serves to return, until ctx is done.
func (o *ordered) shutdownThen(ctx context.Context) {
	var all sync.WaitGroup
	for _, svc := range o.then {
		all.Go(func() { o.add(svc.Shutdown(ctx)) })
	}
	done := make(chan struct{})
	go func() {
		all.Wait()
		<-o.thenDone
		close(done)
	}()
	if !wait(ctx, done) {
		o.add(fmt.Errorf("webhook: the Services after the one on %s didn't stop within the shutdown, which stops it regardless: %w", o.hook.addr, ctx.Err()))
	}
}

// wait reports whether done was closed before ctx was done. When both
// were, done wins.
func wait(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-ctx.Done():
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// add keeps err, if any, for Serve or Shutdown to return.
func (o *ordered) add(err error) {
	if err == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = append(o.pending, err)
}

// take returns the errors kept and not yet returned, as one.
func (o *ordered) take() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	err := errors.Join(o.pending...)
	o.pending = nil
	return err
}
