package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/z5labs/humus"
)

// eventService records the Reconciler's Events with client-go's events
// recorder, through the clientset, so the Client's transport. It is a
// humus.Service: the recorder's goroutines start with the App's Serve,
// and end with it.
//
// It is the Reconciler's events.EventRecorder too. client-go's broadcaster
// drops an Event recorded before it records to the API server, so Eventf
// waits for Serve to have started that, which it has long before a
// reconcile, once the controller's caches have synced. The recorder writes
// the Events in the background, retrying what it can't write; an Event
// recorded after the App has stopped, while the controller finishes its
// reconciles, is dropped.
type eventService struct {
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
	log         logr.Logger

	started  chan struct{} // closed once Serve records to the API server
	stopped  chan struct{} // closed by Shutdown
	stopOnce sync.Once
}

// newEventService returns the Service that records Events in the name of
// the controller, Name, and of this replica, instance, such as its pod's
// name, with kc.
func newEventService(s *humus.Setup, kc kubernetes.Interface, instance string) *eventService {
	// client-go logs through klog: a logger of the App's own, in the
	// recorder and in its context, keeps its records from klog's global
	// logger and the real stderr.
	log := logr.FromSlogHandler(verbosity{otelslog.NewHandler("github.com/z5labs/humus/kube/example/memcached/app",
		otelslog.WithLoggerProvider(s.Telemetry.LoggerProvider))})
	b := events.NewBroadcaster(instanceSink{
		EventSink: &events.EventSinkImpl{Interface: kc.EventsV1()},
		instance:  instance,
	})
	return &eventService{
		broadcaster: b,
		// The recorder takes the Event's regarding object as a
		// *corev1.ObjectReference, which needs no scheme.
		recorder: b.NewRecorder(nil, Name).WithLogger(log),
		log:      log,
		started:  make(chan struct{}),
		stopped:  make(chan struct{}),
	}
}

// Eventf records an Event, as events.EventRecorder's Eventf does, once
// Serve has started recording, and drops it once the Service is shut
// down.
func (s *eventService) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	select {
	case <-s.started:
	case <-s.stopped:
		return
	}
	s.recorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// Serve writes the Events recorded until ctx is done.
func (s *eventService) Serve(ctx context.Context) error {
	if err := s.broadcaster.StartRecordingToSinkWithContext(klog.NewContext(ctx, s.log)); err != nil {
		return fmt.Errorf("app: recording Events: %w", err)
	}
	close(s.started)
	<-ctx.Done()
	return nil
}

// Shutdown stops the broadcaster, and with it the goroutine that hands
// the recorded Events to the API server; the ones writing an Event end
// with Serve's context.
func (s *eventService) Shutdown(context.Context) error {
	s.stopOnce.Do(func() { close(s.stopped) })
	s.broadcaster.Shutdown()
	return nil
}

// instanceSink writes Events with instance as their ReportingInstance.
// client-go's NewRecorder sets it to the controller's name and the
// machine's hostname, which it reads from the operating system, not from
// the Host; in a pod that is the pod's name too, but a test's Host and a
// replica run outside a cluster have another, so the sink puts the
// replica's identity, POD_NAME, there instead.
type instanceSink struct {
	events.EventSink
	instance string
}

func (s instanceSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	e = e.DeepCopy()
	e.ReportingInstance = s.instance
	return s.EventSink.Create(ctx, e)
}

func (s instanceSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	e = e.DeepCopy()
	e.ReportingInstance = s.instance
	return s.EventSink.Update(ctx, e)
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
