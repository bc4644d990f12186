package elector

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/z5labs/humus/kube/internal/elector/electortest"
)

// le is the Lease of the tests, with a controller's default timings.
var le = Config{
	Namespace: "kube-system", Name: "memcached-controller",
	LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
	Grace: 10 * time.Second,
}

// newLeases is a fake API server of Leases that keeps their
// resourceVersions as the real one does.
func newLeases() *fake.Clientset {
	c := fake.NewClientset()
	electortest.CheckVersions(c)
	return c
}

// leaseOf is the Lease c holds.
func leaseOf(t *testing.T, c *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	l, err := c.CoordinationV1().Leases(le.Namespace).Get(t.Context(), le.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// holder is the Lease's holder, or "" for none.
func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// testElector is a replica's elector on c's Lease, le.
func testElector(c *fake.Clientset, identity string) *Elector {
	cfg := le
	cfg.Leases = c.CoordinationV1().Leases(le.Namespace)
	cfg.Identity = identity
	cfg.Log = logr.Discard()
	return New(cfg)
}

// campaigning runs e's campaign until the test ends or stop is called, and
// returns when e began to lead (zero while it doesn't), and a channel
// closed when the campaign returned.
func campaigning(t *testing.T, e *Elector) (leadingAt func() time.Time, stop func(), ended <-chan struct{}) {
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
		e.Campaign(ctx, leading)
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
	c      *fake.Clientset
	a      *Elector
	killA  func()          // a's process dies: no release
	aEnded <-chan struct{} // closed once a's campaign has returned
	bLeads func() time.Time
}

// leaderAndStandbyAt starts a, which takes the Lease, then b phase*190ms
// later, and returns 5s and phase*330ms after that: so a's renewals and
// b's reads are at the phase's offsets when the caller's fault comes.
func leaderAndStandbyAt(t *testing.T, phase int) electorPair {
	t.Helper()
	c := newLeases()
	a, b := testElector(c, "a"), testElector(c, "b")
	aLeads, killA, aEnded := campaigning(t, a)
	synctest.Wait()
	if aLeads().IsZero() {
		t.Fatal("a, the first replica, doesn't lead")
	}
	time.Sleep(time.Duration(phase) * 190 * time.Millisecond)
	bLeads, _, _ := campaigning(t, b)
	time.Sleep(5*time.Second + time.Duration(phase)*330*time.Millisecond)
	return electorPair{c: c, a: a, killA: killA, aEnded: aEnded, bLeads: bLeads}
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
				p := leaderAndStandbyAt(t, phase)
				p.killA() // its process dies: no release
				<-p.aEnded
				killed, renewed := time.Now(), p.a.RenewedAt()
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
				l := leaseOf(t, p.c)
				if holder(l) != "b" || *l.Spec.LeaseTransitions != 1 {
					t.Errorf("the Lease: holder %q, transitions %d; want b, 1", holder(l), *l.Spec.LeaseTransitions)
				}
			})
		})
	}
}

// Of replicas taking an expired Lease at the same moment, one leads: each
// take is conditioned on the version it read.
func TestOfStandbysTakingTheLeaseAtOnceOneLeads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newLeases()
		// A Lease held by a replica that is gone, seen by all at once.
		gone := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       new("gone"),
				LeaseDurationSeconds: new(int32(15)),
				LeaseTransitions:     new(int32(3)),
			},
		}
		if _, err := c.CoordinationV1().Leases(le.Namespace).Create(t.Context(), gone, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var leads []func() time.Time
		for _, id := range []string{"a", "b", "c"} {
			at, _, _ := campaigning(t, testElector(c, id))
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
		l := leaseOf(t, c)
		if leaders != 1 || *l.Spec.LeaseTransitions != 4 {
			t.Errorf("%d replicas lead and the Lease has %d transitions, want 1 and 4", leaders, *l.Spec.LeaseTransitions)
		}
	})
}

// A holder whose renewal finds another replica in the Lease stops
// campaigning at once, and writes the Lease no more.
func TestAHolderThatFindsAnotherInTheLeaseStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newLeases()
		a := testElector(c, "a")
		_, _, ended := campaigning(t, a)
		time.Sleep(3 * time.Second)
		leases := c.CoordinationV1().Leases(le.Namespace)
		l, err := leases.Get(t.Context(), le.Name, metav1.GetOptions{})
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
		if h := holder(leaseOf(t, c)); h != "b" {
			t.Errorf("the Lease's holder = %q, want b", h)
		}
		if a.RenewedAt().After(taken) {
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
				p := leaderAndStandbyAt(t, phase)
				leases := p.c.CoordinationV1().Leases(le.Namespace)
				if err := leases.Delete(t.Context(), le.Name, metav1.DeleteOptions{}); err != nil {
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
				if p.a.RenewedAt().After(deleted) {
					t.Errorf("a renewed the Lease after it was deleted")
				}
				if h := holder(leaseOf(t, p.c)); h != "b" {
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
		c := newLeases()
		began := time.Now()
		leads, _, _ := campaigning(t, testElector(c, "a"))
		synctest.Wait()
		if at := leads(); at.IsZero() || at.Sub(began) > 0 {
			t.Errorf("a led %v after its start, want at once", at.Sub(began))
		}
	})
}

// A request for the Lease written as an annotation on a dead holder's
// Lease (a shard's, in package kube) gives it a new resourceVersion, but
// no renewal: a standby's expiry clock runs on from the holder's last
// renewal, so it takes the Lease within LeaseDuration and RetryPeriod of
// the holder's death still (issue 22, point 8: before, the annotation
// restarted the clock, and the takeover came LeaseDuration after the
// request).
func TestARequestOnADeadHoldersLeaseDelaysNoTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newLeases()
		a, b := testElector(c, "a"), testElector(c, "b")
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
		leases := c.CoordinationV1().Leases(le.Namespace)
		l, err := leases.Get(t.Context(), le.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Annotations = map[string]string{"example.com/wanted-by": "c"}
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
		c := newLeases()
		first, second := testElector(c, "a"), testElector(c, "a")
		first.cfg.Process, second.cfg.Process = "p1", "p2"
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
		if took := secondLeads(); took.IsZero() || took.Before(first.RenewedAt().Add(le.LeaseDuration)) {
			t.Errorf("the second process took the Lease %v after the first died (zero: not yet), want once it expired", took.Sub(killed))
		}
	})
}

// A take writes the Lease as Taking changes it (here: drops a request for
// it), and each renewal of Hold's hands renewed the Lease it wrote, every
// RetryPeriod.
func TestTakingChangesATakeAndRenewedSeesEachRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newLeases()
		const asked = "example.com/wanted-by"
		released := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name, Annotations: map[string]string{asked: "b"}},
			Spec:       coordinationv1.LeaseSpec{LeaseTransitions: new(int32(2))},
		}
		if _, err := c.CoordinationV1().Leases(le.Namespace).Create(t.Context(), released, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b := testElector(c, "b")
		b.cfg.Taking = func(l *coordinationv1.Lease) { delete(l.Annotations, asked) }
		b.Saw(leaseOf(t, c))
		if !b.Take(t.Context()) {
			t.Fatal("b didn't take the released Lease")
		}
		l := leaseOf(t, c)
		if _, ok := l.Annotations[asked]; ok || holder(l) != "b" || *l.Spec.LeaseTransitions != 3 {
			t.Errorf("the Lease taken: annotations %v, holder %q, transitions %d; want no %s, b, 3", l.Annotations, holder(l), *l.Spec.LeaseTransitions, asked)
		}

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var renewals []*coordinationv1.Lease
		held := make(chan struct{})
		go func() {
			defer close(held)
			b.Hold(ctx, func(l *coordinationv1.Lease) { renewals = append(renewals, l) })
		}()
		time.Sleep(5*le.RetryPeriod + time.Millisecond)
		cancel()
		<-held
		if len(renewals) != 5 {
			t.Fatalf("renewed was called %d times in 5 RetryPeriods, want 5", len(renewals))
		}
		if last := renewals[4]; last.ResourceVersion != leaseOf(t, c).ResourceVersion || holder(last) != "b" {
			t.Errorf("renewed's last Lease is at version %s held by %q, want the stored one's, %s, held by b", last.ResourceVersion, holder(last), leaseOf(t, c).ResourceVersion)
		}
	})
}

// A replica that finds, just after its take, that a held Lease excludes it
// (Blocked) gives the Lease back (GiveBack) and doesn't lead.
func TestABlockedTakeIsGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newLeases()
		a := testElector(c, "a")
		var asked, gaveBack int
		a.cfg.Blocked = func(context.Context) bool {
			asked++
			return asked%2 == 0 // free before each take, blocked just after
		}
		a.cfg.GiveBack = func() {
			gaveBack++
			if err := a.Release(t.Context()); err != nil {
				t.Error(err)
			}
		}
		leads, _, _ := campaigning(t, a)
		time.Sleep(3*le.RetryPeriod + time.Millisecond)
		synctest.Wait()
		if at := leads(); !at.IsZero() {
			t.Errorf("a led from %v, though every take of its was blocked just after", at)
		}
		if gaveBack == 0 || holder(leaseOf(t, c)) != "" {
			t.Errorf("a gave the Lease back %d times, and its holder is %q; want at least once, and none", gaveBack, holder(leaseOf(t, c)))
		}
	})
}

// Release gives the Lease up only while this replica is its holder: a
// Lease another replica holds is left as it is.
func TestReleaseLeavesAnotherHoldersLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newLeases()
		a := testElector(c, "a")
		a.cfg.Process = "p1"
		leads, stop, ended := campaigning(t, a)
		synctest.Wait()
		if leads().IsZero() {
			t.Fatal("a doesn't lead")
		}
		stop()
		<-ended
		if err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		l := leaseOf(t, c)
		if holder(l) != "" || *l.Spec.LeaseDurationSeconds != 1 || l.Annotations[AnnotationHolderProcess] != "" {
			t.Errorf("the released Lease: holder %q, duration %ds, process %q; want none, 1s, none", holder(l), *l.Spec.LeaseDurationSeconds, l.Annotations[AnnotationHolderProcess])
		}

		l.Spec.HolderIdentity = new("b")
		if _, err := c.CoordinationV1().Leases(le.Namespace).Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if h := holder(leaseOf(t, c)); h != "b" {
			t.Errorf("after a's release of b's Lease, its holder = %q, want b", h)
		}
	})
}
