package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	kubefake "k8s.io/client-go/kubernetes/fake"
	eventsclient "k8s.io/client-go/kubernetes/typed/events/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/control"
	"github.com/z5labs/humus/kube/internal/record"
)

// newTestRecorder is a Recorder of memcached-controller, as replica-1,
// writing to kc's Events and recording into tel.
func newTestRecorder(t testing.TB, tel *humustest.Telemetry, kc *kubefake.Clientset) *Recorder {
	t.Helper()
	setup := fakeSetup(tel)
	r, err := NewRecorder(setup, testClient(t, setup), "memcached-controller", "replica-1")
	if err != nil {
		t.Fatal(err)
	}
	r.engine.Events = kc.EventsV1()
	return r
}

// recording is the Recorder tests' fixture: a Recorder (newTestRecorder)
// writing to a fake API server's Events, kc, and recording into tel; and a
// reconcile's context to record with, whose proof holds for two hours.
// The fake's reactors can be prepended until the Recorder serves.
func recording(t testing.TB) (*humustest.Telemetry, *kubefake.Clientset, *Recorder, context.Context) {
	t.Helper()
	tel, kc := humustest.NewTelemetry(), kubefake.NewClientset()
	return tel, kc, newTestRecorder(t, tel, kc), proven(context.Background())
}

// serveRecorder runs r's Serve, and returns what stops it: a cancel of its
// context, then Shutdown with shutdown, whose error it returns.
func serveRecorder(t testing.TB, r *Recorder) (stop func(shutdown context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx) }()
	return func(shutdown context.Context) error {
		cancel()
		err := r.Shutdown(shutdown)
		if serr := <-served; serr != nil {
			t.Errorf("Serve = %v, want nil", serr)
		}
		return err
	}
}

// stopped stops a Recorder with stop, serveRecorder's, and a Shutdown
// without a deadline, which must return nil.
func stopped(t testing.TB, stop func(shutdown context.Context) error) {
	t.Helper()
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// wantOutcomes checks humus.kube.controller.events' points in tel, by
// outcome (eventOutcomes).
func wantOutcomes(t testing.TB, tel *humustest.Telemetry, want map[string]int64) {
	t.Helper()
	if got := eventOutcomes(t, tel); !mapsEqual64(got, want) {
		t.Errorf("humus.kube.controller.events = %v, want %v", got, want)
	}
}

// sessionsRef is the test's Memcached, which its Events are about.
var sessionsRef = corev1.ObjectReference{
	APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Namespace: "shop", Name: "sessions", UID: "uid-sessions",
}

// createdEvent is the Event of a Deployment created for sessionsRef, with
// note.
func createdEvent(note string) Event {
	return Event{Regarding: sessionsRef, Type: Normal, Reason: "DeploymentCreated", Action: "Create", Note: note}
}

// storedEvents are the Events the fake API server holds in ns, by name.
func storedEvents(t testing.TB, kc *kubefake.Clientset, ns string) []eventsv1.Event {
	t.Helper()
	list, err := kc.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// seriesOf is e's series count, 1 for an Event without a series.
func seriesOf(e eventsv1.Event) int32 {
	if e.Series == nil {
		return 1
	}
	return e.Series.Count
}

// eventOutcomes are humus.kube.controller.events' points, by outcome, and
// by why for a drop ("dropped/why").
func eventOutcomes(t testing.TB, tel *humustest.Telemetry) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, ok := instrumentsOf(t, tel)["humus.kube.controller.events"]
	if !ok {
		return out
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok || !sum.IsMonotonic {
		t.Fatalf("humus.kube.controller.events is a %T, want a monotonic metricdata.Sum[int64]", m.Data)
	}
	for _, dp := range sum.DataPoints {
		checkController(t, "humus.kube.controller.events", dp.Attributes)
		outcome, _ := dp.Attributes.Value(record.AttrEventOutcome)
		key := outcome.AsString()
		if why, ok := dp.Attributes.Value(record.AttrEventDropped); ok {
			key += "/" + why.AsString()
		}
		out[key] += dp.Value
	}
	return out
}

// A repeat of an Event is counted into its series: the first is created,
// and each repeat patches series.count and series.lastObservedTime.
func TestRecorderCountsRepeatsIntoASeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel, kc, r, ctx := recording(t)
		stop := serveRecorder(t, r)

		first := time.Now()
		r.Record(ctx, createdEvent("Created Deployment sessions"))
		synctest.Wait()
		time.Sleep(time.Minute)
		r.Record(ctx, createdEvent("Created Deployment sessions"))
		synctest.Wait()
		time.Sleep(5 * time.Minute) // within 6 minutes of the last
		last := time.Now()
		r.Record(ctx, createdEvent("Created Deployment sessions"))
		synctest.Wait()
		stopped(t, stop)

		got := storedEvents(t, kc, "shop")
		if len(got) != 1 {
			t.Fatalf("%d Events stored, want 1, with a series: %+v", len(got), got)
		}
		e := got[0]
		if e.Series == nil || e.Series.Count != 3 || !e.Series.LastObservedTime.Equal(&metav1.MicroTime{Time: last}) {
			t.Errorf("the Event's series = %+v, want count 3, last observed %s", e.Series, last)
		}
		if !e.EventTime.Time.Equal(first) || e.Name != fmt.Sprintf("sessions.%x", first.UnixNano()) ||
			e.Regarding != sessionsRef || e.ReportingController != "memcached-controller" || e.ReportingInstance != "replica-1" ||
			e.Type != "Normal" || e.Reason != "DeploymentCreated" || e.Action != "Create" || e.Note != "Created Deployment sessions" {
			t.Errorf("the Event = %+v, want the first's, named after sessions and its time, reported by memcached-controller replica-1", e)
		}
		if creates, patches := eventWrites(kc); creates != 1 || patches != 2 {
			t.Errorf("%d creates and %d patches, want 1 and 2", creates, patches)
		}
		want := map[string]int64{record.Created: 1, record.Counted: 2}
		wantOutcomes(t, tel, want)
	})
}

// Repeats recorded while a write waits are written together, as one count:
// five before Serve takes them are one create, with its series.
func TestRecorderWritesTheRepeatsThatWaitedAsOneCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel, kc, r, ctx := recording(t)
		failed := Event{Regarding: sessionsRef, Type: Warning, Reason: "ApplyFailed", Action: "Apply", Note: "the quota is exceeded"}
		for range 5 {
			r.Record(ctx, failed)
		}
		stop := serveRecorder(t, r)
		synctest.Wait()
		stopped(t, stop)
		got := storedEvents(t, kc, "shop")
		if creates, patches := eventWrites(kc); len(got) != 1 || creates != 1 || patches != 0 || seriesOf(got[0]) != 5 {
			t.Errorf("Events %+v after %d creates and %d patches, want one with a series of 5, after 1 create", got, creates, patches)
		}
		want := map[string]int64{record.Created: 1, record.Counted: 4}
		wantOutcomes(t, tel, want)
	})
}

// Another note, type, reason, action, regarding or related object is
// another Event.
func TestRecorderTellsEventsApartByEachField(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, kc, r, ctx := recording(t)
		stop := serveRecorder(t, r)
		variants := []Event{
			createdEvent("Created Deployment sessions"),
			createdEvent("Created Deployment sessions-2"),
			{Regarding: sessionsRef, Type: Warning, Reason: "DeploymentCreated", Action: "Create", Note: "Created Deployment sessions"},
			{Regarding: sessionsRef, Type: Normal, Reason: "DeploymentApplied", Action: "Create", Note: "Created Deployment sessions"},
			{Regarding: sessionsRef, Type: Normal, Reason: "DeploymentCreated", Action: "Apply", Note: "Created Deployment sessions"},
			{Regarding: corev1.ObjectReference{Kind: "Memcached", Namespace: "shop", Name: "carts"}, Type: Normal, Reason: "DeploymentCreated", Action: "Create", Note: "Created Deployment sessions"},
			{Regarding: sessionsRef, Related: &corev1.ObjectReference{Kind: "Deployment", Namespace: "shop", Name: "sessions"}, Type: Normal, Reason: "DeploymentCreated", Action: "Create", Note: "Created Deployment sessions"},
		}
		for _, e := range variants {
			r.Record(ctx, e)
		}
		synctest.Wait()
		stopped(t, stop)
		if got := storedEvents(t, kc, "shop"); len(got) != len(variants) {
			t.Errorf("%d Events stored, want %d: each an Event of its own", len(got), len(variants))
		}
	})
}

// eventWrites counts the creates and the patches made with kc.
func eventWrites(kc *kubefake.Clientset) (creates, patches int) {
	for _, a := range kc.Actions() {
		switch a.GetVerb() {
		case "create":
			creates++
		case "patch":
			patches++
		}
	}
	return creates, patches
}

func mapsEqual64(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A repeat 6 minutes or more after the last is a new Event, and the
// Recorder forgets what it counted of the old one.
func TestRecorderBeginsANewEventAfterTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, kc, r, ctx := recording(t)
		stop := serveRecorder(t, r)
		r.Record(ctx, createdEvent("Created Deployment sessions"))
		synctest.Wait()
		time.Sleep(record.SeriesWindow - time.Second)
		r.Record(ctx, createdEvent("Created Deployment sessions"))
		synctest.Wait()
		time.Sleep(record.SeriesWindow)
		r.Record(ctx, createdEvent("Created Deployment sessions"))
		synctest.Wait()

		got := storedEvents(t, kc, "shop")
		if len(got) != 2 || seriesOf(got[0]) != 2 || got[1].Series != nil {
			t.Errorf("Events = %+v, want 2: one with a series of 2, then a new one", got)
		}
		time.Sleep(record.SeriesWindow + record.SweepEvery)
		r.engine.Mu.Lock()
		kept := len(r.engine.Series)
		r.engine.Mu.Unlock()
		if kept != 0 {
			t.Errorf("%d Events still counted %s after the last, want none", kept, record.SeriesWindow+record.SweepEvery)
		}
		stopped(t, stop)
	})
}

// A patch of a series whose Event is gone (deleted, or past the API
// server's time to live) creates it again, with its series.
func TestRecorderCreatesAgainAnEventThatIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, kc, r, ctx := recording(t)
		stop := serveRecorder(t, r)
		r.Record(ctx, createdEvent("Created Deployment sessions"))
		synctest.Wait()
		first := storedEvents(t, kc, "shop")[0]
		if err := kc.EventsV1().Events("shop").Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		r.Record(ctx, createdEvent("Created Deployment sessions"))
		synctest.Wait()
		got := storedEvents(t, kc, "shop")
		if len(got) != 1 || got[0].Name != first.Name || seriesOf(got[0]) != 2 {
			t.Errorf("Events = %+v, want %s again, with a series of 2", got, first.Name)
		}
		stopped(t, stop)
	})
}

// At most 1,000 Events wait: one more is dropped, with a WARN record,
// counted as backlog_full; and Record never blocks.
func TestRecorderDropsAnEventBeyondItsBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel, kc, r, ctx := recording(t)
		for i := range record.MaxBacklog + 1 {
			r.Record(ctx, createdEvent(fmt.Sprintf("Created Deployment %d", i)))
		}
		// A repeat of a waiting Event adds nothing to the backlog.
		r.Record(ctx, createdEvent("Created Deployment 0"))
		if len(r.engine.Backlog) != record.MaxBacklog {
			t.Errorf("%d Events wait, want %d", len(r.engine.Backlog), record.MaxBacklog)
		}
		drops := recordsWithBody(tel, "dropped an Event")
		if len(drops) != 1 || recordAttrs(drops[0])["because"] != record.DropBacklog || drops[0].Severity().String() != "WARN" {
			t.Errorf("drop records = %d, want 1 WARN, because %s", len(drops), record.DropBacklog)
		} else if a := recordAttrs(drops[0]); a["reason"] != "DeploymentCreated" || a["regarding"] != "Memcached shop/sessions" {
			t.Errorf("the drop record's attributes = %v, want the Event's reason and regarding object", a)
		}

		// The API server takes each, without the fake's tracker, which is
		// slow to hold 1,000.
		var creates int
		kc.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
			creates++
			return true, a.(k8stesting.CreateAction).GetObject(), nil
		})
		stop := serveRecorder(t, r)
		synctest.Wait()
		stopped(t, stop)
		if creates != record.MaxBacklog {
			t.Errorf("%d Events created, want %d", creates, record.MaxBacklog)
		}
		want := map[string]int64{record.Created: record.MaxBacklog, record.Counted: 1, record.Dropped + "/" + record.DropBacklog: 1}
		wantOutcomes(t, tel, want)
	})
}

// refusedDial is the error of a dial to an API server that isn't
// listening.
var refusedDial = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// What a retry can mend (no answer, a 429, a 5xx) is tried again, after a
// backoff and a 429's Retry-After, for up to a minute; what it can't (a
// 4xx, such as a 403 in a namespace being deleted) is tried once and
// dropped.
func TestRecorderTriesAgainOnlyWhatARetryCanMend(t *testing.T) {
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "sessions.1",
		errors.New("unable to create new content in namespace shop because it is being terminated"))
	for _, tc := range []struct {
		name    string
		answers []error // the answers to the first tries; nil: the API server's
		tries   int
		stored  bool
		dropped string
		took    time.Duration // from the record to the last try
	}{
		{"unavailable, then written", []error{apierrors.NewServiceUnavailable("starting"), apierrors.NewInternalError(errors.New("etcd"))}, 3, true, "", 1500 * time.Millisecond},
		{"refused connection, then written", []error{refusedDial, refusedDial}, 3, true, "", 1500 * time.Millisecond},
		{"throttled for 5s, then written", []error{apierrors.NewTooManyRequests("slow down", 5)}, 2, true, "", 5 * time.Second},
		{"a namespace being deleted", []error{terminating}, 1, false, record.DropRefused, 0},
		{"invalid", []error{apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "e", nil)}, 1, false, record.DropRefused, 0},
		{"unavailable for good", slices.Repeat([]error{apierrors.NewServiceUnavailable("down")}, 100), 8, false, record.DropGaveUp, 500*time.Millisecond*(1+2+4+8+16+32) + 16*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tel, kc, r, ctx := recording(t)
				var mu sync.Mutex
				var tries []time.Time
				kc.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
					mu.Lock()
					defer mu.Unlock()
					tries = append(tries, time.Now())
					if n := len(tries); n <= len(tc.answers) {
						return true, nil, tc.answers[n-1]
					}
					return false, nil, nil
				})
				stop := serveRecorder(t, r)
				start := time.Now()
				r.Record(ctx, createdEvent("Created Deployment sessions"))
				time.Sleep(2 * time.Minute)
				synctest.Wait()
				stopped(t, stop)
				stored := len(storedEvents(t, kc, "shop")) == 1
				if len(tries) != tc.tries || stored != tc.stored {
					t.Errorf("tries, stored = %d, %v; want %d, %v", len(tries), stored, tc.tries, tc.stored)
				}
				if len(tries) > 0 {
					if took := tries[len(tries)-1].Sub(start); took != tc.took {
						t.Errorf("the last try came %s after the record, want %s", took, tc.took)
					}
				}
				want := map[string]int64{record.Created: 1}
				if tc.dropped != "" {
					want = map[string]int64{record.Dropped + "/" + tc.dropped: 1}
				}
				wantOutcomes(t, tel, want)
				if drops := recordsWithBody(tel, "dropped an Event"); (len(drops) == 1) != (tc.dropped != "") {
					t.Errorf("%d drop records, want one only when the Event is dropped", len(drops))
				}
			})
		})
	}
}

// An Event is written only under its proof of the Lease: one recorded
// without a proof, or after its deadline, is dropped; a write is cut off
// at the deadline and not tried again; one that waited in the backlog past
// it is dropped unsent; and a proof renewed meanwhile keeps the tries
// going.
func TestRecorderWritesNothingAfterTheProofsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel, kc, r, _ := recording(t)
		var mu sync.Mutex
		var tries []time.Time
		kc.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			tries = append(tries, time.Now())
			return true, nil, apierrors.NewServiceUnavailable("down")
		})

		// No proof, or one already past.
		r.Record(context.Background(), createdEvent("no proof"))
		past := time.Now().Add(-time.Millisecond)
		r.Record(control.WithProof(context.Background(), func() time.Time { return past }), createdEvent("past"))

		// Waited past its deadline in the backlog: never sent.
		soon := time.Now().Add(time.Second)
		r.Record(control.WithProof(context.Background(), func() time.Time { return soon }), createdEvent("waited"))
		time.Sleep(2 * time.Second)
		stop := serveRecorder(t, r)
		synctest.Wait()
		if len(tries) != 0 {
			t.Errorf("%d tries of an Event whose proof ran out in the backlog, want none", len(tries))
		}

		// Tried until the deadline, 2s after the record, and no more.
		start := time.Now()
		until := start.Add(2 * time.Second)
		r.Record(control.WithProof(context.Background(), func() time.Time { return until }), createdEvent("cut off"))
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(tries) != 3 || tries[len(tries)-1].Sub(start) != 1500*time.Millisecond {
			t.Errorf("tries at %v after the record, want 3, the last 1.5s after it: none after the deadline, 2s", offsets(start, tries))
		}

		// A proof renewed meanwhile: tried for the minute.
		tries = nil
		start = time.Now()
		renewed := control.WithProof(context.Background(), func() time.Time { return time.Now().Add(10 * time.Second) })
		r.Record(renewed, createdEvent("renewed"))
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if len(tries) != 8 {
			t.Errorf("tries under a renewed proof at %v, want 8, for a minute", offsets(start, tries))
		}
		stopped(t, stop)
		want := map[string]int64{record.Dropped + "/" + record.DropNotLeading: 4, record.Dropped + "/" + record.DropGaveUp: 1}
		wantOutcomes(t, tel, want)
	})
}

// offsets is each of ts, as the time since start.
func offsets(start time.Time, ts []time.Time) []time.Duration {
	var out []time.Duration
	for _, t := range ts {
		out = append(out, t.Sub(start))
	}
	return out
}

// A write that the proof's deadline cuts off mid-request is dropped, not
// tried again: the request's context ends at the deadline.
func TestRecorderCutsAWriteOffAtTheProofsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel, kc, r, _ := recording(t)
		hung := &hangingEvents{EventsV1Interface: kc.EventsV1()}
		r.engine.Events = hung
		stop := serveRecorder(t, r)
		start := time.Now()
		until := start.Add(3 * time.Second)
		r.Record(control.WithProof(context.Background(), func() time.Time { return until }), createdEvent("hangs"))
		time.Sleep(time.Minute)
		synctest.Wait()
		stopped(t, stop)
		if len(hung.ended) != 1 || hung.ended[0].Sub(start) != 3*time.Second {
			t.Errorf("creates ended %v after the record, want one, at the proof's deadline, 3s", offsets(start, hung.ended))
		}
		if got := eventOutcomes(t, tel); got[record.Dropped+"/"+record.DropNotLeading] != 1 {
			t.Errorf("humus.kube.controller.events = %v, want one dropped, %s", got, record.DropNotLeading)
		}
	})
}

// hangingEvents is an API server that never answers a create of an Event:
// the create ends with its context, when it records the time.
type hangingEvents struct {
	eventsclient.EventsV1Interface
	ended []time.Time
}

func (h *hangingEvents) Events(ns string) eventsclient.EventInterface {
	return hangingEvent{h.EventsV1Interface.Events(ns), h}
}

type hangingEvent struct {
	eventsclient.EventInterface
	h *hangingEvents
}

func (h hangingEvent) Create(ctx context.Context, _ *eventsv1.Event, _ metav1.CreateOptions) (*eventsv1.Event, error) {
	<-ctx.Done()
	h.h.ended = append(h.h.ended, time.Now())
	return nil, ctx.Err()
}

// Shutdown writes what still waits once Serve has returned, and, when its
// context ends first, drops the rest and says so; an Event recorded once
// it has returned is dropped.
func TestRecorderShutdownWritesWhatWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel, kc, r, ctx := recording(t)
		for i := range 3 {
			r.Record(ctx, createdEvent(fmt.Sprintf("Created Deployment %d", i)))
		}
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := storedEvents(t, kc, "shop"); len(got) != 3 {
			t.Errorf("%d Events stored by Shutdown, want 3", len(got))
		}
		r.Record(ctx, createdEvent("after"))
		if got := eventOutcomes(t, tel); got[record.Dropped+"/"+record.DropShutdown] != 1 {
			t.Errorf("humus.kube.controller.events = %v, want one dropped, %s", got, record.DropShutdown)
		}

		// An API server that doesn't answer: Shutdown's context ends.
		kc = kubefake.NewClientset()
		kc.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("down")
		})
		r = newTestRecorder(t, tel, kc)
		r.Record(ctx, createdEvent("unwritten"))
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := r.Shutdown(shutdown)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || err.Error() != "kube: the Events recorder dropped 1 Events it hadn't written when the shutdown ended: context deadline exceeded" {
			t.Errorf("Shutdown = %v, want the count dropped, wrapping the context's error", err)
		}
		if got := eventOutcomes(t, tel); got[record.Dropped+"/"+record.DropShutdown] != 2 {
			t.Errorf("humus.kube.controller.events = %v, want two dropped, %s", got, record.DropShutdown)
		}
	})
}

// A write that Serve's end cuts off is Shutdown's to finish: its Event is
// written once.
func TestRecorderShutdownFinishesTheWriteServeLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, kc, r, ctx := recording(t)
		calls := 0
		kc.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			calls++
			if calls == 1 {
				return true, nil, apierrors.NewServiceUnavailable("starting")
			}
			return false, nil, nil
		})
		stop := serveRecorder(t, r)
		r.Record(ctx, createdEvent("Created Deployment sessions"))
		synctest.Wait() // Serve waits to try again
		stopped(t, stop)
		if got := storedEvents(t, kc, "shop"); len(got) != 1 || calls != 2 {
			t.Errorf("%d Events stored after %d creates, want 1 after 2", len(got), calls)
		}
	})
}

// An Event the API server would refuse is dropped at Record, with one
// record naming every mistake; a Note over 1024 bytes is cut.
func TestRecorderChecksEachEvent(t *testing.T) {
	tel, _, r, ctx := recording(t)
	r.Record(ctx, Event{Type: "Info", Reason: strings.Repeat("R", 129), Related: &corev1.ObjectReference{Name: "d"}})
	drops := recordsWithBody(tel, "dropped an Event")
	if len(drops) != 1 {
		t.Fatalf("%d drop records, want 1", len(drops))
	}
	want := strings.Join([]string{
		`kube: Event.Type "Info" is neither Normal nor Warning`,
		`kube: Event.Reason "` + strings.Repeat("R", 129) + `" is 129 bytes long: at most 128`,
		`kube: Event.Action is required`,
		`kube: Event.Regarding has no Kind (an object from a clientset carries none: write its ObjectReference)`,
		`kube: Event.Regarding has no Name`,
		`kube: Event.Related has no Kind (an object from a clientset carries none: write its ObjectReference)`,
	}, "\n")
	if got := recordAttrs(drops[0]); got["error"] != want || got["because"] != record.DropInvalid {
		t.Errorf("the drop record's error = %q, want\n%s", got["error"], want)
	}

	long := strings.Repeat("a", record.MaxNote-1) + "é" // 1025 bytes, the last rune across the limit
	r.Record(ctx, createdEvent(long))
	if len(r.engine.Backlog) != 1 || r.engine.Backlog[0].Event.Note != long[:record.MaxNote-1] {
		t.Errorf("the Note waiting is %d bytes, want %d: cut before the rune that crosses the limit", len(r.engine.Backlog[0].Event.Note), record.MaxNote-1)
	}
}

// NewRecorder names every mistake at once: the reporting controller and
// instance are what the API server takes of an Event's.
func TestNewRecorderNamesEveryMistake(t *testing.T) {
	_, err := NewRecorder(nil, nil, "memcached controller", strings.Repeat("r", 129))
	want := strings.Join([]string{
		"kube: the Setup is nil",
		"kube: the Client is nil",
		`kube: reporting controller "memcached controller" must be a qualified name, as an Event's reportingController: ` +
			strings.Join(validation.IsQualifiedName("memcached controller"), "; "),
		`kube: reporting instance "` + strings.Repeat("r", 129) + `" is 129 bytes long: at most 128, as an Event's reportingInstance`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("NewRecorder = %v, want\n%s", err, want)
	}
	setup := fakeSetup(nil)
	if _, err := NewRecorder(setup, testClient(t, setup), "example.com/memcached-controller", ""); err == nil || err.Error() != `kube: reporting instance "" is required` {
		t.Errorf("NewRecorder with no instance = %v", err)
	}
}

// An Event's name is its object's, a dot and the time in hexadecimal, made
// a DNS-1123 subdomain when the object's name isn't one.
func TestEventNamesAreDNSSubdomains(t *testing.T) {
	at := time.Unix(1700000000, 123)
	for _, tc := range []struct{ object, want string }{
		{"sessions", "sessions.17979cfe362a007b"},
		{"system:controller:job-controller", "system-controller-job-controller.17979cfe362a007b"},
		{"Upper.Case", "upper-case.17979cfe362a007b"},
		{":", "event.17979cfe362a007b"},
		{strings.Repeat("a", 253), strings.Repeat("a", 253-17) + ".17979cfe362a007b"},
	} {
		got := record.EventName(tc.object, at.UnixNano())
		if got != tc.want || len(validation.IsDNS1123Subdomain(got)) > 0 {
			t.Errorf("eventName(%q) = %q, want %q, a DNS-1123 subdomain", tc.object, got, tc.want)
		}
	}
}

// Ref names an object by its kind, namespace, name and UID, with no
// resourceVersion.
func TestRefNamesTheObject(t *testing.T) {
	obj := Object[cacheSpec, cacheStatus]{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sessions", UID: "uid-sessions", ResourceVersion: "7"},
	}
	if got := Ref(&obj); got != sessionsRef {
		t.Errorf("Ref = %+v, want %+v", got, sessionsRef)
	}
}

// Events refused as no retry mends (a 403: the ServiceAccount may not
// create Events) are each counted, but recorded at the slowing rate of a
// key's reconcile failures, by why and reason (issue 44, suspected: every
// one was a WARN record); a record counts the drops since the last.
func TestRecorderDropsRecordsAtASlowingRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel, kc, r, ctx := recording(t)
		kc.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "", errors.New("no RBAC rule"))
		})
		stop := serveRecorder(t, r)
		const n = 100
		for i := range n {
			r.Record(ctx, createdEvent(fmt.Sprintf("Created Deployment %d", i)))
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		stopped(t, stop)
		wantOutcomes(t, tel, map[string]int64{record.Dropped + "/" + record.DropRefused: n})
		drops := recordsWithBody(tel, "dropped an Event")
		var counted int
		for _, d := range drops {
			c, _ := strconv.Atoi(recordAttrs(d)["failures"])
			counted += c
		}
		if len(drops) > 5 || len(drops) == 0 {
			t.Errorf("%d drop records of %d Events refused over 10s, want a few: 1 at once, then 1s, 2s, 4s apart", len(drops), n)
		}
		if counted > n || counted < n-40 {
			t.Errorf("the drop records count %d drops, want those before the last record: most of %d", counted, n)
		}
	})
}

// The Recorder keeps the series of at most 4,096 Events, as client-go's
// correlator keeps its LRU: past that, the one recorded longest ago is
// forgotten (issue 44, suspected, proven: 5,000 distinct Events within 6
// minutes kept 5,000).
func TestRecorderKeepsAtMost4096Series(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, kc, r, ctx := recording(t)
		kc.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, a.(k8stesting.CreateAction).GetObject(), nil // not kept: the fake's tracker is slow to hold thousands
		})
		stop := serveRecorder(t, r)
		for i := range 5000 {
			r.Record(ctx, createdEvent(fmt.Sprintf("Created Deployment %d", i)))
			if i%500 == 499 {
				time.Sleep(time.Second)
				synctest.Wait()
			}
		}
		stopped(t, stop)
		r.engine.Mu.Lock()
		n := len(r.engine.Series)
		r.engine.Mu.Unlock()
		if n != record.MaxSeries {
			t.Errorf("series kept = %d, want %d", n, record.MaxSeries)
		}
	})
}
