// Package health says whether an App is ready and alive, and serves the
// answer as Kubernetes' probes expect it.
//
// What it promises:
//
//   - A Monitor answers nil when healthy, and otherwise an error saying why.
//   - Binary is a Monitor that is set: unhealthy, with a reason, until
//     MarkHealthy is called.
//   - All is healthy only when every Monitor it holds is, and otherwise
//     answers every reason at once.
//   - NewService serves GET /readyz and /livez over HTTP, listening through
//     the Host: 200 "ok" when the probe's monitors are healthy, and 503 with
//     the reasons otherwise. A probe with no monitors is healthy. Handle
//     serves another handler beside them, such as /metrics.
package health

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// Monitor reports whether something is healthy.
type Monitor interface {
	// Healthy returns nil when healthy, and otherwise an error saying why.
	Healthy(ctx context.Context) error
}

// MonitorFunc is a function that is a Monitor.
type MonitorFunc func(ctx context.Context) error

// Healthy calls f.
func (f MonitorFunc) Healthy(ctx context.Context) error { return f(ctx) }

// Binary is a Monitor that is set by its owner. Its zero value is unhealthy,
// with the reason "not ready"; it is safe for concurrent use.
type Binary struct {
	mu     sync.Mutex
	reason error
	set    bool
}

// NewBinary returns a Binary that is unhealthy for reason until it is marked
// healthy. A nil reason reads "not ready".
func NewBinary(reason error) *Binary {
	b := &Binary{}
	b.MarkUnhealthy(reason)
	return b
}

var errNotReady = errors.New("not ready")

// MarkHealthy makes b healthy.
func (b *Binary) MarkHealthy() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reason, b.set = nil, true
}

// MarkUnhealthy makes b unhealthy for reason. A nil reason reads
// "not ready".
func (b *Binary) MarkUnhealthy(reason error) {
	if reason == nil {
		reason = errNotReady
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reason, b.set = reason, true
}

// Healthy returns nil when b is healthy, and the reason it isn't otherwise.
func (b *Binary) Healthy(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.set {
		return errNotReady
	}
	return b.reason
}

// All returns a Monitor that is healthy when every one of ms is, and that
// otherwise answers every unhealthy one's reason, joined in ms's order. A
// nil Monitor in ms is ignored; All() is healthy.
func All(ms ...Monitor) Monitor {
	ms = slices.Clone(ms)
	return MonitorFunc(func(ctx context.Context) error {
		var errs []error
		for _, m := range ms {
			if m == nil {
				continue
			}
			if err := m.Healthy(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}
