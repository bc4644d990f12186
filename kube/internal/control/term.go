package control

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/z5labs/humus/kube/internal/elector"
)

// A term of leading is the time this replica works as the holder of one
// Lease: the one Lease (lease.go), or one shard's (shards.go), whose
// elector (internal/elector) has just taken it and renews it. A term
// keeps to the elector's proof:
//
//   - Until RenewDeadline after the last renewal began, its workers take
//     keys and write; each write of its reconciles carries that deadline
//     (withProof), so none is still in flight after it.
//   - At that deadline, whatever the API server does (refuses, hangs,
//     answers slowly), or once the renewals stop or the API server refuses
//     the Lease as no retry mends, it takes no new key, cancels the
//     reconciles in flight, stops renewing, aborts the Client's
//     connections, so no request it queued is sent late, and makes no
//     write of its own.
//   - It waits for its workers until the lost deadline, halfway from
//     RenewDeadline to LeaseDuration after the last renewal began, and no
//     longer: its caller ends it by then.
//   - Handed back, on shutdown or when another replica asks for the shard,
//     it takes no new key, lets the reconciles in flight finish, stops
//     renewing and releases the Lease; unless the Lease can no longer be
//     proven first, which ends it as above.
//   - Its proof ends with it, before the Lease is released or once it is
//     lost: what its reconciles left to be written under it, such as the
//     Events a Recorder still holds, is never sent once a standby may hold
//     the Lease; handed back, it waits for such a write already sent to
//     be answered, up to the proof's deadline, before it releases the
//     Lease.

// term is one term of leading on one Lease.
type term struct {
	c   *Controller
	ctx context.Context // Serve's, for its log records
	el  *elector.Elector
	w   *Work
	// held is closed once the renewals have stopped; stopHolding stops
	// them.
	held        <-chan struct{}
	stopHolding func()
	attrs       []any // its log records': the shard's, or none
	// ended is when the term's proof ended, in Unix nanoseconds: 0 while
	// it lasts.
	ended atomic.Int64
	proof *Proof // its reconciles' writes', and what outlives them

	reconciles context.Context // its reconciles', with the proof
	end        context.CancelFunc
	lost       <-chan struct{}
	over       chan struct{}   // closed when the term has ended: the proof is watched until then
	finished   <-chan struct{} // closed once its workers have returned
}

// newTerm begins a term of el's Lease, which this replica has just taken,
// with w's work: it watches the proof from now on. attrs are added to its
// log records.
func (c *Controller) newTerm(ctx context.Context, el *elector.Elector, w *Work, held <-chan struct{}, stopHolding func(), attrs ...any) *term {
	reconciles, end := context.WithCancel(c.work)
	none := make(chan struct{})
	close(none)
	t := &term{
		c: c, ctx: ctx, el: el, w: w, held: held, stopHolding: stopHolding, attrs: attrs,
		end: end, over: make(chan struct{}), finished: none,
	}
	t.proof = newProof(t.provenUntil)
	t.reconciles = withTermProof(klog.NewContext(reconciles, c.tel.logr), t.proof)
	t.lost = t.watchProof()
	return t
}

// watchProof returns a channel closed once this replica can no longer prove
// it holds the Lease: RenewDeadline has passed since its last renewal
// began, the renewals stopped, or the API server refused a request of the
// Lease as no retry mends. It watches until the term is over.
func (t *term) watchProof() <-chan struct{} {
	lost := make(chan struct{})
	go func() {
		timer := time.NewTimer(time.Until(t.el.ProvenUntil()))
		defer timer.Stop()
		for {
			select {
			case <-timer.C:
				left := time.Until(t.el.ProvenUntil())
				if left > 0 {
					timer.Reset(left) // renewed meanwhile
					continue
				}
			case <-t.held:
			case <-t.el.Refused():
			case <-t.over:
				return
			}
			close(lost)
			return
		}
	}()
	return lost
}

// provenUntil is the term's proof: the elector's (el.ProvenUntil) while
// the term lasts, and once it has ended, when it did.
func (t *term) provenUntil() time.Time {
	if ended := t.ended.Load(); ended != 0 {
		return time.Unix(0, ended)
	}
	return t.el.ProvenUntil()
}

// endProof ends the term's proof now, unless it has already ended: no
// write made under it is sent after this.
func (t *term) endProof() {
	now := time.Now()
	if until := t.el.ProvenUntil(); until.Before(now) {
		now = until
	}
	t.ended.CompareAndSwap(0, now.UnixNano())
}

// lead starts the term's workers (startWorkers): the reconciles of the
// term end with it.
func (t *term) lead() { t.finished = t.c.startWorkers(t.reconciles, t.w, t.proof) }

// serve runs the term until stop or ask is closed (nil: never), and then
// hands it back, or until the Lease can no longer be proven. Either way,
// its workers take no more keys. Handed back, it lets the reconciles in
// flight finish, stops renewing and releases the Lease, and reports false;
// lost, whether before or while it hands back, it reports true, and the
// caller ends the term with lose.
func (t *term) serve(stop, ask <-chan struct{}) (lost bool) {
	select {
	case <-stop:
	case <-ask:
	case <-t.lost:
	}
	t.w.stopTaking()
	select {
	case <-t.lost:
		return true
	default:
	}
	select {
	case <-t.finished:
		t.release()
		return false
	case <-t.lost:
		return true
	}
}

// release stops renewing the Lease and, once the renewals have stopped,
// ends the term's proof, waits for the writes still in flight under it
// (an Event a Recorder is sending) to be answered, up to the proof's
// deadline, and releases the Lease.
func (t *term) release() {
	t.stopHolding()
	<-t.held
	deadline := t.el.ProvenUntil()
	t.endProof()
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	select {
	case <-t.proof.end():
	case <-wait.C: // each write's context ends at the deadline too
	}
	t.c.release(t.el)
}

// lose ends a term whose Lease can't be proven: at once, its workers stop
// taking keys, its proof ends, its reconciles are cancelled, the renewals
// stop (one now would only delay the next holder) and the connections are
// aborted. It
// waits for the workers until the lost deadline, and reports whether they
// returned by then.
func (t *term) lose() bool {
	t.w.stopTaking()
	t.endProof()
	t.end()
	t.stopHolding()
	t.c.API.Abort()
	t.c.tel.log.WarnContext(t.ctx, "lost the lease", append([]any{"lease", t.el.Describe(), "renewed", t.el.RenewedAt()}, t.attrs...)...)
	deadline := time.NewTimer(time.Until(t.el.RenewedAt().Add(lostDeadline(t.c.settings.LeaderElection))))
	defer deadline.Stop()
	select {
	case <-t.finished:
		return true
	case <-deadline.C:
		return false
	}
}

// close ends the term's reconciles, its proof, and the watch of it.
func (t *term) close() {
	t.endProof()
	t.end()
	close(t.over)
}

// lostDeadline is how long after its last renewal began a replica that
// lost the Lease has to stop: halfway from RenewDeadline to LeaseDuration,
// so its workers are stopped with a margin before another replica can take
// the Lease.
func lostDeadline(le LeaderElection) time.Duration {
	return le.RenewDeadline + (le.LeaseDuration-le.RenewDeadline)/2
}
