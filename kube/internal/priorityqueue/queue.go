// Package priorityqueue is a controller's work queue of object keys, in two
// priorities: a key a change queued goes ahead of a backlog of keys a cold
// start queued.
//
// It is client-go's work queue (workqueue.Typed), with an order of its own
// in place of its first in, first out. client-go v0.37.2 has no priority
// queue, and its Typed queue can't be given a priority with an add, but it
// takes the order it hands keys out in from a workqueue.Queue in its config,
// and calls that Queue's Touch when a key that waits is added again: Order
// is that Queue. So client-go's queue still keeps what it promises (one
// worker per key, an add folded into a waiting key, shutdown, metrics),
// and Order decides only which waiting key goes next. A Queue promises:
//
//   - Two priorities, Normal and Low. Get hands out a Normal key while one
//     waits, and a Low key only when none does, or when the oldest Low
//     key has waited Config.LowMaxWait (aged up): then every other Get
//     hands out a Low key, until none that waits has waited that long. So
//     neither priority waits behind the other's backlog: a change behind
//     a cold start's by one key at most, the cold start's behind a steady
//     stream of changes by half the takes at most. Low is first in, first
//     out. At Normal, namespaces take turns (a key's namespace is its part
//     before "/"; cluster-scoped keys share one): each Get at Normal hands
//     out the key that has waited longest in the namespace whose turn it
//     is, and that namespace's next turn comes after every other
//     namespace with a Normal key waiting has had one. So a burst of
//     changes in one namespace delays a change in another by at most one
//     key a namespace, not by the burst; within one namespace, first in,
//     first out.
//   - A key waits at most once (stingy). Added again while it waits, it
//     keeps its place; added at Normal while it waits at Low, it moves up,
//     once, to the back of Normal's line. It never moves down while it
//     waits, but at Lead.
//   - A key is never handed to two workers at once. Added while a worker
//     has it, it waits until the worker is Done with it, and then goes in
//     at the highest priority of the adds meanwhile.
//   - Each key carries the time of the oldest change it was added for
//     since a worker last took it (the earliest non-zero changed of its
//     Normal adds): Get hands it out with the key, and Restamp gives back
//     one that the worker didn't handle.
//   - Lead marks the start of a term of work: keys that have waited at
//     Normal for longer than a given time move down to Low, placed among
//     the Low keys in the order the keys came in, as a new leader's
//     backlog, and change times older than that are dropped; the waits
//     OldestWait reports count from then at the earliest.
//   - ShutDown is client-go's: adds are ignored from then, and Get still
//     hands out the keys that wait, until none is left, then reports
//     shutdown. It stops the queue's goroutine at once. A controller that
//     must leave its backlog stops taking keys itself.
//   - The metrics are client-go's, through the config's MetricsProvider:
//     the depth, the adds (a key already waiting isn't counted, whatever
//     its priority), the time from a key's add to its take, and the work
//     in flight, set every 500ms. Each time client-go sets the work in
//     flight, OldestWait's ages are handed to Config.OldestWait, for each
//     priority; once at ShutDown, as 0.
//
// A Low key waits LowMaxWait at most before it is aged up, however steadily
// Normal keys come, and then its turn in the Low line, at every other
// take: its wait counts as OldestWait's does, from the start of the term
// at the earliest, so a new leader's backlog has LowMaxWait behind the
// changes first.
package priorityqueue

import (
	"cmp"
	"container/list"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Priority is a key's place in the queue: Normal keys go first.
type Priority uint8

const (
	// Low is a key's priority when nothing changed: the initial list, a
	// resync, a new leader's backlog.
	Low Priority = iota
	// Normal is a key's priority when a change queued it.
	Normal
)

// Priorities are both priorities, Normal first: the order OldestWait's
// callback is called in.
var Priorities = []Priority{Normal, Low}

// String is the priority's name, low or normal.
func (p Priority) String() string {
	if p == Normal {
		return "normal"
	}
	return "low"
}

// Config configures a Queue.
type Config struct {
	// Name is the queue's, handed to MetricsProvider.
	Name string
	// MetricsProvider records client-go's metrics of the queue; nil records
	// none.
	MetricsProvider workqueue.MetricsProvider
	// LowMaxWait is how long a Low key waits at most before it is aged up
	// (see the package doc); 0, never.
	LowMaxWait time.Duration
	// OldestWait, if set, is called for each priority, with how long the
	// key that has waited longest at it has waited (see Queue.OldestWait),
	// each time the queue sets the work in flight, and with 0 at ShutDown.
	OldestWait func(p Priority, wait time.Duration)
}

// Item is a key a worker took: the priority it waited at, and the time of
// the oldest change it was added for since a worker last took it, zero if
// none.
type Item struct {
	Key      string
	Priority Priority
	Changed  time.Time
}

// Queue is a work queue of keys in two priorities (see the package doc).
type Queue struct {
	work   *workqueue.Typed[string]
	order  *Order
	oldest func(Priority, time.Duration)
}

// New returns a queue configured by cfg.
func New(cfg Config) *Queue {
	q := &Queue{order: NewOrder(), oldest: cfg.OldestWait}
	q.order.lowMaxWait = cfg.LowMaxWait
	var mp workqueue.MetricsProvider
	if cfg.MetricsProvider != nil {
		mp = metricsProvider{MetricsProvider: cfg.MetricsProvider, q: q}
	}
	q.work = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Name: cfg.Name, MetricsProvider: mp, Queue: q.order,
	})
	return q
}

// Add queues key at p, or raises its priority to p if it waits at a lower
// one; changed, if not zero and p is Normal, is when the change it is
// added for was made.
func (q *Queue) Add(key string, p Priority, changed time.Time) {
	q.order.request(key, p, changed)
	q.work.Add(key)
}

// Get waits for a key to hand out, and returns it, or reports shutdown
// once the queue is shut down and empty. The caller calls Done with the
// key once it has finished with it.
func (q *Queue) Get() (Item, bool) {
	key, shutdown := q.work.Get()
	if shutdown {
		return Item{}, true
	}
	p, changed := q.order.took(key)
	return Item{Key: key, Priority: p, Changed: changed}, false
}

// Done marks key as finished with: if it was added meanwhile, it waits
// again.
func (q *Queue) Done(key string) { q.work.Done(key) }

// Restamp gives back the change time Get handed out with key, for a
// change its worker didn't handle: the next Get of key hands out the
// earlier of it and any newer change's.
func (q *Queue) Restamp(key string, changed time.Time) { q.order.restamp(key, changed) }

// Len is how many keys wait.
func (q *Queue) Len() int { return q.work.Len() }

// Lead begins a term of work at now: every key that has waited at Normal
// since before now less keep moves down to Low, placed among the Low keys
// in the order the keys came in at their priorities, and the change times
// of such keys are dropped, as they are a former leader's to handle.
// OldestWait counts from now at the earliest.
func (q *Queue) Lead(now time.Time, keep time.Duration) { q.order.lead(now, keep) }

// OldestWait reports how long the key that has waited longest at each
// priority has waited at it, from its add or, if later, from the start of
// the term (Lead): 0 when no key waits at it, and 0 for both outside a
// term.
func (q *Queue) OldestWait(now time.Time) (normal, low time.Duration) {
	return q.order.oldestWait(now)
}

// ShutDown stops the queue, as client-go's ShutDown does, ends the term,
// and reports 0 to Config.OldestWait for each priority.
func (q *Queue) ShutDown() {
	q.work.ShutDown()
	q.order.lead(time.Time{}, 0)
	if q.oldest != nil {
		for _, p := range Priorities {
			q.oldest(p, 0)
		}
	}
}

// reportOldest hands Config.OldestWait each priority's oldest wait.
func (q *Queue) reportOldest() {
	if q.oldest == nil {
		return
	}
	normal, low := q.OldestWait(time.Now())
	q.oldest(Normal, normal)
	q.oldest(Low, low)
}

// metricsProvider is the config's, with the work in flight's gauge
// reporting the oldest waits each time the queue sets it.
type metricsProvider struct {
	workqueue.MetricsProvider
	q *Queue
}

func (p metricsProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return ticking{SettableGaugeMetric: p.MetricsProvider.NewUnfinishedWorkSecondsMetric(name), q: p.q}
}

type ticking struct {
	workqueue.SettableGaugeMetric
	q *Queue
}

func (t ticking) Set(v float64) {
	t.SettableGaugeMetric.Set(v)
	t.q.reportOldest()
}

// Order is the order a Queue hands its keys out in: a workqueue.Queue,
// whose methods client-go's queue calls under its own lock. Its own lock
// guards it against the calls of Queue, which come outside that lock.
type Order struct {
	mu      sync.Mutex
	low     list.List // of *entry, oldest first
	normal  fairLine
	waiting map[string]*list.Element
	raise   map[string]Priority  // the highest priority of key's adds not yet pushed or touched
	changed map[string]time.Time // the oldest change each key was added for
	taken   map[string]Priority  // the priority each key a worker holds waited at
	seq     uint64
	term    time.Time // when the term began; zero outside one

	lowMaxWait time.Duration // how long a Low key waits before it is overdue; 0, never
	tookLow    bool          // the last take was an overdue Low key's, ahead of Normal keys
}

type entry struct {
	key   string
	p     Priority
	seq   uint64    // when it came in at p, in the order of every entry's
	since time.Time // when it came in at p
}

var _ workqueue.Queue[string] = (*Order)(nil)

// NewOrder returns an empty order.
func NewOrder() *Order {
	return &Order{
		normal:  fairLine{by: map[string]*list.List{}, turn: map[string]*list.Element{}},
		waiting: map[string]*list.Element{},
		raise:   map[string]Priority{},
		changed: map[string]time.Time{},
		taken:   map[string]Priority{},
	}
}

// request notes an add of key at p for changed, before client-go's queue
// pushes or touches it.
func (o *Order) request(key string, p Priority, changed time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if was, ok := o.raise[key]; !ok || p > was {
		o.raise[key] = p
	}
	if p == Normal && !changed.IsZero() {
		if was, ok := o.changed[key]; !ok || changed.Before(was) {
			o.changed[key] = changed
		}
	}
}

// Push queues key, which doesn't wait, at the priority of its adds.
func (o *Order) Push(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.raise[key]
	delete(o.raise, key)
	o.push(key, p, time.Now())
}

func (o *Order) push(key string, p Priority, now time.Time) {
	o.seq++
	e := &entry{key: key, p: p, seq: o.seq, since: now}
	if p == Normal {
		o.waiting[key] = o.normal.pushBack(e)
		return
	}
	o.waiting[key] = o.low.PushBack(e)
}

// Touch moves key, which waits, up to the priority of its adds since, if
// that is higher.
func (o *Order) Touch(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p, ok := o.raise[key]
	delete(o.raise, key)
	el := o.waiting[key]
	if !ok || el == nil || p <= el.Value.(*entry).p {
		return
	}
	o.low.Remove(el) // it waited at Low: Normal is the highest
	o.push(key, p, time.Now())
}

// Len is how many keys wait.
func (o *Order) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.low.Len() + o.normal.n
}

// Pop takes the key that has waited longest at the highest priority that
// has one; but while the oldest Low key is overdue, every other take is
// the Low line's. client-go's queue calls it only when a key waits.
func (o *Order) Pop() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var e *entry
	front := o.low.Front()
	switch {
	case o.normal.n > 0 && (front == nil || o.tookLow || !o.overdue(front.Value.(*entry), time.Now())):
		e, o.tookLow = o.normal.pop(), false
	case front != nil:
		e, o.tookLow = o.low.Remove(front).(*entry), o.normal.n > 0
	default:
		return ""
	}
	delete(o.waiting, e.key)
	o.taken[e.key] = e.p
	return e.key
}

// took returns the priority key, just taken, waited at, and the oldest
// change it was added for, and forgets both.
func (o *Order) took(key string) (Priority, time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p, changed := o.taken[key], o.changed[key]
	delete(o.taken, key)
	delete(o.changed, key)
	return p, changed
}

func (o *Order) restamp(key string, changed time.Time) {
	if changed.IsZero() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if was, ok := o.changed[key]; !ok || changed.Before(was) {
		o.changed[key] = changed
	}
}

// lead begins a term at now (none, if now is zero): see Queue.Lead.
func (o *Order) lead(now time.Time, keep time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.term = now
	if now.IsZero() {
		return
	}
	cutoff := now.Add(-keep)
	for key, at := range o.changed {
		if at.Before(cutoff) {
			delete(o.changed, key)
		}
	}
	// The Low line is in the order of seq, and so are the Normal keys that
	// came in before the cutoff: merge those into it, keeping that order.
	low := o.low.Front()
	for _, e := range o.normal.takeBefore(cutoff) {
		for low != nil && low.Value.(*entry).seq < e.seq {
			low = low.Next()
		}
		e.p = Low
		if low == nil {
			o.waiting[e.key] = o.low.PushBack(e)
		} else {
			o.waiting[e.key] = o.low.InsertBefore(e, low)
		}
	}
}

// waited is how long e has waited at its priority at now, from the start
// of the term at the earliest, as OldestWait reports it.
func (o *Order) waited(e *entry, now time.Time) time.Duration {
	since := e.since
	if since.Before(o.term) {
		since = o.term
	}
	return max(0, now.Sub(since))
}

// overdue reports whether e, a Low key, has waited lowMaxWait.
func (o *Order) overdue(e *entry, now time.Time) bool {
	return o.lowMaxWait > 0 && o.waited(e, now) >= o.lowMaxWait
}

func (o *Order) oldestWait(now time.Time) (normal, low time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.term.IsZero() {
		return 0, 0
	}
	age := func(e *entry) time.Duration {
		if e == nil {
			return 0
		}
		return o.waited(e, now)
	}
	var lowest *entry
	if front := o.low.Front(); front != nil {
		lowest = front.Value.(*entry)
	}
	return age(o.normal.oldest()), age(lowest)
}

// fairLine is the Normal keys' line: a line for each namespace, and the
// namespaces with keys waiting taking turns.
type fairLine struct {
	by    map[string]*list.List    // of *entry, oldest first, by namespace
	turns list.List                // of string: the namespaces with keys waiting, whose turn comes first
	turn  map[string]*list.Element // each namespace's place in turns
	n     int                      // how many keys wait
}

// namespaceOf is key's namespace: its part before "/", or "" for a
// cluster-scoped object's key.
func namespaceOf(key string) string {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return ns
}

// pushBack queues e at the back of its namespace's line; a namespace that
// had no key waiting takes its turn after every other's.
func (f *fairLine) pushBack(e *entry) *list.Element {
	ns := namespaceOf(e.key)
	line := f.by[ns]
	if line == nil {
		line = list.New()
		f.by[ns] = line
		f.turn[ns] = f.turns.PushBack(ns)
	}
	f.n++
	return line.PushBack(e)
}

// remove takes el out of its namespace's line.
func (f *fairLine) remove(el *list.Element) *entry {
	e := el.Value.(*entry)
	ns := namespaceOf(e.key)
	line := f.by[ns]
	line.Remove(el)
	f.n--
	if line.Len() == 0 {
		delete(f.by, ns)
		f.turns.Remove(f.turn[ns])
		delete(f.turn, ns)
	}
	return e
}

// pop takes the oldest key of the namespace whose turn it is, whose next
// turn then comes after every other's. f isn't empty.
func (f *fairLine) pop() *entry {
	ns := f.turns.Front().Value.(string)
	f.turns.MoveToBack(f.turn[ns])
	return f.remove(f.by[ns].Front())
}

// oldest is the key that has waited longest, or nil.
func (f *fairLine) oldest() *entry {
	var oldest *entry
	for _, line := range f.by {
		if e := line.Front().Value.(*entry); oldest == nil || e.seq < oldest.seq {
			oldest = e
		}
	}
	return oldest
}

// takeBefore takes the keys that came in before cutoff out, and returns
// them in the order they came in.
func (f *fairLine) takeBefore(cutoff time.Time) []*entry {
	var els []*list.Element
	for _, line := range f.by {
		for el := line.Front(); el != nil && el.Value.(*entry).since.Before(cutoff); el = el.Next() {
			els = append(els, el)
		}
	}
	out := make([]*entry, 0, len(els))
	for _, el := range els {
		out = append(out, f.remove(el))
	}
	slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	return out
}
