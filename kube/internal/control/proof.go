package control

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Proof is what every write of the controller's own checks before it is
// sent: the deadline until which this replica can prove it holds the Lease
// the write is made under, as of now (Until). A term of leading hands it
// to its workers, which pass it to the controller's own writes, the status
// and the finalizer, explicitly (Process, ApplyStatus, ApplyFinalizer); a
// write without one isn't sent. Its reconciles' context carries it too,
// for the one writer the end user's context reaches, a Recorder
// (ProofOf). A write that
// outlives its reconcile, such as an Event a Recorder sends, holds the
// proof while it is in flight (begin, done): a term that hands its Lease
// back ends its proof, so no such write starts, and waits for those in
// flight to be answered before it releases the Lease, so none is stored
// once a standby may hold it.
type Proof struct {
	until func() time.Time

	mu       sync.Mutex
	ended    bool
	inFlight sync.WaitGroup
}

// newProof is a proof whose deadline, as of now, until says.
func newProof(until func() time.Time) *Proof { return &Proof{until: until} }

// Until is the proof's deadline, as of now.
func (p *Proof) Until() time.Time { return p.until() }

// Begin holds the proof for a write about to be sent, and reports whether
// it may be: false once the proof has ended. A write begun is done.
func (p *Proof) Begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return false
	}
	p.inFlight.Add(1)
	return true
}

// Done ends a write begun.
func (p *Proof) Done() { p.inFlight.Done() }

// end ends the proof for the writes not yet begun, and returns a channel
// closed once the writes in flight are done.
func (p *Proof) end() <-chan struct{} {
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.inFlight.Wait()
		close(done)
	}()
	return done
}

type proofKey struct{}

// NewProof is a proof of the Lease whose deadline, as of now, until
// says, for writes made outside a term of leading (the tests').
func NewProof(until func() time.Time) *Proof { return newProof(until) }

// WithProof is ctx carrying a proof of the Lease, until, for a Recorder's
// writes made outside a term of leading (the tests').
func WithProof(ctx context.Context, until func() time.Time) context.Context {
	return withTermProof(ctx, newProof(until))
}

// withTermProof is ctx carrying p, the proof of the Lease its writes are
// made under: the reconciles' context of a term of leading.
func withTermProof(ctx context.Context, p *Proof) context.Context {
	return context.WithValue(ctx, proofKey{}, p)
}

// ProofOf is the proof ctx carries, or nil.
func ProofOf(ctx context.Context) *Proof {
	p, _ := ctx.Value(proofKey{}).(*Proof)
	return p
}

// ErrNotLeading is the error of a write this replica can't prove it may
// make: it can't prove it holds the Lease.
var ErrNotLeading = errors.New("kube: this replica can't prove it holds the Lease")
