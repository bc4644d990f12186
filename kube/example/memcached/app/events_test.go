package app

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
)

// The eventService writes what its recorder records with the clientset, in
// the name of the controller and of this replica, POD_NAME, not of the
// machine's hostname; and its goroutines end with it.
func TestEventServiceRecordsAsThisReplica(t *testing.T) {
	kc := kubefake.NewClientset()
	tel := humustest.NewTelemetry()
	svc := newEventService(&humus.Setup{Telemetry: tel.Telemetry().Resolved()}, kc, "memcached-controller-7d9f-x2k4q")
	m := &corev1.ObjectReference{
		APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Namespace: "shop", Name: "sessions",
		UID: "0b5d6a2e-6f1c-4f6e-9b1a-3c2d1e0f9a8b",
	}

	humustest.TestService(t, svc, humustest.During(func(ctx context.Context) {
		svc.Eventf(m, nil, corev1.EventTypeNormal, "Finalized", "Finalize", "finalized")
		deadline := time.Now().Add(10 * time.Second)
		for {
			list, err := kc.EventsV1().Events("shop").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) > 0 {
				e := list.Items[0]
				if len(list.Items) != 1 || e.Reason != "Finalized" || e.Action != "Finalize" || e.Regarding != *m ||
					e.ReportingController != Name || e.ReportingInstance != "memcached-controller-7d9f-x2k4q" {
					t.Errorf("events = %+v, want one Finalized about the Memcached, from %s memcached-controller-7d9f-x2k4q", list.Items, Name)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Error(errors.New("no Event was written within 10s"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}))
}

// An Event the API server can't take for now (503, 429) is written on a
// later try; one it refuses (422) is tried once, logged and dropped.
func TestEventServiceTriesAgainOnlyWhatAnotherTryCanMend(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error
		tries  int
		stored bool
	}{
		{"unavailable, then written", apierrors.NewServiceUnavailable("starting"), 3, true},
		{"throttled, then written", apierrors.NewTooManyRequests("slow down", 1), 3, true},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "e", nil), 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				kc := kubefake.NewClientset()
				tries := 0
				kc.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
					tries++
					if tries < 3 || tc.tries == 1 {
						return true, nil, tc.answer
					}
					return false, nil, nil
				})
				tel := humustest.NewTelemetry()
				svc := newEventService(&humus.Setup{Telemetry: tel.Telemetry().Resolved()}, kc, "replica-a")
				m := &corev1.ObjectReference{Kind: "Memcached", Namespace: "shop", Name: "sessions"}
				e, err := svc.event(m, nil, corev1.EventTypeNormal, "Created", "Create", "created")
				if err != nil {
					t.Fatal(err)
				}
				svc.write(t.Context(), e)
				list, err := kc.EventsV1().Events("shop").List(t.Context(), metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if tries != tc.tries || (len(list.Items) == 1) != tc.stored {
					t.Errorf("tries, stored = %d, %d Events; want %d, stored %v", tries, len(list.Items), tc.tries, tc.stored)
				}
			})
		})
	}
}

// An Event recorded once the Service is shut down, or while 1,000 wait,
// is dropped: Eventf never blocks a reconcile.
func TestEventServiceDropsWhatItCannotQueue(t *testing.T) {
	tel := humustest.NewTelemetry()
	svc := newEventService(&humus.Setup{Telemetry: tel.Telemetry().Resolved()}, kubefake.NewClientset(), "replica-a")
	m := &corev1.ObjectReference{Kind: "Memcached", Namespace: "shop", Name: "sessions"}
	for range 1001 {
		svc.Eventf(m, nil, corev1.EventTypeNormal, "Created", "Create", "created")
	}
	if len(svc.queue) != 1000 {
		t.Errorf("%d Events queued, want 1000", len(svc.queue))
	}
	<-svc.queue
	if err := svc.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	svc.Eventf(m, nil, corev1.EventTypeNormal, "Created", "Create", "created")
	if len(svc.queue) != 999 {
		t.Errorf("%d Events queued after shutdown, want 999", len(svc.queue))
	}
	if _, err := svc.event(m, nil, "Info", "Created", "Create", "created"); err == nil || err.Error() != `app: event type "Info" is neither Normal nor Warning` {
		t.Errorf("an Event of type Info: %v", err)
	}
}
