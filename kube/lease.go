package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
// The elector campaigns and renews on the Lease with the same record,
// rules and log messages as client-go's LeaderElector, but bounds the
// takeover: a standby reads the Lease every RetryPeriod, without jitter,
// and tries to take it at the moment it has expired by its own
// observation, not at its next jittered poll. So a standby takes a
// released Lease within RetryPeriod, and a dead holder's within
// LeaseDuration and RetryPeriod of its last renewal. A Lease deleted while
// held counts as held for its duration from when the standby first saw it
// missing, and the holder stops at the renewal that finds it gone; a
// missing Lease never seen held (a first start) is free at once. It
// releases the Lease only on shutdown, after its workers stopped, and only
// while this replica is still the holder: a read, then an update
// conditioned on its resourceVersion.

// elector campaigns for the Lease and, once this replica holds it, renews
// it every RetryPeriod.
type elector struct {
	leases   coordinationv1client.LeaseInterface
	name     string // the Lease's
	identity string
	// process tells this process's holding from another's with the same
	// identity (annotationHolderProcess).
	process string
	timing  LeaderElection
	log     klog.Logger

	mu      sync.Mutex
	renewed time.Time // when the last write naming this replica the holder began
	denied  error     // the first answer no retry mends, such as a 403
	refused chan struct{}
	refusal refusal
	// lastRefused is the last answer no retry mends, since the last
	// success: what a term lost while its renewals were refused names.
	lastRefused error

	// blocked, when set, reports whether a held Lease of another shard
	// count keeps this replica from the Lease; giveBack releases the Lease
	// just taken when one does (see takeUnblocked).
	blocked  func(ctx context.Context) bool
	giveBack func()

	// asked, when set, is called once a renewal finds another replica named
	// in the Lease's annotationWantedBy: a shard's holder is asked for it.
	asked func()

	// What this replica last saw of the Lease, and when it first saw that
	// version, or first saw it missing: a holder's lease runs from then,
	// by this replica's clock. Read and written by campaign's goroutine
	// only.
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

func (c *Controller) newElector(ctx context.Context) *elector {
	le := c.settings.LeaderElection
	return &elector{
		leases:   c.clients.leases.Leases(le.Namespace),
		name:     c.name,
		identity: le.Identity,
		process:  c.processID,
		timing:   le,
		log:      klog.FromContext(ctx).WithValues("lock", le.Namespace+"/"+c.name),
		refused:  make(chan struct{}),
	}
}

func (e *elector) describe() string { return e.timing.Namespace + "/" + e.name }

// campaign takes the Lease, closes leading, then renews it until ctx ends
// or another replica holds it.
func (e *elector) campaign(ctx context.Context, leading chan<- struct{}) {
	e.log.Info("Attempting to acquire leader lease...")
	if !e.acquire(ctx) {
		return
	}
	e.log.Info("Successfully acquired lease")
	close(leading)
	e.hold(ctx)
}

// acquire reads the Lease every RetryPeriod, and takes it the moment it is
// free: missing, released, already this replica's, or not renewed for its
// duration since this replica first saw its current version. A failed take
// waits for the next read.
func (e *elector) acquire(ctx context.Context) bool {
	var next time.Time // the next read
	for {
		if now := time.Now(); !now.Before(next) {
			next = now.Add(e.timing.RetryPeriod)
			e.look(ctx)
		}
		wake := next
		if free, at := e.free(); free {
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

// takeUnblocked takes the Lease unless a held Lease of another shard count
// keeps it from this replica (blocked), just before the take or just
// after: of two replicas of different shard counts taking at once, at
// least one sees the other's Lease then, and gives its own back.
func (e *elector) takeUnblocked(ctx context.Context) bool {
	if e.blocked == nil {
		return e.take(ctx)
	}
	if e.blocked(ctx) || !e.take(ctx) {
		return false
	}
	if !e.blocked(ctx) {
		return true
	}
	e.log.Info("Gave the lease back: a replica of another shard count holds a shard's")
	e.giveBack()
	return false
}

// look reads the Lease. A version this replica hadn't seen, that renews or
// changes the holder, starts its lease, by this replica's clock, now:
// after the write that made it began.
func (e *elector) look(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, e.timing.RenewDeadline)
	defer cancel()
	lease, err := e.leases.Get(ctx, e.name, metav1.GetOptions{})
	e.check(err, false)
	switch {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		e.log.V(4).Info("Failed to read the lease", "err", err)
		return
	}
	e.saw(lease)
}

func (e *elector) saw(lease *coordinationv1.Lease) {
	switch {
	case !e.looked, (lease == nil) != (e.seen == nil):
		e.seenAt = time.Now()
	case lease != nil && lease.ResourceVersion != e.seen.ResourceVersion && !apiequality.Semantic.DeepEqual(lease.Spec, e.seen.Spec):
		// A renewal, a take or a release. A version that changed only the
		// metadata, such as a shard request (annotationWantedBy), renews
		// nothing: the holder's lease runs on from its last renewal.
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

// duration is how long lease runs from a renewal: its own
// leaseDurationSeconds, or LeaseDuration.
func (e *elector) duration(lease *coordinationv1.Lease) time.Duration {
	if s := lease.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		return time.Duration(*s) * time.Second
	}
	return e.timing.LeaseDuration
}

// holder is who holds the Lease by this replica's last look: the holder the
// last Lease seen named, when it was deleted since.
func (e *elector) holder() string { return e.heldBy }

// free says whether the Lease can be taken now, and if not, when it can be
// unless it changes first.
func (e *elector) free() (bool, time.Time) {
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

// take writes this replica into the Lease, conditioned on the version it
// saw, so of several replicas taking one Lease at once, one succeeds.
func (e *elector) take(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, e.timing.RenewDeadline)
	defer cancel()
	start := time.Now()
	now := metav1.NewMicroTime(start)
	var lease *coordinationv1.Lease
	var err error
	if e.seen == nil {
		created := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.timing.Namespace, Name: e.name},
			Spec:       e.spec(now, now, 0),
		}
		e.stamp(created)
		lease, err = e.leases.Create(ctx, created, metav1.CreateOptions{})
	} else {
		next := e.seen.DeepCopy()
		delete(next.Annotations, annotationWantedBy) // whoever asked, it is this replica's now
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
		lease, err = e.leases.Update(ctx, next, metav1.UpdateOptions{})
	}
	e.check(err, e.seen == nil)
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			e.look(ctx) // another replica wrote it first
		} else {
			e.log.Error(err, "Failed to update lock")
		}
		return false
	}
	e.saw(lease)
	e.wrote(start)
	return true
}

// spec is the Lease's spec naming this replica the holder, as client-go's
// LeaderElector writes it. Its duration is rounded up to whole seconds, so
// no other replica counts it shorter than LeaseDuration.
func (e *elector) spec(acquired, renewed metav1.MicroTime, transitions int32) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       new(e.identity),
		LeaseDurationSeconds: new(int32((e.timing.LeaseDuration + time.Second - 1) / time.Second)),
		AcquireTime:          &acquired,
		RenewTime:            &renewed,
		LeaseTransitions:     new(transitions),
	}
}

// hold renews the Lease RetryPeriod after each renewal began, retrying
// every RetryPeriod while one fails, until ctx ends or the Lease has
// another holder. Each try gives up at the proof's deadline.
func (e *elector) hold(ctx context.Context) {
	next := e.renewedAt().Add(e.timing.RetryPeriod)
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
			e.log.Info("Failed to renew lease: it was deleted", "err", err)
			return
		case taken:
			e.log.Info("Failed to renew lease: another replica holds it", "holder", ptr.Deref(e.seen.Spec.HolderIdentity, ""))
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			e.log.Info("Failed to renew lease", "err", err)
			next = start.Add(e.timing.RetryPeriod)
		default:
			e.log.V(5).Info("Successfully renewed lease")
			next = e.renewedAt().Add(e.timing.RetryPeriod)
			if by := e.seen.Annotations[annotationWantedBy]; by != "" && by != e.identity && e.asked != nil {
				e.asked()
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
func (e *elector) renew(ctx context.Context) (taken bool, err error) {
	ctx, cancel := context.WithDeadline(ctx, e.renewedAt().Add(e.timing.RenewDeadline))
	defer cancel()
	for range 2 {
		start := time.Now()
		next := e.seen.DeepCopy()
		now := metav1.NewMicroTime(start)
		next.Spec = e.spec(ptr.Deref(e.seen.Spec.AcquireTime, now), now, ptr.Deref(e.seen.Spec.LeaseTransitions, 0))
		lease, err := e.leases.Update(ctx, next, metav1.UpdateOptions{})
		e.check(err, false)
		if err == nil {
			e.saw(lease)
			e.wrote(start)
			return false, nil
		}
		if apierrors.IsNotFound(err) {
			e.saw(nil)
			return true, err // deleted: another replica may create it
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		lease, err = e.leases.Get(ctx, e.name, metav1.GetOptions{})
		e.check(err, false)
		if apierrors.IsNotFound(err) {
			e.saw(nil)
			return true, err
		}
		if err != nil {
			return false, err
		}
		e.saw(lease)
		if !e.mine(lease) {
			return true, nil
		}
	}
	return false, errors.New("the Lease changed twice while renewing it")
}

// annotationHolderProcess, on a Lease, names the process of the holder's
// that wrote it: two processes with one identity (a StatefulSet's pod
// deleted by force and recreated while the old one runs, a hostname
// reused) see each other's Lease as held, not as their own.
const annotationHolderProcess = "kube.humus.z5labs.dev/holder-process"

// mine reports whether lease names this process the holder: this
// replica's identity, written by this process.
func (e *elector) mine(lease *coordinationv1.Lease) bool {
	return ptr.Deref(lease.Spec.HolderIdentity, "") == e.identity && lease.Annotations[annotationHolderProcess] == e.process
}

// stamp marks lease as this process's.
func (e *elector) stamp(lease *coordinationv1.Lease) {
	if e.process == "" {
		return
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[annotationHolderProcess] = e.process
}

func (e *elector) wrote(start time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if start.After(e.renewed) {
		e.renewed = start
	}
}

// check notes an answer of the API server's to a request of the Lease
// (creating: a Create) that no retry mends: a 403; a 400, 405, 406, 413,
// 415 or 422, a request the API server refuses as it is; and a 404 to a
// create, the Lease's namespace missing. (A 404 to a read or an update is
// the Lease missing, which a create mends.) It ends the campaign, and
// Serve, with the answer, as client-go's elector never does: it logs and
// retries forever, every replica Ready and none of them working. A 403
// ends it only once 403s have come for unservedGrace (see refusal).
func (e *elector) check(err error, creating bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	bad := incurable(err, creating)
	switch {
	case err == nil:
		e.lastRefused = nil
	case bad:
		e.lastRefused = fmt.Errorf("kube: the Lease %s: %w", e.describe(), err)
	}
	if e.denied != nil || !e.refusal.final(err, bad) {
		return
	}
	e.denied = e.lastRefused
	close(e.refused)
}

// refusedErr is the last answer no retry mends since the last success, or
// nil.
func (e *elector) refusedErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastRefused
}

// refusal tells an answer no retry mends from one a restarted API server
// gives for its first seconds: it serves before its authorizer has loaded
// RBAC, and refuses with a 403 meanwhile (seen for 6 s on a loaded
// machine, in the fault suite). So a 403 is final once 403s, with no success between, have
// come for unservedGrace, as a resource's are (served.go); any other
// refusal at once.
type refusal struct{ since time.Time }

// final reports whether err, the answer to a request, ends what made it;
// incurable says whether it is an answer no retry mends.
func (r *refusal) final(err error, incurable bool) bool {
	switch {
	case err == nil:
		r.since = time.Time{}
		return false
	case !incurable:
		return false
	case !apierrors.IsForbidden(err):
		return true
	}
	now := time.Now()
	if r.since.IsZero() {
		r.since = now
	}
	return now.Sub(r.since) >= unservedGrace
}

// incurable reports whether err is an answer to a request of the Lease
// that no retry mends: see check.
func incurable(err error, creating bool) bool {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return false
	}
	switch status.Status().Code {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusMethodNotAllowed, http.StatusNotAcceptable,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	case http.StatusNotFound:
		return creating
	}
	return false
}

// renewedAt is when the last renewal began.
func (e *elector) renewedAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.renewed
}

// deniedErr is the answer no retry mends that closed refused.
func (e *elector) deniedErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.denied
}

// proof is what the controller's own writes check: the deadline until which
// this replica can prove it holds the Lease.
type proof struct {
	elector       *elector
	renewDeadline time.Duration
}

// until is the proof's deadline: RenewDeadline after the last renewal
// began.
func (p proof) until() time.Time { return p.elector.renewedAt().Add(p.renewDeadline) }

type proofKey struct{}

// withProof is ctx carrying the proof of the Lease its writes are made
// under: the reconciles' context of a term of leading.
func withProof(ctx context.Context, p *proof) context.Context {
	return context.WithValue(ctx, proofKey{}, p)
}

// proofOf is the proof ctx carries, or nil.
func proofOf(ctx context.Context) *proof {
	p, _ := ctx.Value(proofKey{}).(*proof)
	return p
}

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
func (c *Controller) lead(ctx, stopping context.Context, sh *shard) error {
	le := c.settings.LeaderElection
	leading := make(chan struct{})
	campaigning, stopCampaigning := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), c.tel.logr))
	el := c.newElector(campaigning)
	el.blocked, el.giveBack = c.shardLeasesHeld(), func() { c.release(el) }
	campaigned := make(chan struct{})
	go func() {
		defer close(campaigned)
		el.campaign(campaigning, leading)
	}()
	defer func() {
		stopCampaigning()
		<-campaigned
	}()

	select {
	case <-leading:
	case <-stopping.Done():
		return nil
	case <-el.refused:
		return el.deniedErr()
	}

	// Lead: the reconciles of this term end with it.
	term, endTerm := context.WithCancel(c.work)
	defer endTerm()
	var workers sync.WaitGroup
	work := withProof(klog.NewContext(term, c.tel.logr), &proof{elector: el, renewDeadline: le.RenewDeadline})
	sh.lead(le)
	for range c.settings.Workers {
		workers.Go(func() { c.worker(work, sh) })
	}
	finished := make(chan struct{})
	idle := func() { <-finished }
	c.idle.Store(&idle)
	go func() {
		workers.Wait()
		close(finished)
	}()
	lost := c.watchProof(el, campaigned, finished)

	select {
	case <-stopping.Done():
		sh.stopTaking()
		select {
		case <-finished:
			stopCampaigning()
			<-campaigned
			c.release(el)
			return nil
		case <-lost:
		}
	case <-lost:
	}

	return c.lostTerm(ctx, el, sh, finished, endTerm, stopCampaigning)
}

// lostTerm ends a term whose Lease can't be proven: at once, its workers
// stop taking keys, its reconciles are cancelled, the campaign stops (a
// renewal now would only delay the next holder) and the connections are
// aborted; it returns by the lost deadline whether or not every
// Reconciler has (finished), with ErrLostLeadership, and with the answer
// when the renewals were refused.
func (c *Controller) lostTerm(ctx context.Context, el *elector, sh *shard, finished <-chan struct{}, endTerm, stopCampaigning func()) error {
	sh.stopTaking()
	endTerm()
	stopCampaigning()
	c.clients.abort()
	c.tel.log.WarnContext(ctx, "lost the lease", "lease", el.describe(), "renewed", el.renewedAt())
	deadline := time.NewTimer(time.Until(el.renewedAt().Add(lostDeadline(c.settings.LeaderElection))))
	defer deadline.Stop()
	select {
	case <-finished:
	case <-deadline.C:
		c.tel.log.ErrorContext(ctx, "a reconcile ignored its cancelled context: Serve returns without it", "lease", el.describe())
	}
	if refused := el.refusedErr(); refused != nil {
		// The renewals were refused: say which request, as Serve does for
		// a Lease it may not take.
		return fmt.Errorf("%w: %w", ErrLostLeadership, refused)
	}
	return ErrLostLeadership
}

// shardLeasesHeld returns what reports whether a held Lease of this
// controller's shards keeps a replica with one shard from the one Lease:
// when Settings.Shards goes back to 1, the old replicas' shards' Leases,
// until they are released or expire. It lists the Leases in the Lease's
// namespace. A list this replica may not make guards nothing: only a
// sharded controller needs list on Leases, so a controller that never
// ran sharded has no shards' Leases. A list that fails otherwise keeps the
// replica from the Lease until the next try.
func (c *Controller) shardLeasesHeld() func(ctx context.Context) bool {
	foreign := newForeignLeases(c)
	return func(ctx context.Context) bool {
		le := c.settings.LeaderElection
		ctx, cancel := context.WithTimeout(ctx, le.RenewDeadline)
		defer cancel()
		list, err := c.clients.leases.Leases(le.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Failed to list the leases", "err", err)
			return !apierrors.IsForbidden(err)
		}
		return foreign.blocked(list.Items, 1)[0]
	}
}

// watchProof returns a channel closed once this replica can no longer prove
// it holds the Lease: RenewDeadline has passed since its last renewal
// began, leader election stopped, or the API server refused a request of
// the Lease as no retry mends. It watches until finished is closed.
func (c *Controller) watchProof(el *elector, campaigned, finished <-chan struct{}) <-chan struct{} {
	lost := make(chan struct{})
	renewDeadline := c.settings.LeaderElection.RenewDeadline
	go func() {
		t := time.NewTimer(time.Until(el.renewedAt().Add(renewDeadline)))
		defer t.Stop()
		for {
			select {
			case <-t.C:
				left := time.Until(el.renewedAt().Add(renewDeadline))
				if left > 0 {
					t.Reset(left) // renewed meanwhile
					continue
				}
			case <-campaigned:
			case <-el.refused:
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
func (c *Controller) release(el *elector) {
	le := c.settings.LeaderElection
	ctx, cancel := context.WithTimeout(klog.NewContext(c.work, c.tel.logr), le.RenewDeadline)
	defer cancel()
	leases := el.leases
	lease, err := leases.Get(ctx, el.name, metav1.GetOptions{})
	if err != nil {
		c.tel.log.WarnContext(ctx, "releasing the lease", "lease", el.describe(), "error", err.Error())
		return
	}
	if !el.mine(lease) {
		return
	}
	delete(lease.Annotations, annotationHolderProcess)
	now := metav1.NewMicroTime(time.Now())
	lease.Spec = coordinationv1.LeaseSpec{
		LeaseDurationSeconds: new(int32(1)),
		AcquireTime:          &now,
		RenewTime:            &now,
		LeaseTransitions:     lease.Spec.LeaseTransitions,
	}
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		c.tel.log.WarnContext(ctx, "releasing the lease", "lease", el.describe(), "error", err.Error())
	}
}
