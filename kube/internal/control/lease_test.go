package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	coordinationapiv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/z5labs/humus/kube/internal/elector/electortest"
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
	h := &hungLeases{LeasesGetter: ctrl.API.Leases}
	ctrl.API.Leases = h
	return h
}

// applyTimes records when each apply reached the fake API server.
func applyTimes(f *fakeCluster) func() []time.Time {
	var mu sync.Mutex
	var times []time.Time
	f.Dyn.PrependReactor("patch", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
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

// stuckAndSlow reconciles stuck and slow once each, after sending on
// inFlight: stuck ignores its cancelled context for a minute, slow notices
// it (sawCancel counts it); both return a status after it.
func stuckAndSlow(calls *counter, inFlight chan<- struct{}, sawCancel *atomic.Int32) reconciler {
	return reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
		if calls.Inc(m.Name) > 1 {
			return result{}, nil
		}
		inFlight <- struct{}{}
		switch m.Name {
		case "stuck":
			time.Sleep(time.Minute)
		case "slow":
			<-ctx.Done()
			sawCancel.Add(1)
		}
		st := m.Status
		st.ReadyReplicas = 7
		return result{Status: &st}, nil
	})
}

// A leader whose renewals hang cancels its reconciles in flight and aborts
// its connections at its renew deadline, takes no key changed after it and
// makes no write past it, and Serve returns ErrLostLeadership by the lost deadline, whether or
// not every Reconciler has returned.
func TestALeaderThatCannotRenewStopsAtItsRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "stuck", 1), cacheObject("default", "slow", 1))
		applies := applyTimes(f)
		var calls counter
		inFlight := make(chan struct{}, 2)
		var sawCancel atomic.Int32
		rec := stuckAndSlow(&calls, inFlight, &sawCancel)
		s := testSettings()
		s.Workers = 2
		ctrl := newTestController(t, f, s, rec)
		leases := hangLeases(ctrl)
		var aborts atomic.Int32
		ctrl.API.Abort = func() { aborts.Add(1) }
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
		if n := aborts.Load(); n != 1 {
			t.Errorf("the connections were aborted %d times by the renew deadline, want once", n)
		}
		late := cacheObject("default", "late", 1)
		if _, err := f.Dyn.Resource(cachesGVR).Namespace("default").Create(t.Context(), late, metav1.CreateOptions{}); err != nil {
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
		if returned, bound := time.Now(), renewed.Add(lostDeadline(LeaderElection(s.LeaderElection))); returned.After(bound) {
			t.Errorf("Serve returned %s after the last renewal, want by %s", returned.Sub(renewed), lostDeadline(LeaderElection(s.LeaderElection)))
		}
		time.Sleep(2 * time.Minute) // the stuck Reconciler returns, with a status
		synctest.Wait()
		for _, at := range applies() {
			if !at.Before(renewDeadline) {
				t.Errorf("an apply reached the API server %s after the last renewal, past the renew deadline", at.Sub(renewed))
			}
		}
		if got := calls.Get("late"); got != 0 {
			t.Errorf("an object changed after the renew deadline was reconciled %d times, want none", got)
		}
		if got := len(f.AppliesTo("status")); got != 0 {
			t.Errorf("status applies = %d, want none: both statuses came after the renew deadline", got)
		}
	})
}

func TestTheLeaseIsReleasedOnlyByItsHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls counter
		inFlight, finish := make(chan struct{}), make(chan struct{})
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			if calls.Inc(m.Name) == 1 {
				close(inFlight)
				<-finish
			}
			return result{}, nil
		})
		electortest.CheckVersions(f.Kube)
		var updates []*coordinationapiv1.Lease
		var mu sync.Mutex
		var recording atomic.Bool
		f.Kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
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
		leaseNow := f.Lease(t, "kube-system", "memcached-controller")
		leaseNow.Spec.HolderIdentity = new("replica-2")
		if _, err := f.Kube.CoordinationV1().Leases("kube-system").Update(t.Context(), leaseNow, metav1.UpdateOptions{}); err != nil {
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
		if h := holder(f.Lease(t, "kube-system", "memcached-controller")); h != "replica-2" {
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
		electortest.CheckVersions(f.Kube)
		var released *coordinationapiv1.Lease
		f.Kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
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
		read := f.Lease(t, "kube-system", "memcached-controller")
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
				for holder(f.Lease(t, s.LeaderElection.Namespace, s.Name)) != "replica-2" {
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

func TestServeEndsWhenTheLeaseIsForbidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
		denied := apierrors.NewForbidden(leases, "memcached-controller", errors.New("the ServiceAccount default/memcached may not get it"))
		f.Kube.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, denied
		})
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		stop := served(t, ctrl)

		returned, err := awaitServe(ctrl, stop, 2*time.Minute)
		if !returned {
			t.Fatalf("Serve didn't return within 2 minutes of a forbidden Lease; Serve, cancelled = %v", stop())
		}
		const want = "kube: the Lease kube-system/memcached-controller: "
		if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Serve = %v, want %q followed by the Forbidden", err, want)
		}
		if got := calls.Get("m"); got != 0 {
			t.Errorf("reconciles = %d, want none without the Lease", got)
		}
		if err := ctrl.Ready.Healthy(t.Context()); err == nil {
			t.Error("Synced is healthy after Serve returned")
		}
	})
}

// A restarted API server serves before its authorizer has loaded RBAC,
// and refuses with a 403 meanwhile (seen for 6 s in the fault suite): a
// replica taking or renewing the Lease then waits the 403s out, for up to
// unservedGrace, and goes on leading. Before, the first 403 ended a
// leader's term, and Serve.
func TestALeaseForbiddenForAFewSecondsIsWaitedOut(t *testing.T) {
	for _, verb := range []string{"get", "update"} {
		t.Run(verb, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
				leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
				var mu sync.Mutex
				var until time.Time // 403s before it
				forbid := func() {
					mu.Lock()
					defer mu.Unlock()
					until = time.Now().Add(UnservedGrace - 4*time.Second)
				}
				f.Kube.PrependReactor(verb, "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
					mu.Lock()
					defer mu.Unlock()
					if time.Now().Before(until) {
						return true, nil, apierrors.NewForbidden(leases, "memcached-controller", errors.New("RBAC: not loaded yet"))
					}
					return false, nil, nil
				})
				if verb == "get" {
					forbid() // from the first look
				}
				var calls counter
				ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
				stop := served(t, ctrl)
				synctest.Wait()
				if verb == "update" {
					time.Sleep(time.Second) // leading: every renewal refused from now
					forbid()
				}
				if returned, err := awaitServe(ctrl, stop, time.Minute); returned {
					t.Fatalf("Serve = %v, want it to wait out 403s of the Lease for %s", err, UnservedGrace-4*time.Second)
				}
				lease, err := f.Kube.CoordinationV1().Leases("kube-system").Get(t.Context(), "memcached-controller", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "replica-1" || time.Since(lease.Spec.RenewTime.Time) > 3*time.Second {
					t.Errorf("the Lease's holder = %q, renewed %s ago; want replica-1, renewed within RetryPeriod", h, time.Since(lease.Spec.RenewTime.Time))
				}
				if got := calls.Get("m"); got == 0 {
					t.Error("m wasn't reconciled")
				}
				if err := stop(); err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
			})
		})
	}
}

// A Lease that may be read but not taken ends Serve once its takes have
// been refused for unservedGrace, naming the Lease and the 403: with get
// and create on Leases but no update, and the Lease already there,
// released by the last leader's shutdown, every take is an update. Before,
// the read before each take reset the grace, so the 403 never became
// final: Serve ran on, Synced healthy, and no replica ever led.
func TestServeEndsWhenAReleasedLeaseMayBeReadButNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		released := &coordinationapiv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "memcached-controller"},
			Spec:       coordinationapiv1.LeaseSpec{LeaseDurationSeconds: new(int32(1)), LeaseTransitions: new(int32(3))},
		}
		if _, err := f.Kube.CoordinationV1().Leases("kube-system").Create(t.Context(), released, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		denied := apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "memcached-controller", errors.New("update not allowed"))
		f.Kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, denied
		})
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		stop := served(t, ctrl)

		le := testSettings().LeaderElection
		bound := UnservedGrace + le.RetryPeriod + time.Second
		returned, err := awaitServe(ctrl, stop, bound)
		if !returned {
			t.Fatalf("Serve didn't return within unservedGrace+RetryPeriod+1s (%s) of every take refused; Serve, cancelled = %v", bound, stop())
		}
		want := "kube: the Lease kube-system/memcached-controller: " + denied.Error()
		if err == nil || err.Error() != want || !errors.Is(err, denied) {
			t.Errorf("Serve = %v, want %q", err, want)
		}
		if got := calls.Get("m"); got != 0 {
			t.Errorf("reconciles = %d, want none without the Lease", got)
		}
		if err := ctrl.Ready.Healthy(t.Context()); err == nil {
			t.Error("Synced is healthy after Serve returned")
		}
	})
}

// A Lease that can't be created for an answer no retry mends, other than
// a 403 (its namespace missing, a 404; a 422, the Lease refused as
// invalid; a 400), ends Serve as a 403 does, naming the Lease and the
// answer, and Synced goes unhealthy: before, the elector logged "Failed to
// update lock" and retried forever, every replica Ready and none working.
// A Lease whose renewal is refused so ends Serve too, naming the answer,
// a 403's at the renew deadline.
func TestServeEndsWhenTheLeaseCanNeverBeCreated(t *testing.T) {
	for _, tc := range []struct {
		name string
		verb string
		err  error
	}{
		{"its namespace missing", "create", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "kube-system")},
		{"invalid", "create", apierrors.NewInvalid(schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, "memcached-controller",
			field.ErrorList{field.Invalid(field.NewPath("spec", "holderIdentity"), "replica-1", "refused by a policy")})},
		{"a bad request", "create", apierrors.NewBadRequest("the request is refused")},
		{"its renewal forbidden", "update", apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "memcached-controller", errors.New("update taken away"))},
		{"its renewal invalid", "update", apierrors.NewInvalid(schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, "memcached-controller",
			field.ErrorList{field.Invalid(field.NewPath("spec", "renewTime"), "now", "refused by a policy")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
				f.Kube.PrependReactor(tc.verb, "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.err
				})
				var calls counter
				ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
				stop := served(t, ctrl)

				returned, err := awaitServe(ctrl, stop, time.Minute)
				if !returned {
					t.Fatalf("Serve didn't return within a minute of a Lease refused with %v; Serve, cancelled = %v", tc.err, stop())
				}
				want := "kube: the Lease kube-system/memcached-controller: " + tc.err.Error()
				if tc.verb == "update" {
					want = ErrLostLeadership.Error() + ": " + want
				}
				if err == nil || err.Error() != want || !errors.Is(err, tc.err) {
					t.Errorf("Serve = %v, want %q", err, want)
				}
				if got := calls.Get("m"); tc.verb == "create" && got != 0 {
					t.Errorf("reconciles = %d, want none without the Lease", got)
				}
				if err := ctrl.Ready.Healthy(t.Context()); err == nil {
					t.Error("Synced is healthy after Serve returned")
				}
			})
		})
	}
}
