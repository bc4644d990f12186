package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	eventsclient "k8s.io/client-go/kubernetes/typed/events/v1"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/internal/record"
)

// EventType is an Event's type: Normal or Warning, the two the API server
// takes.
type EventType string

const (
	Normal  EventType = "Normal"  // what is expected, such as a child created
	Warning EventType = "Warning" // what someone may need to look at
)

// Event is something that happened to an object, which a Recorder writes
// as an events.k8s.io/v1 Event: what kubectl events and kubectl describe
// show.
type Event struct {
	// Regarding is the object it happened to, such as the reconciled
	// object: Ref(&obj). Its Kind and Name are required. The Event is
	// written in its namespace, or in default for a cluster-scoped object.
	Regarding corev1.ObjectReference

	// Related is a second object it involved, such as a child the
	// reconcile created, or nil. Its Kind and Name are required when it is
	// set.
	Related *corev1.ObjectReference

	Type EventType // Normal or Warning

	// Reason is why, in UpperCamelCase, such as DeploymentCreated: 1 to
	// 128 bytes.
	Reason string

	// Action is what the controller did, or failed to do, such as Create:
	// 1 to 128 bytes.
	Action string

	// Note is for a person to read: at most 1024 bytes, the API server's
	// limit, and a longer one is cut to that.
	Note string
}

// Ref is the reference to obj that an Event's Regarding or Related holds:
// its apiVersion, kind, namespace, name and UID, and no resourceVersion, so
// the repeats of an Event about an object that changes meanwhile are
// still one series. obj must carry its kind, as an Object or a Kind's
// object a reconcile is handed does; an object a client-go clientset
// returns doesn't (its TypeMeta is empty): write its ObjectReference
// instead.
func Ref(obj interface {
	metav1.Object
	GetObjectKind() schema.ObjectKind
}) corev1.ObjectReference {
	apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	return corev1.ObjectReference{
		APIVersion: apiVersion,
		Kind:       kind,
		Namespace:  obj.GetNamespace(),
		Name:       obj.GetName(),
		UID:        obj.GetUID(),
	}
}

// Recorder writes the Events a controller's reconciles record, in the name
// of the controller and of this replica, through a Client's transport: its
// dialler, credentials and telemetry, and the connections a replica that
// loses its Lease aborts. It is a humus.Service: the App returns it from
// Init beside its Controller, and its Serve writes the Events.
//
//   - Record never blocks a reconcile: it queues the Event, and Serve
//     writes the backlog one Event at a time, in the order recorded.
//   - Repeats of an Event (one regarding and related object, type, reason,
//     action and note) within 6 minutes of the last are one Event with a
//     series: the first is created, and each repeat patches its
//     series.count and series.lastObservedTime, as client-go's events
//     recorder does. Repeats recorded while a write of theirs waits are
//     written together, as one count.
//   - It keeps no copy of an Event once written: for each Event seen in
//     the last 6 minutes, only what its series needs (a 16-byte digest, its
//     first and last times, and its counts), and of at most 4,096 Events,
//     as client-go's correlator: past that, the one recorded longest ago
//     is forgotten, and its repeat is a new Event.
//   - What a retry can mend (no answer, a 429, a 5xx) is tried again, with
//     a backoff from 500ms to 16s, and a 429's Retry-After, for up to a
//     minute; what it can't (another 4xx, such as a 403 in a namespace
//     being deleted) is dropped at once.
//   - An Event is written only under the proof of the Lease that the
//     context Record was handed carries, as every write of the
//     controller's own is: a reconcile's context. Its write ends at the
//     proof's deadline, and an Event whose proof has run out before it is
//     written is dropped, never written late: a term's proof ends when
//     its Lease is released or lost, and a term handing its Lease back
//     waits for the Event being written under it to be answered before
//     it releases the Lease. An Event recorded with no proof, outside a
//     reconcile, is dropped.
//   - At most 1,000 Events wait to be written: one recorded beyond that is
//     dropped.
//
// A dropped Event is counted by humus.kube.controller.events, with the
// outcome dropped and why (see What a Controller records in the package
// doc), and is a WARN record, "dropped an Event", with why, at the slowing
// rate a key's reconcile failures are recorded, for each why and Event
// reason: a missing RBAC rule, which refuses every Event, writes a few
// records, each counting the drops since the last.
type Recorder struct{ engine *record.Recorder }

// NewRecorder returns a Recorder that writes Events through c, reported by
// controller, such as the controller's Settings.Name, and by instance, this
// replica, such as its Settings.LeaderElection.Identity (its pod's name). It
// opens no connection. It returns one error naming every mistake in s and
// the names: controller must be a qualified name (a name of at most 63
// characters, with an optional DNS-subdomain prefix and a slash), and
// instance from 1 to 128 bytes, as the API server requires of an Event's
// reportingController and reportingInstance.
func NewRecorder(s *humus.Setup, c *Client, controller, instance string) (*Recorder, error) {
	var errs []error
	if s == nil {
		errs = append(errs, errors.New("kube: the Setup is nil"))
		s = &humus.Setup{}
	}
	if c == nil {
		errs = append(errs, errors.New("kube: the Client is nil"))
	}
	if problems := validation.IsQualifiedName(controller); len(problems) > 0 {
		errs = append(errs, named("reporting controller", controller,
			fmt.Errorf("must be a qualified name, as an Event's reportingController: %s", strings.Join(problems, "; "))))
	}
	switch {
	case instance == "":
		errs = append(errs, named("reporting instance", instance, errors.New("is required")))
	case len(instance) > record.MaxInstance:
		errs = append(errs, named("reporting instance", instance,
			fmt.Errorf("is %d bytes long: at most %d, as an Event's reportingInstance", len(instance), record.MaxInstance)))
	}
	var events eventsclient.EventsV1Interface
	if c != nil {
		var err error
		if events, err = eventsclient.NewForConfig(c.Config()); err != nil {
			errs = append(errs, fmt.Errorf("kube: the Events client: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r, err := record.New(events, controller, instance, s.Telemetry)
	if err != nil {
		return nil, err
	}
	return &Recorder{engine: r}, nil
}

// Record records e, which happened now, with the proof of the Lease that
// ctx carries: hand it a reconcile's context. It returns at once; Serve
// writes e, or counts it into the series of an Event like it recorded
// within the last 6 minutes. An e that the API server would refuse (a
// Type other than Normal and Warning, a Reason or Action empty or over 128
// bytes, a Regarding or Related without a Kind or a Name), one recorded
// with no proof or after it ran out, and one recorded while 1,000 wait, are
// dropped, with a WARN record saying why.
func (r *Recorder) Record(ctx context.Context, e Event) {
	r.engine.Record(ctx, record.Event{
		Regarding: e.Regarding,
		Related:   e.Related,
		Type:      record.EventType(e.Type),
		Reason:    e.Reason,
		Action:    e.Action,
		Note:      e.Note,
	})
}

// Serve writes the Events recorded, until ctx is done. A write that ctx
// cuts off waits again, first, for Shutdown to write.
func (r *Recorder) Serve(ctx context.Context) error { return r.engine.Serve(ctx) }

// Shutdown writes the Events still waiting once Serve has returned, within
// ctx, and those recorded meanwhile. It drops those left when ctx ends,
// and every Event recorded once it has returned.
func (r *Recorder) Shutdown(ctx context.Context) error { return r.engine.Shutdown(ctx) }
