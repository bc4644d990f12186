package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	coordinationapiv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
)

// hungLeases stands in for an API server that stops answering for the
// Lease: while hung, every request for it waits until its context is done,
// as a request to a hung API server does.
type hungLeases struct {
	coordinationv1.LeasesGetter
	hung atomic.Bool

	mu      sync.Mutex
	renewed time.Time // when the last renewal that succeeded began
}

func (h *hungLeases) Leases(ns string) coordinationv1.LeaseInterface {
	return hungLease{LeaseInterface: h.LeasesGetter.Leases(ns), h: h}
}

type hungLease struct {
	coordinationv1.LeaseInterface
	h *hungLeases
}

func (l hungLease) wait(ctx context.Context) error {
	if !l.h.hung.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (l hungLease) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationapiv1.Lease, error) {
	if err := l.wait(ctx); err != nil {
		return nil, err
	}
	return l.LeaseInterface.Get(ctx, name, opts)
}

func (l hungLease) Create(ctx context.Context, lease *coordinationapiv1.Lease, opts metav1.CreateOptions) (*coordinationapiv1.Lease, error) {
	start := time.Now()
	if err := l.wait(ctx); err != nil {
		return nil, err
	}
	got, err := l.LeaseInterface.Create(ctx, lease, opts)
	l.h.wrote(start, lease, err)
	return got, err
}

func (l hungLease) Update(ctx context.Context, lease *coordinationapiv1.Lease, opts metav1.UpdateOptions) (*coordinationapiv1.Lease, error) {
	start := time.Now()
	if err := l.wait(ctx); err != nil {
		return nil, err
	}
	got, err := l.LeaseInterface.Update(ctx, lease, opts)
	l.h.wrote(start, lease, err)
	return got, err
}

func (h *hungLeases) wrote(start time.Time, lease *coordinationapiv1.Lease, err error) {
	if err == nil && holder(lease) != "" {
		h.mu.Lock()
		h.renewed = start
		h.mu.Unlock()
	}
}

func (h *hungLeases) lastRenewal() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewed
}

// hangLeases makes ctrl's Lease requests go through a hungLeases.
func hangLeases(ctrl *Controller) *hungLeases {
	h := &hungLeases{LeasesGetter: ctrl.clients.leases}
	ctrl.clients.leases = h
	return h
}

// checkLeaseVersions makes the fake API server do what the real one does
// with a Lease's resourceVersion, which client-go's fake tracker doesn't: an
// update whose resourceVersion isn't the stored one is a conflict, and each
// write stores a new one.
func checkLeaseVersions(f *fakeCluster) {
	var mu sync.Mutex
	next := 0
	f.kube.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		var l *coordinationapiv1.Lease
		switch a.GetVerb() {
		case "create":
			l = a.(k8stesting.CreateAction).GetObject().(*coordinationapiv1.Lease).DeepCopy()
		case "update":
			l = a.(k8stesting.UpdateAction).GetObject().(*coordinationapiv1.Lease).DeepCopy()
			stored, err := f.kube.Tracker().Get(a.GetResource(), a.GetNamespace(), l.Name)
			if err != nil {
				return true, nil, err
			}
			if rv := stored.(*coordinationapiv1.Lease).ResourceVersion; l.ResourceVersion != rv {
				return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), l.Name, errors.New("the object has been modified"))
			}
		default:
			return false, nil, nil
		}
		next++
		l.ResourceVersion = strconv.Itoa(next)
		var err error
		if a.GetVerb() == "create" {
			err = f.kube.Tracker().Create(a.GetResource(), l, a.GetNamespace())
		} else {
			err = f.kube.Tracker().Update(a.GetResource(), l, a.GetNamespace())
		}
		if err != nil {
			return true, nil, err
		}
		return true, l.DeepCopy(), nil
	})
}

// applyTimes records when each apply reached the fake API server.
func applyTimes(f *fakeCluster) func() []time.Time {
	var mu sync.Mutex
	var times []time.Time
	f.dyn.PrependReactor("patch", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		times = append(times, time.Now())
		return false, nil, nil
	})
	return func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), times...)
	}
}

func TestALeaderThatCannotRenewStopsAtItsRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "stuck", 1), cacheObject("default", "slow", 1))
		applies := applyTimes(f)
		var calls counter
		inFlight := make(chan struct{}, 2)
		var sawCancel atomic.Int32
		rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
			if calls.inc(m.Name) > 1 {
				return Result[cacheStatus]{}, nil
			}
			inFlight <- struct{}{}
			switch m.Name {
			case "stuck":
				// Ignores its cancelled context, for a minute.
				time.Sleep(time.Minute)
			case "slow":
				// Notices its context, but returns a status after it.
				<-ctx.Done()
				sawCancel.Add(1)
			}
			st := m.Status
			st.ReadyReplicas = 7
			return Result[cacheStatus]{Status: &st}, nil
		})
		s := testSettings()
		s.Workers = 2
		ctrl := newTestController(t, f, s, rec)
		leases := hangLeases(ctrl)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- ctrl.Serve(ctx) }()
		<-inFlight
		<-inFlight

		// The API server stops answering for the Lease: every renewal hangs.
		leases.hung.Store(true)
		renewed := leases.lastRenewal()
		renewDeadline := renewed.Add(s.LeaderElection.RenewDeadline)
		expiry := renewed.Add(s.LeaderElection.LeaseDuration)

		// A change after the renew deadline is never taken.
		time.Sleep(time.Until(renewDeadline) + time.Millisecond)
		synctest.Wait()
		if n := sawCancel.Load(); n != 1 {
			t.Errorf("reconciles that saw their context cancelled at the renew deadline = %d, want 1", n)
		}
		late := cacheObject("default", "late", 1)
		if _, err := f.dyn.Resource(cachesGVR).Namespace("default").Create(t.Context(), late, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}

		select {
		case err := <-errc:
			if !errors.Is(err, ErrLostLeadership) {
				t.Errorf("Serve = %v, want ErrLostLeadership", err)
			}
		case <-time.After(time.Until(expiry)):
			t.Fatalf("Serve didn't return before the Lease could expire, %s after the last renewal", s.LeaderElection.LeaseDuration)
		}
		if returned, bound := time.Now(), renewed.Add(lostDeadline(s.LeaderElection)); returned.After(bound) {
			t.Errorf("Serve returned %s after the last renewal, want by %s", returned.Sub(renewed), lostDeadline(s.LeaderElection))
		}
		time.Sleep(2 * time.Minute) // the stuck Reconciler returns, with a status
		synctest.Wait()
		for _, at := range applies() {
			if !at.Before(renewDeadline) {
				t.Errorf("an apply reached the API server %s after the last renewal, past the renew deadline", at.Sub(renewed))
			}
		}
		if got := calls.get("late"); got != 0 {
			t.Errorf("an object changed after the renew deadline was reconciled %d times, want none", got)
		}
		if got := len(f.appliesTo("status")); got != 0 {
			t.Errorf("status applies = %d, want none: both statuses came after the renew deadline", got)
		}
	})
}

func TestTheLeaseIsReleasedOnlyByItsHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls counter
		inFlight, finish := make(chan struct{}), make(chan struct{})
		rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
			if calls.inc(m.Name) == 1 {
				close(inFlight)
				<-finish
			}
			return Result[cacheStatus]{}, nil
		})
		checkLeaseVersions(f)
		var updates []*coordinationapiv1.Lease
		var mu sync.Mutex
		var recording atomic.Bool
		f.kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if recording.Load() {
				mu.Lock()
				defer mu.Unlock()
				updates = append(updates, a.(k8stesting.UpdateAction).GetObject().(*coordinationapiv1.Lease).DeepCopy())
			}
			return false, nil, nil
		})
		// Attempts are recorded; checkLeaseVersions, under it, refuses the
		// stale ones: what matters is the Lease the fake API server holds.
		s := testSettings()
		ctrl := newTestController(t, f, s, rec)
		stop := served(t, ctrl)
		<-inFlight

		// Another replica holds the Lease by the time shutdown releases it,
		// as after a partition: the release must leave its record alone.
		leaseNow := f.lease(t, "kube-system", "memcached-controller")
		leaseNow.Spec.HolderIdentity = new("replica-2")
		if _, err := f.kube.CoordinationV1().Leases("kube-system").Update(t.Context(), leaseNow, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		recording.Store(true)

		done := make(chan error, 1)
		go func() { done <- stop() }()
		synctest.Wait()
		close(finish)
		if err := <-done; err != nil && !errors.Is(err, ErrLostLeadership) {
			t.Errorf("Serve = %v", err)
		}
		if h := holder(f.lease(t, "kube-system", "memcached-controller")); h != "replica-2" {
			t.Errorf("the Lease's holder after shutdown = %q, want replica-2's record untouched", h)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, l := range updates {
			if holder(l) == "" {
				t.Errorf("replica-1 tried to release the Lease after replica-2 took it, with resourceVersion %q", l.ResourceVersion)
			}
		}
	})
}

func TestTheReleaseIsAnUpdateConditionedOnTheLeaseRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		checkLeaseVersions(f)
		var released *coordinationapiv1.Lease
		f.kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			l := a.(k8stesting.UpdateAction).GetObject().(*coordinationapiv1.Lease)
			if holder(l) == "" {
				released = l.DeepCopy()
			}
			return false, nil, nil
		})
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		stop := served(t, ctrl)
		time.Sleep(time.Second)
		synctest.Wait()
		read := f.lease(t, "kube-system", "memcached-controller")
		if err := stop(); err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
		if released == nil {
			t.Fatal("the Lease wasn't released")
		}
		if released.ResourceVersion == "" || released.ResourceVersion != read.ResourceVersion {
			t.Errorf("the release's resourceVersion = %q, want the one read, %q, so a newer holder's record makes it fail", released.ResourceVersion, read.ResourceVersion)
		}
	})
}

func TestShutdownReturnsByItsDeadlineWhileTheReleaseHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		leases := hangLeases(ctrl)
		stop := served(t, ctrl)
		time.Sleep(time.Second)
		synctest.Wait()

		leases.hung.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		ctrl.beginShutdown()
		err := ctrl.Shutdown(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want an error wrapping context.DeadlineExceeded", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Shutdown took %s, want at most its context's 1s", took)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// testElector is a replica's elector on f's Lease, with the default
// timings.
func testElector(f *fakeCluster, identity string) *elector {
	le := testSettings().LeaderElection
	le.Identity = identity
	return &elector{
		leases:   f.kube.CoordinationV1().Leases(le.Namespace),
		name:     testSettings().Name,
		identity: identity,
		timing:   le,
		log:      logr.Discard(),
		refused:  make(chan struct{}),
	}
}

// campaigning runs e's campaign until the test ends or stop is called, and
// returns when e began to lead (zero while it doesn't), and a channel
// closed when the campaign returned.
func campaigning(t *testing.T, e *elector) (leadingAt func() time.Time, stop func(), ended <-chan struct{}) {
	ctx, cancel := context.WithCancel(t.Context())
	leading, done := make(chan struct{}), make(chan struct{})
	var at atomic.Pointer[time.Time]
	go func() {
		select {
		case <-leading:
			now := time.Now()
			at.Store(&now)
		case <-ctx.Done():
		}
	}()
	go func() {
		defer close(done)
		e.campaign(ctx, leading)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() time.Time {
		if p := at.Load(); p != nil {
			return *p
		}
		return time.Time{}
	}, cancel, done
}

// electorPair is two replicas' electors on one fake cluster: a, which
// leads, and b, its standby.
type electorPair struct {
	f      *fakeCluster
	a      *elector
	killA  func()          // a's process dies: no release
	aEnded <-chan struct{} // closed once a's campaign has returned
	bLeads func() time.Time
}

// leaderAndStandbyAt starts a, which takes the Lease, then b phase*190ms
// later, and returns 5s and phase*330ms after that: so a's renewals and
// b's reads are at the phase's offsets when the caller's fault comes.
func leaderAndStandbyAt(t *testing.T, phase int) electorPair {
	t.Helper()
	f := newFakeCluster(t, listKinds)
	checkLeaseVersions(f)
	a, b := testElector(f, "a"), testElector(f, "b")
	aLeads, killA, aEnded := campaigning(t, a)
	synctest.Wait()
	if aLeads().IsZero() {
		t.Fatal("a, the first replica, doesn't lead")
	}
	time.Sleep(time.Duration(phase) * 190 * time.Millisecond)
	bLeads, _, _ := campaigning(t, b)
	time.Sleep(5*time.Second + time.Duration(phase)*330*time.Millisecond)
	return electorPair{f: f, a: a, killA: killA, aEnded: aEnded, bLeads: bLeads}
}

// A standby measures a Lease's expiry from when it first saw the holder's
// last renewal, and tries to take it then: never before LeaseDuration has
// passed since that renewal began, and within LeaseDuration and
// RetryPeriod of the holder's death, at whatever moment of the standby's
// reads and the holder's renewals the holder dies.
func TestAStandbyTakesAnAbandonedLeaseAsItExpires(t *testing.T) {
	for phase := range 10 {
		t.Run(fmt.Sprint("phase ", phase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				le := testSettings().LeaderElection
				p := leaderAndStandbyAt(t, phase)
				p.killA() // its process dies: no release
				<-p.aEnded
				killed, renewed := time.Now(), p.a.renewedAt()
				time.Sleep(time.Until(killed.Add(le.LeaseDuration + le.RetryPeriod + time.Second)))
				synctest.Wait()
				took := p.bLeads()
				switch {
				case took.IsZero():
					t.Fatalf("b didn't take the Lease within LeaseDuration+RetryPeriod+1s (%s) of a's death", le.LeaseDuration+le.RetryPeriod+time.Second)
				case took.Before(renewed.Add(le.LeaseDuration)):
					t.Errorf("b took the Lease %s after a's last renewal began, before LeaseDuration (%s)", took.Sub(renewed), le.LeaseDuration)
				case took.After(killed.Add(le.LeaseDuration + le.RetryPeriod)):
					t.Errorf("b took the Lease %s after a died, want within LeaseDuration+RetryPeriod (%s)", took.Sub(killed), le.LeaseDuration+le.RetryPeriod)
				}
				l := p.f.lease(t, le.Namespace, testSettings().Name)
				if holder(l) != "b" || *l.Spec.LeaseTransitions != 1 {
					t.Errorf("the Lease: holder %q, transitions %d; want b, 1", holder(l), *l.Spec.LeaseTransitions)
				}
			})
		})
	}
}

// A released Lease is taken at the standby's next read, within
// RetryPeriod of the holder's shutdown, at whatever moment of the
// standby's reads the holder shuts down.
func TestAStandbyTakesAReleasedLeaseWithinRetryPeriod(t *testing.T) {
	for phase := range 10 {
		t.Run(fmt.Sprint("phase ", phase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
				s := testSettings()
				var calls counter
				stopLeader := served(t, newTestController(t, f, s, readyReplicas(&calls)))
				synctest.Wait()
				s.LeaderElection.Identity = "replica-2"
				stopStandby := served(t, newTestController(t, f, s, readyReplicas(&calls)))
				time.Sleep(5*time.Second + time.Duration(phase)*190*time.Millisecond)
				released := time.Now()
				if err := stopLeader(); err != nil {
					t.Fatalf("the leader's Serve = %v, want nil", err)
				}
				for holder(f.lease(t, s.LeaderElection.Namespace, s.Name)) != "replica-2" {
					if time.Since(released) > s.LeaderElection.RetryPeriod {
						t.Fatalf("the standby didn't take the released Lease within RetryPeriod (%s)", s.LeaderElection.RetryPeriod)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if err := stopStandby(); err != nil {
					t.Errorf("the standby's Serve = %v, want nil", err)
				}
			})
		})
	}
}

// Of replicas taking an expired Lease at the same moment, one leads: each
// take is conditioned on the version it read.
func TestOfStandbysTakingTheLeaseAtOnceOneLeads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds)
		checkLeaseVersions(f)
		le := testSettings().LeaderElection
		// A Lease held by a replica that is gone, seen by all at once.
		gone := &coordinationapiv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: le.Namespace, Name: testSettings().Name},
			Spec: coordinationapiv1.LeaseSpec{
				HolderIdentity:       new("gone"),
				LeaseDurationSeconds: new(int32(15)),
				LeaseTransitions:     new(int32(3)),
			},
		}
		if _, err := f.kube.CoordinationV1().Leases(le.Namespace).Create(t.Context(), gone, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var leads []func() time.Time
		for _, id := range []string{"a", "b", "c"} {
			at, _, _ := campaigning(t, testElector(f, id))
			leads = append(leads, at)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		leaders := 0
		for _, at := range leads {
			if !at().IsZero() {
				leaders++
			}
		}
		l := f.lease(t, le.Namespace, testSettings().Name)
		if leaders != 1 || *l.Spec.LeaseTransitions != 4 {
			t.Errorf("%d replicas lead and the Lease has %d transitions, want 1 and 4", leaders, *l.Spec.LeaseTransitions)
		}
	})
}

// A holder whose renewal finds another replica in the Lease stops
// campaigning at once, and writes the Lease no more.
func TestAHolderThatFindsAnotherInTheLeaseStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds)
		checkLeaseVersions(f)
		le := testSettings().LeaderElection
		a := testElector(f, "a")
		_, _, ended := campaigning(t, a)
		time.Sleep(3 * time.Second)
		leases := f.kube.CoordinationV1().Leases(le.Namespace)
		l, err := leases.Get(t.Context(), testSettings().Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Spec.HolderIdentity = new("b")
		if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		taken := time.Now()
		select {
		case <-ended:
		case <-time.After(le.RetryPeriod):
			t.Fatalf("a still campaigns RetryPeriod (%s) after b took the Lease", le.RetryPeriod)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if h := holder(f.lease(t, le.Namespace, testSettings().Name)); h != "b" {
			t.Errorf("the Lease's holder = %q, want b", h)
		}
		if a.renewedAt().After(taken) {
			t.Errorf("a renewed the Lease after b took it")
		}
	})
}

// A Lease deleted while a holds it: b, a standby that had seen it held,
// counts it held for LeaseDuration from when it first saw it missing, and
// a stops campaigning at its next renewal, which finds it gone; so b never
// leads before a has stopped (issue 22, point 1: before, b created the
// Lease at its next read and a renewed on until it found b in it, both
// leading for about 2 s). At whatever moment of a's renewals and b's
// reads it is deleted.
func TestALeaseDeletedWhileHeldIsTakenOnlyOnceTheHolderStopped(t *testing.T) {
	for phase := range 10 {
		t.Run(fmt.Sprint("phase ", phase), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				le := testSettings().LeaderElection
				p := leaderAndStandbyAt(t, phase)
				leases := p.f.kube.CoordinationV1().Leases(le.Namespace)
				if err := leases.Delete(t.Context(), testSettings().Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				deleted := time.Now()
				var aStopped time.Time
				select {
				case <-p.aEnded:
					aStopped = time.Now()
				case <-time.After(le.RetryPeriod + time.Second):
					t.Fatalf("a still campaigns RetryPeriod+1s (%s) after its Lease was deleted", le.RetryPeriod+time.Second)
				}
				time.Sleep(time.Until(deleted.Add(le.LeaseDuration + le.RetryPeriod + time.Second)))
				synctest.Wait()
				took := p.bLeads()
				switch {
				case took.IsZero():
					t.Fatalf("b didn't take the deleted Lease within LeaseDuration+RetryPeriod+1s of the deletion")
				case took.Before(aStopped):
					t.Errorf("b led %s before a stopped: two leaders", aStopped.Sub(took))
				case took.Before(deleted.Add(le.LeaseDuration)):
					t.Errorf("b took the deleted Lease %s after the deletion, before LeaseDuration (%s)", took.Sub(deleted), le.LeaseDuration)
				}
				if p.a.renewedAt().After(deleted) {
					t.Errorf("a renewed the Lease after it was deleted")
				}
				if h := holder(p.f.lease(t, le.Namespace, testSettings().Name)); h != "b" {
					t.Errorf("the Lease's holder = %q, want b", h)
				}
			})
		})
	}
}

// A replica whose first look finds no Lease (the controller's first
// start) takes it at once: waiting LeaseDuration there would only delay
// every first install.
func TestAFirstStartTakesAMissingLeaseAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds)
		checkLeaseVersions(f)
		began := time.Now()
		leads, _, _ := campaigning(t, testElector(f, "a"))
		synctest.Wait()
		if at := leads(); at.IsZero() || at.Sub(began) > 0 {
			t.Errorf("a led %v after its start, want at once", at.Sub(began))
		}
	})
}

// A shard request written as an annotation on a dead holder's Lease gives
// it a new resourceVersion, but no renewal: a standby's expiry clock runs
// on from the holder's last renewal, so it takes the Lease within
// LeaseDuration and RetryPeriod of the holder's death still (issue 22,
// point 8: before, the annotation restarted the clock, and the takeover
// came LeaseDuration after the request).
func TestAShardRequestOnADeadHoldersLeaseDelaysNoTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds)
		checkLeaseVersions(f)
		le := testSettings().LeaderElection
		a, b := testElector(f, "a"), testElector(f, "b")
		aLeads, killA, aEnded := campaigning(t, a)
		synctest.Wait()
		if aLeads().IsZero() {
			t.Fatal("a, the first replica, doesn't lead")
		}
		bLeads, _, _ := campaigning(t, b)
		time.Sleep(3 * time.Second)
		killA() // its process dies: no release
		<-aEnded
		killed := time.Now()

		time.Sleep(10 * time.Second)
		leases := f.kube.CoordinationV1().Leases(le.Namespace)
		l, err := leases.Get(t.Context(), testSettings().Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Annotations = map[string]string{annotationWantedBy: "c"}
		if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(killed.Add(le.LeaseDuration + le.RetryPeriod + time.Second)))
		synctest.Wait()
		if took := bLeads(); took.IsZero() || took.After(killed.Add(le.LeaseDuration+le.RetryPeriod)) {
			t.Errorf("b took the Lease %v after a died (zero: not yet), want within LeaseDuration+RetryPeriod (%s)", took.Sub(killed), le.LeaseDuration+le.RetryPeriod)
		}
	})
}

// Two processes with one identity (a StatefulSet's pod deleted by force
// and recreated while the old one still runs, a hostname reused): the
// second counts the first's Lease as held, not as its own, and takes it
// only once it has expired; the first, while it runs, keeps it (issue 22,
// point 7: before, a Lease naming this replica's identity was free at
// once, and both led).
func TestASecondProcessWithTheSameIdentityDoesNotLeadBesideTheFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds)
		checkLeaseVersions(f)
		le := testSettings().LeaderElection
		first, second := testElector(f, "a"), testElector(f, "a")
		first.process, second.process = "p1", "p2"
		firstLeads, killFirst, firstEnded := campaigning(t, first)
		synctest.Wait()
		if firstLeads().IsZero() {
			t.Fatal("the first process doesn't lead")
		}
		secondLeads, _, _ := campaigning(t, second)
		time.Sleep(time.Minute)
		synctest.Wait()
		if at := secondLeads(); !at.IsZero() {
			t.Fatalf("the second process with the first's identity led beside it, from %v", at)
		}
		select {
		case <-firstEnded:
			t.Fatal("the first process stopped leading while it ran")
		default:
		}
		killFirst() // its process dies: no release
		<-firstEnded
		killed := time.Now()
		time.Sleep(le.LeaseDuration + le.RetryPeriod + time.Second)
		synctest.Wait()
		if took := secondLeads(); took.IsZero() || took.Before(first.renewedAt().Add(le.LeaseDuration)) {
			t.Errorf("the second process took the Lease %v after the first died (zero: not yet), want once it expired", took.Sub(killed))
		}
	})
}
