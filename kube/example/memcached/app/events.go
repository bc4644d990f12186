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
// humus.Service: the recorder and its goroutines start with its Serve, and
// end with it, so an Init that fails after making it leaves nothing
// running.
//
// It is the Reconciler's events.EventRecorder too. Eventf waits for Serve
// to have started the recorder, which it has long before a reconcile, once
// the controller's caches have synced: client-go's broadcaster would drop
// an Event it got before. The recorder writes the Events in the
// background, retrying what it can't write; an Event recorded after the
// App has stopped, while the controller finishes its reconciles, is
// dropped.
type eventService struct {
	kc       kubernetes.Interface
	instance string
	log      logr.Logger

	recorder events.EventRecorder // set by Serve, before it closes started
	started  chan struct{}        // closed once Serve records to the API server
	stopped  chan struct{}        // closed by Shutdown
	stopOnce sync.Once
}

// newEventService returns the Service that records Events in the name of
// the controller, Name, and of this replica, instance, such as its pod's
// name, with kc.
func newEventService(s *humus.Setup, kc kubernetes.Interface, instance string) *eventService {
	return &eventService{
		kc:       kc,
		instance: instance,
		// client-go logs through klog: a logger of the App's own, in the
		// recorder and in its context, keeps its records from klog's
		// global logger and the real stderr.
		log: logr.FromSlogHandler(verbosity{otelslog.NewHandler("github.com/z5labs/humus/kube/example/memcached/app",
			otelslog.WithLoggerProvider(s.Telemetry.LoggerProvider))}),
		started: make(chan struct{}),
		stopped: make(chan struct{}),
	}
}

// Eventf records an Event, as events.EventRecorder's Eventf does, once
// Serve has started the recorder, and drops it once the Service is shut
// down.
func (s *eventService) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	select {
	case <-s.started:
	case <-s.stopped:
		return
	}
	s.recorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// Serve starts the recorder, writes the Events recorded until ctx is done,
// and then stops it.
func (s *eventService) Serve(ctx context.Context) error {
	b := events.NewBroadcaster(instanceSink{
		EventSink: &events.EventSinkImpl{Interface: s.kc.EventsV1()},
		instance:  s.instance,
	})
	defer b.Shutdown()
	if err := b.StartRecordingToSinkWithContext(klog.NewContext(ctx, s.log)); err != nil {
		return fmt.Errorf("app: recording Events: %w", err)
	}
	// The recorder takes the Event's regarding object as a
	// *corev1.ObjectReference, which needs no scheme.
	s.recorder = b.NewRecorder(nil, Name).WithLogger(s.log)
	close(s.started)
	<-ctx.Done()
	return nil
}

// Shutdown drops the Events recorded from now on. Serve stops the
// recorder, once its context is done; the goroutines writing an Event end
// with that context.
func (s *eventService) Shutdown(context.Context) error {
	s.stopOnce.Do(func() { close(s.stopped) })
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
