package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"

	"github.com/z5labs/humus"
)

// eventService records the Reconciler's Events: each an events.k8s.io/v1
// Event, created through the clientset, so the Client's transport, in the
// name of the controller, Name, and of this replica, instance (POD_NAME,
// as its Lease is, not the machine's hostname, which client-go's recorder
// reads from the operating system). It is the Reconciler's
// events.EventRecorder, and a humus.Service whose Serve writes them: one
// at a time, in the order recorded, each tried again while the API server
// can't be reached or asks to wait, for up to a minute.
//
// It keeps no Event once written. client-go's events broadcaster keeps a
// copy of each for six minutes, to count the repeats of one into a
// series: at a cold start of 10,000 Memcacheds that copy was a third of
// the App's heap, and the Events this Reconciler records, one for each
// Deployment it creates and each Memcached it finalizes, don't repeat. An
// Event recorded while 1,000 wait to be written, or once the Service is
// shut down, is dropped and logged, as client-go's broadcaster drops one
// when its queue is full.
type eventService struct {
	kc       kubernetes.Interface
	instance string
	log      logr.Logger

	queue    chan *eventsv1.Event
	stopped  chan struct{} // closed by Shutdown
	stopOnce sync.Once
}

// newEventService returns the Service that records Events in the name of
// the controller, Name, and of this replica, instance, such as its pod's
// name, with kc.
func newEventService(s *humus.Setup, kc kubernetes.Interface, instance string) *eventService {
	return &eventService{
		kc:       kc,
		instance: instance,
		// The clientset logs through klog: a logger of the App's own, in
		// the context of each write, keeps its records from klog's global
		// logger and the real stderr.
		log: logr.FromSlogHandler(verbosity{otelslog.NewHandler("github.com/z5labs/humus/kube/example/memcached/app",
			otelslog.WithLoggerProvider(s.Telemetry.LoggerProvider))}),
		queue:   make(chan *eventsv1.Event, 1000),
		stopped: make(chan struct{}),
	}
}

// Eventf records an Event, as events.EventRecorder's Eventf does: about
// regarding, and related unless nil, each a *corev1.ObjectReference or an
// object whose kind it carries.
func (s *eventService) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	e, err := s.event(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err != nil {
		s.log.Error(err, "app: dropped an Event", "reason", reason)
		return
	}
	select {
	case <-s.stopped:
		s.log.Info("app: dropped an Event recorded after shutdown", "event", klog.KObj(e), "reason", reason)
		return
	default:
	}
	select {
	case s.queue <- e:
	default:
		s.log.Error(errors.New("1000 Events wait to be written"), "app: dropped an Event", "event", klog.KObj(e), "reason", reason)
	}
}

// event is the Event Eventf records, named as client-go's recorder names
// one: its regarding object's name and the time in nanoseconds.
func (s *eventService) event(regarding, related runtime.Object, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		return nil, fmt.Errorf("app: event type %q is neither Normal nor Warning", eventtype)
	}
	ref, err := reference.GetReference(nil, regarding)
	if err != nil {
		return nil, fmt.Errorf("app: the Event's regarding object: %w", err)
	}
	var rel *corev1.ObjectReference
	if related != nil {
		if rel, err = reference.GetReference(nil, related); err != nil {
			return nil, fmt.Errorf("app: the Event's related object: %w", err)
		}
	}
	now := time.Now()
	ns := cmp.Or(ref.Namespace, metav1.NamespaceDefault)
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: Name,
		ReportingInstance:   s.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             rel,
		Note:                note,
		Type:                eventtype,
	}, nil
}

// Serve writes the Events recorded until ctx is done; those still waiting
// then are dropped.
func (s *eventService) Serve(ctx context.Context) error {
	ctx = klog.NewContext(ctx, s.log)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-s.queue:
			s.write(ctx, e)
		}
	}
}

// write creates e, trying again for up to a minute while the API server
// answers an error that another try can mend: it can't be reached, it is
// overloaded, or it times out.
func (s *eventService) write(ctx context.Context, e *eventsv1.Event) {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 8, Cap: 16 * time.Second}
	var err error
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		_, err = s.kc.EventsV1().Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{})
		return err == nil || !retriable(err), nil
	})
	if err != nil {
		s.log.Error(err, "app: couldn't write an Event", "event", klog.KObj(e), "reason", e.Reason)
	}
}

// retriable reports whether another try can mend err.
func retriable(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // the API server couldn't be reached
	}
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

// Shutdown drops the Events recorded from now on. Serve ends once its
// context is done.
func (s *eventService) Shutdown(context.Context) error {
	s.stopOnce.Do(func() { close(s.stopped) })
	return nil
}

// verbosity keeps client-go's records up to its V(2), as the kube module
// does for its own, and drops its debugging levels, such as V(8)'s body of
// every request.
type verbosity struct{ slog.Handler }

func (v verbosity) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.Level(-2) && v.Handler.Enabled(ctx, l)
}

func (v verbosity) WithAttrs(attrs []slog.Attr) slog.Handler {
	return verbosity{Handler: v.Handler.WithAttrs(attrs)}
}

func (v verbosity) WithGroup(name string) slog.Handler {
	return verbosity{Handler: v.Handler.WithGroup(name)}
}
