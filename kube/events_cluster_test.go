package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/control"
	"github.com/z5labs/humus/kube/internal/record"
)

// clusterRecorder is a Recorder of memcached-controller, as replica-1,
// connected to c as its admin and serving until the test ends, and the
// admin's clientset to read the Events back.
func clusterRecorder(t *testing.T, c *clustertest.Cluster, tel *humustest.Telemetry) (*Recorder, kubernetes.Interface) {
	t.Helper()
	setup, client := clientAs(t, c, tel, c.AdminToken())
	r, err := NewRecorder(setup, client, "memcached-controller", "replica-1")
	if err != nil {
		t.Fatal(err)
	}
	stop := serveRecorder(t, r)
	t.Cleanup(func() {
		if err := stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return r, kubernetes.NewForConfigOrDie(c.AdminConfig())
}

// eventsAbout are the Events in ns about the object named name, of
// reason.
func eventsAbout(ctx context.Context, kc kubernetes.Interface, ns, name, reason string) ([]eventsv1.Event, error) {
	list, err := kc.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

// The API server holds the series the Recorder counts: one Event, its
// series.count the number of repeats and its lastObservedTime the last's.
func TestClusterAnEventsSeriesCountsItsRepeats(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	tel := humustest.NewTelemetry()
	r, kc := clusterRecorder(t, c, tel)
	cm, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	regarding := corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: cm.Name, UID: cm.UID}
	ctx := proven(t.Context())
	e := Event{Regarding: regarding, Type: Normal, Reason: "ContentChanged", Action: "Reload", Note: "the content changed"}

	const repeats = 5
	var last time.Time
	for i := range repeats {
		last = time.Now()
		r.Record(ctx, e)
		if i < 2 {
			// The first ones one at a time: a create, then a patch.
			clustertest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
				got, err := eventsAbout(ctx, kc, ns, cm.Name, e.Reason)
				if err != nil {
					return err
				}
				if len(got) != 1 || seriesOf(got[0]) != int32(i+1) {
					return fmt.Errorf("Events %+v, want one with a count of %d", got, i+1)
				}
				return nil
			})
		}
	}
	var stored eventsv1.Event
	clustertest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		got, err := eventsAbout(ctx, kc, ns, cm.Name, e.Reason)
		if err != nil {
			return err
		}
		if len(got) != 1 || seriesOf(got[0]) != repeats {
			return fmt.Errorf("Events %+v, want one with a series of %d", got, repeats)
		}
		stored = got[0]
		return nil
	})
	// The API server keeps a MicroTime to the microsecond.
	if d := stored.Series.LastObservedTime.Sub(last); d <= -time.Microsecond || d >= time.Microsecond {
		t.Errorf("series.lastObservedTime = %s, want the last repeat's, %s", stored.Series.LastObservedTime, last)
	}
	if stored.Regarding != regarding || stored.ReportingController != "memcached-controller" || stored.ReportingInstance != "replica-1" ||
		stored.Note != e.Note || stored.Action != e.Action || stored.Type != "Normal" {
		t.Errorf("the Event = %+v, want the recorded one's fields", stored)
	}

	if got := eventOutcomes(t, tel); got[record.Created] != 1 || got[record.Counted] != repeats-1 || len(got) != 2 {
		t.Errorf("humus.kube.controller.events = %v, want 1 created, %d counted", got, repeats-1)
	}
}

// The API server takes a Note cut to 1024 bytes, the Recorder's limit for
// it, and an Event about a cluster-scoped object in default.
func TestClusterTheAPIServerTakesACutNoteAndAClusterScopedObjectsEvent(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	r, kc := clusterRecorder(t, c, humustest.NewTelemetry())
	ctx := proven(t.Context())
	regarding := corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "content"}
	long := Event{Regarding: regarding, Type: Warning, Reason: "LongNote", Action: "Reload", Note: strings.Repeat("n", record.MaxNote+100)}
	nsRef := corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ns}
	r.Record(ctx, long)
	r.Record(ctx, Event{Regarding: nsRef, Type: Normal, Reason: "Observed", Action: "Watch", Note: "a cluster-scoped object"})
	clustertest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		got, err := eventsAbout(ctx, kc, ns, regarding.Name, "LongNote")
		if err != nil {
			return err
		}
		if len(got) != 1 || len(got[0].Note) != record.MaxNote {
			return fmt.Errorf("Events %+v, want one with a note of %d bytes", got, record.MaxNote)
		}
		if got, err = eventsAbout(ctx, kc, metav1.NamespaceDefault, ns, "Observed"); err != nil {
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("Events about the Namespace in default: %+v, want one", got)
		}
		return nil
	})

	// And the limit is the API server's: a byte more is refused.
	over := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "over", Namespace: ns}, EventTime: metav1.NowMicro(),
		ReportingController: "memcached-controller", ReportingInstance: "replica-1",
		Regarding: regarding, Type: "Warning", Reason: "LongNote", Action: "Reload", Note: strings.Repeat("n", record.MaxNote+1),
	}
	if _, err := kc.EventsV1().Events(ns).Create(t.Context(), over, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("an Event with a Note of %d bytes: %v, want Invalid", record.MaxNote+1, err)
	}
}

// An Event whose proof of the Lease runs out before it is written is never
// written: one that waited in the backlog past its deadline, and one whose
// tries the API server's absence kept failing until then. An Event
// recorded after each, under a proof that holds, is written: the Recorder
// takes them in order, so the first had its turn.
func TestClusterFaultAnEventIsNotWrittenOnceItsProofRanOut(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	tel := humustest.NewTelemetry()
	setup, client := clientAs(t, c, tel, c.AdminToken())
	r, err := NewRecorder(setup, client, "memcached-controller", "replica-1")
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(c.AdminConfig())
	about := func(name string) Event {
		return Event{Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name},
			Type: Normal, Reason: "Checked", Action: "Check", Note: name}
	}
	until := func(d time.Duration) context.Context {
		deadline := time.Now().Add(d)
		return control.WithProof(t.Context(), func() time.Time { return deadline })
	}
	written := func(name string) error {
		got, err := eventsAbout(t.Context(), kc, ns, name, "Checked")
		switch {
		case err != nil:
			return err
		case len(got) == 0:
			return errors.New("no Event about " + name)
		}
		return nil
	}
	checkNever := func(name string) {
		t.Helper()
		got, err := eventsAbout(t.Context(), kc, ns, name, "Checked")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 {
			t.Errorf("Events about %s = %+v, want none: its proof had run out", name, got)
		}
	}

	// Waited in the backlog, with Serve not yet running, past its deadline.
	r.Record(until(time.Second), about("waited"))
	time.Sleep(1100 * time.Millisecond)
	r.Record(until(time.Hour), about("after-waited"))
	stop := serveRecorder(t, r)
	defer func() {
		if err := stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	clustertest.Eventually(t, 10*time.Second, func(context.Context) error { return written("after-waited") })
	checkNever("waited")

	// Tried while kube-apiserver is down, until the deadline.
	c.StopAPIServer(t)
	r.Record(until(3*time.Second), about("unanswered"))
	time.Sleep(4 * time.Second)
	c.StartAPIServer(t)
	r.Record(until(time.Hour), about("after-unanswered"))
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error { return written("after-unanswered") })
	checkNever("unanswered")

	if got := eventOutcomes(t, tel); got[record.Dropped+"/"+record.DropNotLeading] != 2 || got[record.Created] != 2 {
		t.Errorf("humus.kube.controller.events = %v, want 2 created and 2 dropped, %s", got, record.DropNotLeading)
	}
	if drops := recordsWithBody(tel, "dropped an Event"); len(drops) != 2 {
		t.Errorf("%d drop records, want 2", len(drops))
	}
}
