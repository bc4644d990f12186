package control

import (
	"sync"
	"time"
)

// A key is queued here, whatever queues it:
//
//   - queueNow, which a change queues its key through, in place of any
//     wait it had; queueUnlessOwn, the same unless the change is a
//     reconcile's own write (ownwrites.go tells), and inFlight, which
//     holds a change that comes while its key is reconciled until the
//     reconcile ends.
//   - later, the one wait of each key: Result.After's, an error's backoff
//     (newRetryLimiter), or reading its own write.
//   - The work queue itself, in two priorities, over
//     kube/internal/priorityqueue (workqueue.go).

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

// inFlight keeps, for each key being reconciled, the events held until its
// reconcile ends.
type inFlight struct {
	mu sync.Mutex
	m  map[string][]heldEvent
}

// heldEvent is an event held while its key is reconciled.
type heldEvent struct {
	redundant func() bool // reports whether the event was the reconcile's own
	p         Priority
	changed   time.Time
}

func (f *inFlight) begin(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string][]heldEvent{}
	}
	f.m[key] = nil
}

// hold keeps an event of key's until its reconcile ends, and reports
// whether key is being reconciled.
func (f *inFlight) hold(key string, e heldEvent) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	held, ok := f.m[key]
	if ok {
		f.m[key] = append(held, e)
	}
	return ok
}

// end reports whether any event held for key's reconcile was not its own,
// so the key is to be queued again, at the highest priority of those, for
// the oldest change among them. Each is judged, in the order it came.
func (f *inFlight) end(key string) (again bool, p Priority, changed time.Time) {
	f.mu.Lock()
	held := f.m[key]
	delete(f.m, key)
	f.mu.Unlock()
	for _, e := range held {
		if e.redundant() {
			continue
		}
		again, p = true, max(p, e.p)
		if !e.changed.IsZero() && (changed.IsZero() || e.changed.Before(changed)) {
			changed = e.changed
		}
	}
	return again, p, changed
}

// later holds each key's one pending reconcile: Result.After's, an
// error's backoff, or the wait to read its own write. A change to the
// object, or a reconcile of it that succeeds, replaces it, so "again after
// this long, unless it changes first" never reconciles once more for a
// wait that a change already ended. client-go's delaying queue can't take
// a delay back, so the controller keeps its own timers. A wait keeps the
// priority the key was taken at, and queues it at that priority when it
// ends.
type later struct {
	mu      sync.Mutex
	q       Queue
	timers  map[string]pending
	stopped bool
}

type pending struct {
	t *time.Timer
	p Priority
}

func NewLater(q Queue) *later { return &later{q: q, timers: map[string]pending{}} }

// add queues key at p after d, in place of any wait it had, at the higher
// of the two priorities.
func (l *later) add(key string, d time.Duration, p Priority) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if w, ok := l.timers[key]; ok {
		w.t.Stop()
		p = max(p, w.p)
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		l.mu.Lock()
		if l.timers[key].t != t {
			l.mu.Unlock()
			return // replaced or cancelled meanwhile
		}
		delete(l.timers, key)
		l.mu.Unlock()
		l.q.Add(key, p, time.Time{})
	})
	l.timers[key] = pending{t: t, p: p}
}

// cancel drops key's wait, if it has one, and returns its priority and
// whether it had one.
func (l *later) cancel(key string) (Priority, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.timers[key]
	if ok {
		w.t.Stop()
		delete(l.timers, key)
	}
	return w.p, ok
}

// Stop drops every wait, for good.
func (l *later) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for key, w := range l.timers {
		w.t.Stop()
		delete(l.timers, key)
	}
}
