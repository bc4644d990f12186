package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrLostLeadership is what Serve returns when the replica loses the Lease
// while it serves: it couldn't renew it for RenewDeadline, or another
// replica took it. The App exits 1, and Kubernetes restarts the pod, which
// campaigns again.
var ErrLostLeadership = errors.New("kube: lost the lease")

// One writer at a time rests on one rule: a replica acts as the leader only
// while it can prove it holds the Lease. Its proof is its last renewal, a
// write of the Lease naming it the holder that the API server accepted: no
// other replica can take the Lease until LeaseDuration after that write
// began, since each measures expiry from when it saw the write. So:
//
//   - until RenewDeadline after the last renewal began, the replica takes
//     keys and writes; each of its own writes carries that deadline in its
//     context, so none is still in flight after it;
//   - at that deadline, whatever the API server does (refuses, hangs,
//     answers slowly), it takes no new key, cancels the reconciles in
//     flight, aborts the Client's connections, so no request it queued is
//     sent late, and makes no write of its own;
//   - by the lost deadline, halfway from RenewDeadline to LeaseDuration
//     after the last renewal began, Serve has returned ErrLostLeadership,
//     whether or not every Reconciler has returned.
//
// client-go's LeaderElector campaigns and renews; the controller never
// lets it release the Lease (ReleaseOnCancel: client-go releases before the
// workers learn of a lost Lease, with the record it last saw, which can
// blank a newer holder's). The controller releases the Lease itself, on
// shutdown only, after its workers stopped, and only while this replica is
// still the holder: a read, then an update conditioned on its
// resourceVersion.

// leaseLock is the Lease leader election runs on, wrapped so the controller
// sees each renewal and each refusal.
type leaseLock struct {
	*resourcelock.LeaseLock

	mu      sync.Mutex
	renewed time.Time // when the last write naming this replica the holder began
	denied  error     // the first Forbidden answer, which no retry mends
	refused chan struct{}
}

func newLeaseLock(l *resourcelock.LeaseLock) *leaseLock {
	return &leaseLock{LeaseLock: l, refused: make(chan struct{})}
}

func (l *leaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.LeaseLock.Get(ctx)
	l.check(err)
	return rec, raw, err
}

func (l *leaseLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.LeaseLock.Create(ctx, r)
	l.wrote(start, r, err)
	return err
}

func (l *leaseLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.LeaseLock.Update(ctx, r)
	l.wrote(start, r, err)
	return err
}

func (l *leaseLock) wrote(start time.Time, r resourcelock.LeaderElectionRecord, err error) {
	l.check(err)
	if err != nil || r.HolderIdentity != l.Identity() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if start.After(l.renewed) {
		l.renewed = start
	}
}

func (l *leaseLock) check(err error) {
	if !apierrors.IsForbidden(err) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.denied == nil {
		l.denied = fmt.Errorf("kube: the Lease %s: %w", l.Describe(), err)
		close(l.refused)
	}
}

// renewedAt is when the last renewal began.
func (l *leaseLock) renewedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

// deniedErr is the Forbidden answer that closed refused.
func (l *leaseLock) deniedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.denied
}

// proof is what the controller's own writes check: the deadline until which
// this replica can prove it holds the Lease.
type proof struct {
	lock          *leaseLock
	renewDeadline time.Duration
}

// until is the proof's deadline: RenewDeadline after the last renewal
// began.
func (p proof) until() time.Time { return p.lock.renewedAt().Add(p.renewDeadline) }

// lostDeadline is how long after its last renewal began a replica that
// lost the Lease has to stop: halfway from RenewDeadline to LeaseDuration,
// so its workers are stopped with a margin before another replica can take
// the Lease.
func lostDeadline(le LeaderElection) time.Duration {
	return le.RenewDeadline + (le.LeaseDuration-le.RenewDeadline)/2
}

// lead campaigns for the Lease and, once it holds it, runs the workers
// until shutdown begins (stopping is done) or the Lease can no longer be
// proven. A Lease this replica is forbidden to read or write ends Serve
// with the API server's answer.
func (c *Controller) lead(ctx, stopping context.Context, q queue, store cache.Indexer) error {
	le := c.settings.LeaderElection
	lock := newLeaseLock(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: c.name},
		Client:     c.clients.leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	})
	leading := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
		Name:          c.name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("kube: controller %s: leader election: %w", c.name, err)
	}
	campaigning, stopCampaigning := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), c.tel.logr))
	campaigned := make(chan struct{})
	go func() {
		defer close(campaigned)
		elector.Run(campaigning)
	}()
	defer func() {
		stopCampaigning()
		<-campaigned
	}()

	select {
	case <-leading:
	case <-stopping.Done():
		return nil
	case <-lock.refused:
		return lock.deniedErr()
	}

	// Lead: the reconciles of this term end with it.
	term, endTerm := context.WithCancel(c.work)
	defer endTerm()
	c.proof.Store(&proof{lock: lock, renewDeadline: le.RenewDeadline})
	defer c.proof.Store(nil)
	var workers sync.WaitGroup
	work := klog.NewContext(term, c.tel.logr)
	for range c.settings.Workers {
		workers.Go(func() { c.worker(work, q, store) })
	}
	finished := make(chan struct{})
	c.idle.Store(&finished)
	go func() {
		workers.Wait()
		close(finished)
	}()
	lost := c.watchProof(lock, campaigned, finished)

	select {
	case <-stopping.Done():
		c.stopTaking(q)
		select {
		case <-finished:
			stopCampaigning()
			<-campaigned
			c.release(lock)
			return nil
		case <-lost:
		}
	case <-lost:
	}

	// The Lease can't be proven: stop at once, and return by the lost
	// deadline whether or not every Reconciler has.
	c.stopTaking(q)
	endTerm()
	stopCampaigning() // no renewal now: it would only delay the next holder
	c.clients.abort()
	c.tel.log.WarnContext(ctx, "lost the lease", "lease", lock.Describe(), "renewed", lock.renewedAt())
	deadline := time.NewTimer(time.Until(lock.renewedAt().Add(lostDeadline(le))))
	defer deadline.Stop()
	select {
	case <-finished:
	case <-deadline.C:
		c.tel.log.ErrorContext(ctx, "a reconcile ignored its cancelled context: Serve returns without it", "lease", lock.Describe())
	}
	if denied := lock.deniedErr(); denied != nil {
		// The renewal was forbidden: say which request, as Serve does for a
		// Lease it may not take.
		return fmt.Errorf("%w: %w", ErrLostLeadership, denied)
	}
	return ErrLostLeadership
}

// watchProof returns a channel closed once this replica can no longer prove
// it holds the Lease: RenewDeadline has passed since its last renewal
// began, or leader election stopped. It watches until finished is closed.
func (c *Controller) watchProof(lock *leaseLock, campaigned, finished <-chan struct{}) <-chan struct{} {
	lost := make(chan struct{})
	renewDeadline := c.settings.LeaderElection.RenewDeadline
	go func() {
		t := time.NewTimer(time.Until(lock.renewedAt().Add(renewDeadline)))
		defer t.Stop()
		for {
			select {
			case <-t.C:
				left := time.Until(lock.renewedAt().Add(renewDeadline))
				if left > 0 {
					t.Reset(left) // renewed meanwhile
					continue
				}
			case <-campaigned:
			case <-finished:
				return
			}
			close(lost)
			return
		}
	}()
	return lost
}

// release gives the Lease up on shutdown, once the workers have stopped, so
// the next replica takes over without waiting out LeaseDuration: only while
// this replica is still its holder, with an update conditioned on the
// resourceVersion just read, so it can never blank a newer holder's
// record. It gives up after RenewDeadline, or when Shutdown's context ends.
func (c *Controller) release(lock *leaseLock) {
	le := c.settings.LeaderElection
	ctx, cancel := context.WithTimeout(klog.NewContext(c.work, c.tel.logr), le.RenewDeadline)
	defer cancel()
	leases := c.clients.leases.Leases(le.Namespace)
	lease, err := leases.Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		c.tel.log.WarnContext(ctx, "releasing the lease", "lease", lock.Describe(), "error", err.Error())
		return
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != le.Identity {
		return
	}
	now := metav1.NewMicroTime(time.Now())
	lease.Spec = coordinationv1.LeaseSpec{
		LeaseDurationSeconds: new(int32(1)),
		AcquireTime:          &now,
		RenewTime:            &now,
		LeaseTransitions:     lease.Spec.LeaseTransitions,
	}
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		c.tel.log.WarnContext(ctx, "releasing the lease", "lease", lock.Describe(), "error", err.Error())
	}
}
