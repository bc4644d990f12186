// Package elector campaigns for a Lease and renews it, so that of the
// replicas of a controller one at a time holds it, and says until when the
// holder can prove it does.
//
// One writer at a time rests on one rule: a replica acts as the leader only
// while it can prove it holds the Lease. Its proof is its last renewal, a
// write of the Lease naming it the holder that the API server accepted: no
// other replica can take the Lease until LeaseDuration after that write
// began, since each measures expiry from when it saw the write. So the
// holder of a proof (package kube's term of leading) keeps to it:
//
//   - until RenewDeadline after the last renewal began (ProvenUntil), the
//     replica takes keys and writes; each of its own writes carries that
//     deadline in its context, so none is still in flight after it;
//   - at that deadline, whatever the API server does (refuses, hangs,
//     answers slowly), it takes no new key, cancels the reconciles in
//     flight, aborts the Client's connections, so no request it queued is
//     sent late, and makes no write of its own;
//   - by the lost deadline, halfway from RenewDeadline to LeaseDuration
//     after the last renewal began, it has stopped, whether or not every
//     Reconciler has returned.
//
// The elector promises:
//
//   - It campaigns and renews on the Lease with the same record, rules and
//     log messages as client-go's LeaderElector, but bounds the takeover: a
//     standby reads the Lease every RetryPeriod, without jitter, and tries
//     to take it at the moment it has expired by its own observation, not
//     at its next jittered poll. So a standby takes a released Lease within
//     RetryPeriod, and a dead holder's within LeaseDuration and RetryPeriod
//     of its last renewal.
//   - Every take is conditioned on the version the replica read: of several
//     replicas taking one Lease at once, one holds it.
//   - A version that changes only the Lease's metadata, such as an
//     annotation another replica writes, renews nothing: the holder's lease
//     runs on from its last renewal.
//   - A Lease deleted while held counts as held for its duration from when
//     the standby first saw it missing, and the holder stops at the renewal
//     that finds it gone; a missing Lease never seen held (a first start)
//     is free at once.
//   - Two processes with one identity tell their holdings apart (an
//     annotation naming the process): each counts the other's Lease as
//     held, not as its own.
//   - An answer no retry mends (a 400, 405, 406, 413, 415 or 422; a 404 to
//     a create; a 403 once 403s have come for the grace, to one kind of
//     request, a read, a create or an update, with no success of that
//     kind between) ends the campaign with the answer (Refused), as
//     client-go's elector never does.
//   - Release gives the Lease up only while this replica is still the
//     holder: a read, then an update conditioned on its resourceVersion.
package elector

import (
	"context"
	"errors"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Config is a replica's elector on one Lease.
type Config struct {
	Leases    coordinationv1client.LeaseInterface // the Lease's namespace's
	Namespace string
	Name      string // the Lease's
	Identity  string // this replica's, in the Lease
	// Process tells this process's holding from another's with the same
	// identity (AnnotationHolderProcess); "" writes no annotation.
	Process string

	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Grace is how long 403s, with no success between, must come before
	// they end the campaign (see Refusal).
	Grace time.Duration
	Log   klog.Logger

	// Blocked, when set, reports whether a held Lease that excludes this
	// one keeps this replica from it; it is asked just before a take and
	// just after, and GiveBack is called when it says so after a take
	// (see takeUnblocked).
	Blocked  func(ctx context.Context) bool
	GiveBack func()
	// Taking, when set, changes the Lease a take writes over, a copy of
	// the one this replica saw, such as to drop an annotation the take
	// answers.
	Taking func(*coordinationv1.Lease)
}

// Elector campaigns for the Lease and, once this replica holds it, renews
// it every RetryPeriod.
type Elector struct {
	cfg Config

	mu      sync.Mutex
	renewed time.Time // when the last write naming this replica the holder began
	denied  error     // the first answer no retry mends, such as a 403
	refused chan struct{}
	// refusals counts the refusals of each kind of request apart.
	refusals [requests]Refusal
	// lastRefused is the last answer no retry mends, of the kind
	// lastRefusedBy, until a request of that kind succeeds: what a term
	// lost while its renewals were refused names.
	lastRefused   error
	lastRefusedBy request

	// What this replica last saw of the Lease, and when it first saw that
	// version, or first saw it missing: a holder's lease runs from then,
	// by this replica's clock. Read and written by one goroutine at a
	// time: the campaign's, or Take's and Saw's caller between campaigns.
	seen   *coordinationv1.Lease // nil: none, or not looked at yet
	looked bool                  // seen is an answer of the API server's
	seenAt time.Time
	// heldFor is how long the last Lease this replica saw runs, when it
	// named a holder; 0 when it named none, or none was seen. A Lease
	// deleted while held counts as held for that long from when this
	// replica first saw it missing.
	heldFor time.Duration
	heldBy  string // the holder the last Lease seen named
}

// New returns an elector of cfg's, that has seen nothing of the Lease yet.
func New(cfg Config) *Elector {
	e := &Elector{cfg: cfg, refused: make(chan struct{})}
	for i := range e.refusals {
		e.refusals[i].Grace = cfg.Grace
	}
	return e
}

// Name is the Lease's name.
func (e *Elector) Name() string { return e.cfg.Name }

// Describe names the Lease: namespace/name.
func (e *Elector) Describe() string { return e.cfg.Namespace + "/" + e.cfg.Name }

// Log is the elector's logger, with the Lease as its lock.
func (e *Elector) Log() klog.Logger { return e.cfg.Log }

// Campaign takes the Lease, closes leading, then renews it until ctx ends
// or another replica holds it.
func (e *Elector) Campaign(ctx context.Context, leading chan<- struct{}) {
	e.cfg.Log.Info("Attempting to acquire leader lease...")
	if !e.acquire(ctx) {
		return
	}
	e.cfg.Log.Info("Successfully acquired lease")
	close(leading)
	e.Hold(ctx, nil)
}

// acquire reads the Lease every RetryPeriod, and takes it the moment it is
// free: missing, released, already this replica's, or not renewed for its
// duration since this replica first saw its current version. A failed take
// waits for the next read.
func (e *Elector) acquire(ctx context.Context) bool {
	var next time.Time // the next read
	for {
		if now := time.Now(); !now.Before(next) {
			next = now.Add(e.cfg.RetryPeriod)
			e.look(ctx)
		}
		wake := next
		if free, at := e.Free(); free {
			if e.takeUnblocked(ctx) {
				return true
			}
		} else if !at.IsZero() && at.Before(wake) {
			wake = at // zero: not looked at yet, the next read decides
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// takeUnblocked takes the Lease unless a held Lease that excludes it keeps
// it from this replica (Blocked), just before the take or just after: of
// two replicas taking two such Leases at once, at least one sees the
// other's then, and gives its own back.
func (e *Elector) takeUnblocked(ctx context.Context) bool {
	if e.cfg.Blocked == nil {
		return e.Take(ctx)
	}
	if e.cfg.Blocked(ctx) || !e.Take(ctx) {
		return false
	}
	if !e.cfg.Blocked(ctx) {
		return true
	}
	e.cfg.GiveBack()
	return false
}

// look reads the Lease. A version this replica hadn't seen, that renews or
// changes the holder, starts its lease, by this replica's clock, now:
// after the write that made it began.
func (e *Elector) look(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	lease, err := e.cfg.Leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	e.check(err, reading)
	switch {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		e.cfg.Log.V(4).Info("Failed to read the lease", "err", err)
		return
	}
	e.Saw(lease)
}

// Saw records lease, or nil for none, as this replica's look at the Lease
// now: a version it hadn't seen, that renews or changes the holder, starts
// its lease.
func (e *Elector) Saw(lease *coordinationv1.Lease) {
	switch {
	case !e.looked, (lease == nil) != (e.seen == nil):
		e.seenAt = time.Now()
	case lease != nil && lease.ResourceVersion != e.seen.ResourceVersion && !apiequality.Semantic.DeepEqual(lease.Spec, e.seen.Spec):
		// A renewal, a take or a release. A version that changed only the
		// metadata, such as another replica's request for the Lease,
		// renews nothing: the holder's lease runs on from its last
		// renewal.
		e.seenAt = time.Now()
	}
	if lease != nil {
		e.heldFor, e.heldBy = 0, ptr.Deref(lease.Spec.HolderIdentity, "")
		if e.heldBy != "" {
			e.heldFor = e.duration(lease)
		}
	}
	e.seen, e.looked = lease, true
}

// Seen is the Lease as this replica last saw it: nil when missing, or not
// looked at yet.
func (e *Elector) Seen() *coordinationv1.Lease { return e.seen }

// SeenAt is when this replica first saw the Lease as it last saw it.
func (e *Elector) SeenAt() time.Time { return e.seenAt }

// duration is how long lease runs from a renewal: its own
// leaseDurationSeconds, or LeaseDuration.
func (e *Elector) duration(lease *coordinationv1.Lease) time.Duration {
	if s := lease.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		return time.Duration(*s) * time.Second
	}
	return e.cfg.LeaseDuration
}

// Holder is who holds the Lease by this replica's last look: the holder the
// last Lease seen named, when it was deleted since.
func (e *Elector) Holder() string { return e.heldBy }

// Free says whether the Lease can be taken now, and if not, when it can be
// unless it changes first.
func (e *Elector) Free() (bool, time.Time) {
	if !e.looked {
		return false, time.Time{}
	}
	d := e.heldFor
	if e.seen != nil {
		s := e.seen.Spec
		if s.HolderIdentity == nil || *s.HolderIdentity == "" || e.mine(e.seen) {
			return true, time.Time{}
		}
	} else if d == 0 {
		// Missing, and never seen held: the controller's first start.
		return true, time.Time{}
	}
	// Held, or deleted while held: its holder may still act as one until
	// its renewal finds it gone.
	expiry := e.seenAt.Add(d)
	return !time.Now().Before(expiry), expiry
}

// Take writes this replica into the Lease, conditioned on the version it
// saw, so of several replicas taking one Lease at once, one succeeds.
func (e *Elector) Take(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	start := time.Now()
	now := metav1.NewMicroTime(start)
	var lease *coordinationv1.Lease
	var err error
	req := updating
	if e.seen == nil {
		req = creating
		created := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
			Spec:       e.spec(now, now, 0),
		}
		e.stamp(created)
		lease, err = e.cfg.Leases.Create(ctx, created, metav1.CreateOptions{})
	} else {
		lease, err = e.cfg.Leases.Update(ctx, e.taking(now), metav1.UpdateOptions{})
	}
	e.check(err, req)
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			e.look(ctx) // another replica wrote it first
		} else {
			e.cfg.Log.Error(err, "Failed to update lock")
		}
		return false
	}
	e.Saw(lease)
	e.wrote(start)
	return true
}

// taking is the Lease seen, naming this replica the holder from now.
func (e *Elector) taking(now metav1.MicroTime) *coordinationv1.Lease {
	next := e.seen.DeepCopy()
	if e.cfg.Taking != nil {
		e.cfg.Taking(next)
	}
	e.stamp(next)
	s := e.seen.Spec
	transitions := ptr.Deref(s.LeaseTransitions, 0)
	acquired := now
	if e.mine(e.seen) && s.AcquireTime != nil {
		acquired = *s.AcquireTime
	} else {
		transitions++
	}
	next.Spec = e.spec(acquired, now, transitions)
	return next
}

// spec is the Lease's spec naming this replica the holder, as client-go's
// LeaderElector writes it. Its duration is rounded up to whole seconds, so
// no other replica counts it shorter than LeaseDuration.
func (e *Elector) spec(acquired, renewed metav1.MicroTime, transitions int32) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       new(e.cfg.Identity),
		LeaseDurationSeconds: new(int32((e.cfg.LeaseDuration + time.Second - 1) / time.Second)),
		AcquireTime:          &acquired,
		RenewTime:            &renewed,
		LeaseTransitions:     new(transitions),
	}
}

// Hold renews the Lease RetryPeriod after each renewal began, retrying
// every RetryPeriod while one fails, until ctx ends or the Lease has
// another holder. Each try gives up at the proof's deadline. renewed, when
// set, is called with the Lease each renewal wrote.
func (e *Elector) Hold(ctx context.Context, renewed func(*coordinationv1.Lease)) {
	next := e.RenewedAt().Add(e.cfg.RetryPeriod)
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		start := time.Now()
		taken, err := e.renew(ctx)
		switch {
		case taken && err != nil:
			e.cfg.Log.Info("Failed to renew lease: it was deleted", "err", err)
			return
		case taken:
			e.cfg.Log.Info("Failed to renew lease: another replica holds it", "holder", ptr.Deref(e.seen.Spec.HolderIdentity, ""))
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			e.cfg.Log.Info("Failed to renew lease", "err", err)
			next = start.Add(e.cfg.RetryPeriod)
		default:
			e.cfg.Log.V(5).Info("Successfully renewed lease")
			next = e.RenewedAt().Add(e.cfg.RetryPeriod)
			if renewed != nil {
				renewed(e.seen)
			}
		}
	}
}

// renew writes a new renewal time into the Lease, conditioned on the
// version this replica last wrote. A conflict is read: the Lease may be
// this replica's still (a write whose answer was lost), or another's.
// taken is true when it is another's, or gone (NotFound, returned as err):
// a replica that saw the Lease held takes a deleted one only LeaseDuration
// after it saw it missing, so the holder stops at once.
func (e *Elector) renew(ctx context.Context) (taken bool, err error) {
	ctx, cancel := context.WithDeadline(ctx, e.ProvenUntil())
	defer cancel()
	for range 2 {
		start := time.Now()
		next := e.seen.DeepCopy()
		now := metav1.NewMicroTime(start)
		next.Spec = e.spec(ptr.Deref(e.seen.Spec.AcquireTime, now), now, ptr.Deref(e.seen.Spec.LeaseTransitions, 0))
		lease, err := e.cfg.Leases.Update(ctx, next, metav1.UpdateOptions{})
		e.check(err, updating)
		if err == nil {
			e.Saw(lease)
			e.wrote(start)
			return false, nil
		}
		if apierrors.IsNotFound(err) {
			e.Saw(nil)
			return true, err // deleted: another replica may create it
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		lease, err = e.cfg.Leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
		e.check(err, reading)
		if apierrors.IsNotFound(err) {
			e.Saw(nil)
			return true, err
		}
		if err != nil {
			return false, err
		}
		e.Saw(lease)
		if !e.mine(lease) {
			return true, nil
		}
	}
	return false, errors.New("the Lease changed twice while renewing it")
}

// AnnotationHolderProcess, on a Lease, names the process of the holder's
// that wrote it: two processes with one identity (a StatefulSet's pod
// deleted by force and recreated while the old one runs, a hostname
// reused) see each other's Lease as held, not as their own.
const AnnotationHolderProcess = "kube.humus.z5labs.dev/holder-process"

// mine reports whether lease names this process the holder: this
// replica's identity, written by this process.
func (e *Elector) mine(lease *coordinationv1.Lease) bool {
	return ptr.Deref(lease.Spec.HolderIdentity, "") == e.cfg.Identity && lease.Annotations[AnnotationHolderProcess] == e.cfg.Process
}

// stamp marks lease as this process's.
func (e *Elector) stamp(lease *coordinationv1.Lease) {
	if e.cfg.Process == "" {
		return
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[AnnotationHolderProcess] = e.cfg.Process
}

func (e *Elector) wrote(start time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if start.After(e.renewed) {
		e.renewed = start
	}
}

// RenewedAt is when the last renewal began.
func (e *Elector) RenewedAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.renewed
}

// ProvenUntil is the proof's deadline: RenewDeadline after the last
// renewal began. Until then, no other replica can hold the Lease.
func (e *Elector) ProvenUntil() time.Time { return e.RenewedAt().Add(e.cfg.RenewDeadline) }

// Annotate asks the Lease's holder for it: an update of the Lease as this
// replica last saw it, conditioned on that version, with the annotation
// key set to value. It reports false, with no request, when this replica
// saw no Lease.
func (e *Elector) Annotate(ctx context.Context, key, value string) (bool, error) {
	if e.seen == nil {
		return false, nil
	}
	lease := e.seen.DeepCopy()
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[key] = value
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	_, err := e.cfg.Leases.Update(ctx, lease, metav1.UpdateOptions{})
	return true, err
}

// Release gives the Lease up, so the next replica takes over without
// waiting out LeaseDuration: only while this replica is still its holder,
// with an update conditioned on the resourceVersion just read, so it can
// never blank a newer holder's record. It returns the read's or the
// update's error.
func (e *Elector) Release(ctx context.Context) error {
	lease, err := e.cfg.Leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !e.mine(lease) {
		return nil
	}
	delete(lease.Annotations, AnnotationHolderProcess)
	now := metav1.NewMicroTime(time.Now())
	lease.Spec = coordinationv1.LeaseSpec{
		LeaseDurationSeconds: new(int32(1)),
		AcquireTime:          &now,
		RenewTime:            &now,
		LeaseTransitions:     lease.Spec.LeaseTransitions,
	}
	_, err = e.cfg.Leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}
