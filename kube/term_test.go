package kube

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/internal/record"
	coordinationapiv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// A term's proof ends when it releases the Lease: an Event its last
// reconcile recorded, still waiting to be written when the replica hands
// the Lease back (the API server answered 503 meanwhile), is dropped, not
// written after the release while a standby may already hold the Lease
// (before, it was written until RenewDeadline after the last renewal).
func TestATermsProofEndsWhenItReleasesTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var mu sync.Mutex
		var released time.Time
		f.Kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if holder(a.(k8stesting.UpdateAction).GetObject().(*coordinationapiv1.Lease)) == "" {
				mu.Lock()
				released = time.Now()
				mu.Unlock()
			}
			return false, nil, nil
		})
		releasedAt := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return released
		}

		// The API server refuses the Event with a 503 until the Lease is
		// released, and takes it after.
		tel, kc, r, _ := recording(t)
		var late []time.Duration // the writes sent after the release, by how long
		kc.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if released.IsZero() {
				return true, nil, apierrors.NewServiceUnavailable("overloaded")
			}
			late = append(late, time.Since(released))
			return false, nil, nil
		})
		stopRecorder := serveRecorder(t, r)

		reconciled := make(chan struct{}, 1)
		rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
			r.Record(ctx, createdEvent("the last reconcile's"))
			select {
			case reconciled <- struct{}{}:
			default:
			}
			return Result[cacheStatus]{}, nil
		})
		ctrl := newTestController(t, f, testSettings(), rec)
		stop := served(t, ctrl)
		<-reconciled
		synctest.Wait() // the Event's first write is refused
		if err := stop(); err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
		if releasedAt().IsZero() {
			t.Fatal("the Lease wasn't released")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		stopped(t, stopRecorder)

		mu.Lock()
		if len(late) != 0 {
			t.Errorf("Event writes sent after the Lease's release, by %v: their proof outlived the term", late)
		}
		mu.Unlock()
		if got := storedEvents(t, kc, "shop"); len(got) != 0 {
			t.Errorf("Events written = %d, want none: the proof ended with the release", len(got))
		}
		if got := eventOutcomes(t, tel); got[record.Dropped+"/"+record.DropNotLeading] != 1 {
			t.Errorf("humus.kube.controller.events = %v, want the Event dropped, %s", got, record.DropNotLeading)
		}
	})
}

// An Event whose write began under a term's proof is answered before the
// term releases its Lease (issue 44, point 6): the release ends the proof,
// so no write starts after it, and waits for the writes in flight. Before,
// the write kept a copy of the proof's deadline and was answered, and
// stored, seconds after the release.
func TestATermReleasesItsLeaseOnlyOnceItsEventInFlightIsAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var mu sync.Mutex
		var released, answered time.Time
		f.Kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if holder(a.(k8stesting.UpdateAction).GetObject().(*coordinationapiv1.Lease)) == "" {
				mu.Lock()
				released = time.Now()
				mu.Unlock()
			}
			return false, nil, nil
		})
		// The API server takes 3s to answer the Event.
		_, kc, r, _ := recording(t)
		writing := make(chan struct{})
		kc.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			close(writing)
			time.Sleep(3 * time.Second)
			mu.Lock()
			answered = time.Now()
			mu.Unlock()
			return false, nil, nil
		})
		stopRecorder := serveRecorder(t, r)
		rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
			r.Record(ctx, createdEvent("the last reconcile's"))
			return Result[cacheStatus]{}, nil
		})
		stop := served(t, newTestController(t, f, testSettings(), rec))
		<-writing
		if err := stop(); err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
		stopped(t, stopRecorder)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case released.IsZero() || answered.IsZero():
			t.Fatalf("released at %v, the Event answered at %v: want both", released, answered)
		case released.Before(answered):
			t.Errorf("the Lease was released %v before the Event written under its proof was answered", answered.Sub(released))
		}
	})
}
