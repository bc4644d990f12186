package record

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	eventsclient "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/internal/control"
)

// Recorder is kube.Recorder's engine: the backlog of Events, their
// series, and their writes.
type Recorder struct {
	Events     eventsclient.EventsV1Interface
	controller string
	instance   string
	log        *slog.Logger
	logr       logr.Logger // client-go's records, through the logger in their context
	count      metric.Int64Counter
	attr       attribute.KeyValue  // humus.kube.controller.name
	drops      *control.FailureLog // the drops' records, by why and reason

	Mu      sync.Mutex
	Series  map[eventDigest]*series
	Backlog []*pendingEvent // oldest first
	ready   chan struct{}   // holds a token while the backlog may be non-empty
	serving chan struct{}   // closed when Serve returns; nil until it runs
	closed  bool            // Shutdown has ended: Record drops every Event
	// lastFirst is the first time of the last Event created: a new one's
	// is later, so each Event has a name of its own.
	lastFirst int64
}

// The Recorder's bounds. The window and the backlog are client-go's.
const (
	SeriesWindow   = 6 * time.Minute
	MaxSeries      = 4096 // client-go's correlator keeps as many in its LRU
	MaxBacklog     = 1000
	firstRetry     = 500 * time.Millisecond
	maxRetry       = 16 * time.Second
	retryFor       = time.Minute
	maxReason      = 128 // the API server's ReasonLengthLimit
	maxAction      = 128 // its ActionLengthLimit
	MaxInstance    = 128 // its ReportingInstanceLengthLimit
	MaxNote        = 1024
	maxEventName   = 253 // a DNS-1123 subdomain
	SweepEvery     = time.Minute
	eventNameFixed = 1 + 16 // a dot, and the nanoseconds in hexadecimal
)

// New returns a Recorder that writes Events through events, reported by
// controller and instance, checked, recording through t.
func New(events eventsclient.EventsV1Interface, controller, instance string, t humus.Telemetry) (*Recorder, error) {
	resolved := t.Resolved()
	count, err := resolved.MeterProvider.Meter(control.InstrumentationScope).Int64Counter("humus.kube.controller.events", metric.WithUnit("{event}"),
		metric.WithDescription("Events recorded, by outcome: created, counted into a series, or dropped, and why."))
	if err != nil {
		return nil, fmt.Errorf("kube: creating the instrument humus.kube.controller.events: %w", err)
	}
	handler := otelslog.NewHandler(control.InstrumentationScope, otelslog.WithLoggerProvider(resolved.LoggerProvider))
	return &Recorder{
		Events:     events,
		controller: controller,
		instance:   instance,
		log:        slog.New(handler),
		logr:       logr.FromSlogHandler(control.Verbosity{Handler: handler}),
		count:      count,
		attr:       attribute.String(control.AttrController, controller),
		Series:     map[eventDigest]*series{},
		ready:      make(chan struct{}, 1),
		drops:      control.NewFailureLog(),
	}, nil
}

// The attributes of humus.kube.controller.events.
const (
	AttrEventOutcome = "humus.kube.controller.event.outcome"
	AttrEventDropped = "humus.kube.controller.event.dropped_because"
)

// How a recorded Event ended, for humus.kube.controller.events: each Record
// ends in one of these.
const (
	Created = "created" // written, as a new Event
	Counted = "counted" // written, as a repeat in an Event's series
	Dropped = "dropped"
)

// Why an Event was dropped, for humus.kube.controller.events.
const (
	DropInvalid    = "invalid"      // the API server would refuse it
	DropNotLeading = "not_leading"  // no proof of the Lease, or its deadline passed
	DropBacklog    = "backlog_full" // 1,000 Events waited to be written
	DropRefused    = "refused"      // the API server refused it as no retry mends
	DropGaveUp     = "gave_up"      // tried for a minute
	DropShutdown   = "shutdown"     // recorded once the Recorder was shut down, or unwritten by the end of Shutdown
)

// eventDigest tells one Event from another: a hash of everything but its
// times and count, so repeats of one have the same.
type eventDigest [16]byte

// series is what the Recorder keeps of an Event seen in the last 6
// minutes: no more than counting its repeats needs.
type series struct {
	first, last int64 // when it was first and last recorded, in Unix nanoseconds
	count       int32 // how many times it was recorded, in the series
	written     int32 // the count the API server holds; 0 before it is created
	// pending is the Event's write while it waits in the backlog or is
	// being written; nil otherwise. An Event has at most one.
	pending *pendingEvent
}

// pendingEvent is an Event waiting to be written, or being written.
type pendingEvent struct {
	digest eventDigest
	Event  Event
	proof  *control.Proof    // the last Record's
	span   trace.SpanContext // the last Record's, the parent of the write's span
}

// Record queues e: kube.Recorder.Record.
func (r *Recorder) Record(ctx context.Context, e Event) {
	now := time.Now()
	until := control.ProofOf(ctx)
	if until == nil {
		r.drop(ctx, e, 1, DropNotLeading, errors.New("the context carries no proof of the Lease: record an Event with a reconcile's context"))
		return
	}
	if deadline := until.Until(); !now.Before(deadline) {
		r.drop(ctx, e, 1, DropNotLeading, fmt.Errorf("the proof of the Lease ran out at %s", deadline.Format(time.RFC3339Nano)))
		return
	}
	if err := e.check(); err != nil {
		r.drop(ctx, e, 1, DropInvalid, err)
		return
	}
	e.Note = Cut(e.Note, MaxNote)
	d := e.digest()
	span := trace.SpanContextFromContext(ctx)

	r.Mu.Lock()
	if r.closed {
		r.Mu.Unlock()
		r.drop(ctx, e, 1, DropShutdown, errors.New("the Recorder is shut down"))
		return
	}
	s := r.Series[d]
	switch {
	case s != nil && s.pending != nil:
		// Its write waits, or is being written: it writes this repeat too.
		s.count++
		s.last = now.UnixNano()
		s.pending.proof, s.pending.span = until, span
		r.Mu.Unlock()
		return
	case s != nil && now.UnixNano()-s.last < int64(SeriesWindow):
		if !r.push(s, &pendingEvent{digest: d, Event: e, proof: until, span: span}) {
			r.Mu.Unlock()
			r.drop(ctx, e, 1, DropBacklog, fmt.Errorf("%d Events wait to be written", MaxBacklog))
			return
		}
		s.count++
		s.last = now.UnixNano()
	default:
		if s == nil && len(r.Series) >= MaxSeries {
			r.evictOldest()
		}
		// The Event's name is its object's and its first time's: no two of
		// this Recorder's have one time.
		first := max(now.UnixNano(), r.lastFirst+1)
		s = &series{first: first, last: now.UnixNano(), count: 1}
		if !r.push(s, &pendingEvent{digest: d, Event: e, proof: until, span: span}) {
			r.Mu.Unlock()
			r.drop(ctx, e, 1, DropBacklog, fmt.Errorf("%d Events wait to be written", MaxBacklog))
			return
		}
		r.Series[d] = s
		r.lastFirst = first
	}
	r.Mu.Unlock()
}

// push queues p, the write of s, unless the backlog is full. r.mu is held.
func (r *Recorder) push(s *series, p *pendingEvent) bool {
	if len(r.Backlog) >= MaxBacklog {
		return false
	}
	s.pending = p
	r.Backlog = append(r.Backlog, p)
	select {
	case r.ready <- struct{}{}:
	default:
	}
	return true
}

// next takes the oldest Event waiting, or returns nil.
func (r *Recorder) next() *pendingEvent {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if len(r.Backlog) == 0 {
		return nil
	}
	p := r.Backlog[0]
	r.Backlog[0] = nil
	r.Backlog = r.Backlog[1:]
	if len(r.Backlog) == 0 {
		r.Backlog = nil // let the array go
	}
	return p
}

// Serve writes the Events: kube.Recorder.Serve.
func (r *Recorder) Serve(ctx context.Context) error {
	served := make(chan struct{})
	defer close(served)
	r.Mu.Lock()
	r.serving = served
	r.Mu.Unlock()

	sweep := time.NewTicker(SweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-sweep.C:
			r.forget(now)
		case <-r.ready:
			if !r.drain(ctx) {
				return nil
			}
		}
	}
}

// drain writes the backlog's Events, one after another, until none is
// left or ctx ends. It reports false when ctx ended a write, whose Event
// it queued again.
func (r *Recorder) drain(ctx context.Context) bool {
	for ctx.Err() == nil {
		p := r.next()
		if p == nil {
			break
		}
		if !r.write(ctx, p) {
			r.requeue(ctx, p)
			return false
		}
	}
	return true
}

// Shutdown ends Serve: kube.Recorder.Shutdown.
func (r *Recorder) Shutdown(ctx context.Context) error {
	r.Mu.Lock()
	serving := r.serving
	r.Mu.Unlock()
	if serving != nil {
		select {
		case <-serving:
		case <-ctx.Done():
		}
	}
	r.drain(ctx)
	r.Mu.Lock()
	r.closed = true
	left := r.Backlog
	r.Backlog = nil
	counts := make([]int32, len(left))
	for i, p := range left {
		s := r.Series[p.digest]
		counts[i] = s.count - s.written
		s.pending = nil
		r.unwritten(s, p.digest)
	}
	r.Mu.Unlock()
	for i, p := range left {
		r.drop(ctx, p.Event, counts[i], DropShutdown, errors.New("the shutdown ended before it was written"))
	}
	if len(left) > 0 {
		return fmt.Errorf("kube: the Events recorder dropped %d Events it hadn't written when the shutdown ended: %w", len(left), context.Cause(ctx))
	}
	return nil
}

// requeue puts p back at the head of the backlog, for Shutdown: its write
// was cut off by the end of Serve's context, or of Shutdown's, which then
// drops it.
func (r *Recorder) requeue(ctx context.Context, p *pendingEvent) {
	r.Mu.Lock()
	if !r.closed {
		r.Backlog = append([]*pendingEvent{p}, r.Backlog...)
		r.Mu.Unlock()
		return
	}
	s := r.Series[p.digest]
	n := s.count - s.written
	s.pending = nil
	r.unwritten(s, p.digest)
	r.Mu.Unlock()
	r.drop(ctx, p.Event, n, DropShutdown, errors.New("the shutdown ended before it was written"))
}

// forget forgets the Events last recorded 6 minutes or more before now,
// whose writes are done: a repeat of one is a new Event.
func (r *Recorder) forget(now time.Time) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	for d, s := range r.Series {
		if s.pending == nil && now.UnixNano()-s.last >= int64(SeriesWindow) {
			delete(r.Series, d)
		}
	}
}

// evictOldest forgets the series last recorded longest ago whose write is
// done, to make room for a new one: a repeat of it is a new Event. r.mu is
// held.
func (r *Recorder) evictOldest() {
	var oldest eventDigest
	last := int64(math.MaxInt64)
	for d, s := range r.Series {
		if s.pending == nil && s.last < last {
			oldest, last = d, s.last
		}
	}
	if last != math.MaxInt64 {
		delete(r.Series, oldest)
	}
}

// unwritten forgets what s counted beyond what the API server holds, once
// its write is dropped: an Event never created is forgotten whole. r.mu is
// held.
func (r *Recorder) unwritten(s *series, d eventDigest) {
	if s.written == 0 {
		delete(r.Series, d)
		return
	}
	s.count = s.written
}

// write writes p: it creates its Event, or patches its series, and tries
// again what a retry can mend. It returns false, leaving p pending, when
// ctx ends first; otherwise it has written p or dropped it, and queues p
// again for the repeats recorded meanwhile.
func (r *Recorder) write(ctx context.Context, p *pendingEvent) bool {
	start := time.Now()
	delay := firstRetry
	for {
		r.Mu.Lock()
		s := r.Series[p.digest]
		snap := *s
		until, span := p.proof, p.span
		r.Mu.Unlock()

		// The write's span is a child of the last Record's reconcile, and
		// client-go's records go to the Recorder's logger.
		wctx := klog.NewContext(trace.ContextWithSpanContext(ctx, span), r.logr)
		deadline := until.Until()
		if !time.Now().Before(deadline) || !until.Begin() {
			r.dropPending(wctx, p, DropNotLeading, fmt.Errorf("the proof of the Lease ran out at %s", until.Until().Format(time.RFC3339Nano)))
			return true
		}
		proven, cancel := context.WithDeadlineCause(wctx, deadline, control.ErrNotLeading)
		err := r.send(proven, p, snap)
		cancel()
		until.Done()
		switch {
		case err == nil:
			r.wrote(wctx, p, snap)
			return true
		case ctx.Err() != nil:
			return false
		case !time.Now().Before(until.Until()):
			r.dropPending(wctx, p, DropNotLeading, err)
			return true
		case !retriable(err):
			r.dropPending(wctx, p, DropRefused, err)
			return true
		}
		if secs, ok := apierrors.SuggestsClientDelay(err); ok {
			delay = max(delay, time.Duration(secs)*time.Second)
		}
		if time.Since(start)+delay > retryFor {
			r.dropPending(wctx, p, DropGaveUp, fmt.Errorf("tried for %s: %w", time.Since(start).Round(time.Millisecond), err))
			return true
		}
		wait := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			wait.Stop()
			return false
		case <-wait.C:
		}
		delay = min(2*delay, maxRetry)
	}
}

// send makes one try at writing p, as snap counts it: a create of its
// Event, with its series when it has repeated, or, once created, a patch of
// its series. A create refused because the Event exists is an earlier
// try's, whose answer was lost: the Event's name is its own. A patch of an
// Event that is gone, deleted or past the API server's time to live,
// creates it again.
func (r *Recorder) send(ctx context.Context, p *pendingEvent, snap series) error {
	ns := eventNamespace(p.Event.Regarding)
	name := EventName(p.Event.Regarding.Name, snap.first)
	events := r.Events.Events(ns)
	if snap.written > 0 {
		patch, err := seriesPatch(snap)
		if err != nil {
			return err
		}
		_, err = events.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	_, err := events.Create(ctx, r.event(p.Event, ns, name, snap), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if snap.count < 2 {
			return nil
		}
		patch, perr := seriesPatch(snap)
		if perr != nil {
			return perr
		}
		_, err = events.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}

// event is the events.k8s.io/v1 Event of e, as snap counts it.
func (r *Recorder) event(e Event, ns, name string, snap series) *eventsv1.Event {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: ns},
		EventTime:           metav1.NewMicroTime(time.Unix(0, snap.first)),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              e.Action,
		Reason:              e.Reason,
		Regarding:           e.Regarding,
		Related:             e.Related,
		Note:                e.Note,
		Type:                string(e.Type),
	}
	if snap.count > 1 {
		ev.Series = &eventsv1.EventSeries{Count: snap.count, LastObservedTime: metav1.NewMicroTime(time.Unix(0, snap.last))}
	}
	return ev
}

// seriesPatch is the merge patch of an Event's series, as snap counts it.
func seriesPatch(snap series) ([]byte, error) {
	return json.Marshal(map[string]any{"series": eventsv1.EventSeries{
		Count: snap.count, LastObservedTime: metav1.NewMicroTime(time.Unix(0, snap.last)),
	}})
}

// wrote records that the API server holds p's Event as snap counted it,
// and queues p again when it was recorded again meanwhile; unless the
// Recorder is shut down or the backlog is full, which drops those repeats.
func (r *Recorder) wrote(ctx context.Context, p *pendingEvent, snap series) {
	created := int64(0)
	if snap.written == 0 {
		created = 1
	}
	if created > 0 {
		r.count.Add(context.WithoutCancel(ctx), created, metric.WithAttributes(r.attr, attribute.String(AttrEventOutcome, Created)))
	}
	if counted := int64(snap.count-snap.written) - created; counted > 0 {
		r.count.Add(context.WithoutCancel(ctx), counted, metric.WithAttributes(r.attr, attribute.String(AttrEventOutcome, Counted)))
	}
	r.Mu.Lock()
	s := r.Series[p.digest]
	s.written = snap.count
	s.pending = nil
	more := s.count - s.written
	if more == 0 || (!r.closed && r.push(s, p)) {
		r.Mu.Unlock()
		return
	}
	s.count = s.written
	why, err := DropBacklog, fmt.Errorf("%d Events wait to be written", MaxBacklog)
	if r.closed {
		why, err = DropShutdown, errors.New("the shutdown ended before it was written")
	}
	r.Mu.Unlock()
	r.drop(ctx, p.Event, more, why, err)
}

// dropPending drops p's write: what it counts beyond what the API server
// holds.
func (r *Recorder) dropPending(ctx context.Context, p *pendingEvent, why string, err error) {
	r.Mu.Lock()
	s := r.Series[p.digest]
	n := s.count - s.written
	s.pending = nil
	r.unwritten(s, p.digest)
	r.Mu.Unlock()
	r.drop(ctx, p.Event, n, why, err)
}

// drop records that n recordings of e were dropped, and why: each in
// humus.kube.controller.events, and in a WARN record at the slowing rate
// a key's reconcile failures are (failureLog), by why and e's reason, so
// a missing RBAC rule, which refuses every Event, writes a handful of
// records, not one an Event; a record counts the drops since the last
// (attrFailures).
func (r *Recorder) drop(ctx context.Context, e Event, n int32, why string, err error) {
	r.count.Add(context.WithoutCancel(ctx), int64(n), metric.WithAttributes(r.attr,
		attribute.String(AttrEventOutcome, Dropped), attribute.String(AttrEventDropped, why)))
	drops, ok := r.drops.Failed(why+"/"+e.Reason, time.Now())
	if !ok {
		return
	}
	r.log.WarnContext(ctx, "dropped an Event",
		slog.String("regarding", e.Regarding.Kind+" "+klog.KRef(e.Regarding.Namespace, e.Regarding.Name).String()),
		slog.String("type", string(e.Type)), slog.String("reason", e.Reason), slog.String("action", e.Action),
		slog.Int("count", int(n)), slog.String("because", why), slog.String("error", err.Error()), slog.Int(control.AttrFailures, drops))
}

// check returns one error naming every field of e the API server would
// refuse.
func (e Event) check() error {
	var errs []error
	if e.Type != Normal && e.Type != Warning {
		errs = append(errs, fmt.Errorf("kube: Event.Type %q is neither %s nor %s", e.Type, Normal, Warning))
	}
	errs = append(errs, checkLength("Event.Reason", e.Reason, maxReason), checkLength("Event.Action", e.Action, maxAction),
		checkRef("Event.Regarding", &e.Regarding))
	if e.Related != nil {
		errs = append(errs, checkRef("Event.Related", e.Related))
	}
	return errors.Join(errs...)
}

func checkLength(field, v string, limit int) error {
	switch {
	case v == "":
		return fmt.Errorf("kube: %s is required", field)
	case len(v) > limit:
		return fmt.Errorf("kube: %s %q is %d bytes long: at most %d", field, v, len(v), limit)
	}
	return nil
}

func checkRef(field string, ref *corev1.ObjectReference) error {
	var errs []error
	if ref.Kind == "" {
		errs = append(errs, fmt.Errorf("kube: %s has no Kind (an object from a clientset carries none: write its ObjectReference)", field))
	}
	if ref.Name == "" {
		errs = append(errs, fmt.Errorf("kube: %s has no Name", field))
	}
	return errors.Join(errs...)
}

// Cut is s cut to at most n bytes, at a rune's start.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// digest is e's eventDigest: its type, reason, action and note, and the
// two objects it names, but not their resourceVersions.
func (e Event) digest() eventDigest {
	h := fnv.New128a()
	var n [8]byte
	write := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		_, _ = h.Write(n[:])
		_, _ = h.Write([]byte(s))
	}
	ref := func(r *corev1.ObjectReference) {
		write(r.APIVersion)
		write(r.Kind)
		write(r.Namespace)
		write(r.Name)
		write(string(r.UID))
		write(r.FieldPath)
	}
	write(string(e.Type))
	write(e.Reason)
	write(e.Action)
	write(e.Note)
	ref(&e.Regarding)
	if e.Related != nil {
		write("related")
		ref(e.Related)
	}
	var d eventDigest
	h.Sum(d[:0])
	return d
}

// eventNamespace is the namespace of an Event about regarding: its own, or
// default, where the API server takes an Event about a cluster-scoped
// object.
func eventNamespace(regarding corev1.ObjectReference) string {
	if regarding.Namespace == "" {
		return metav1.NamespaceDefault
	}
	return regarding.Namespace
}

// EventName is the name of an Event about an object named name, first
// recorded at first (in Unix nanoseconds): as client-go's recorder names
// one, the name, a dot and the time in hexadecimal. A name that isn't a
// DNS-1123 subdomain then (some kinds' names have a colon or capitals, or
// are too long) is made one: lower case, every other character a dash,
// cut.
func EventName(name string, first int64) string {
	suffix := fmt.Sprintf(".%x", first)
	if full := name + suffix; len(validation.IsDNS1123Subdomain(full)) == 0 {
		return full
	}
	clean := strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			return c
		case c >= 'A' && c <= 'Z':
			return c - 'A' + 'a'
		}
		return '-'
	}, name)
	clean = strings.Trim(Cut(clean, maxEventName-eventNameFixed), "-")
	if clean == "" {
		clean = "event"
	}
	return clean + suffix
}

// retriable reports whether another try can mend err: the API server
// couldn't be reached or didn't answer, it is overloaded (429), or it
// failed (5xx).
func retriable(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == 429 || code >= 500
	}
	var construction *rest.RequestConstructionError
	return !errors.As(err, &construction)
}
