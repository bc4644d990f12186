package app

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

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
