package control

import (
	"time"
)

// The one doorway to a term's work queue: every trigger, the resource's
// own events, an owned object's, a related object's, a held event and a
// reconcile's end, queues its key through queueNow or queueUnlessOwn.

// queueNow queues key at once, in place of any wait it had, at p or at the
// wait's priority if higher.
func (c *Controller) queueNow(w *Work, key string, p Priority, changed time.Time) {
	if waited, ok := w.Later.cancel(key); ok {
		p = max(p, waited)
	}
	w.Q.Add(key, p, changed)
}

// queueUnlessOwn queues key at once at p, for a change made at changed,
// unless the event is a reconcile's own write, which redundant tells.
// While key is being reconciled, the event is held until the reconcile
// ends: a write's event can come before its answer does, and so before the
// write is known.
func (c *Controller) queueUnlessOwn(w *Work, key string, p Priority, changed time.Time, redundant func() bool) {
	if c.InFlight.hold(key, heldEvent{redundant: redundant, p: p, changed: changed}) || redundant() {
		return
	}
	c.queueNow(w, key, p, changed)
}
