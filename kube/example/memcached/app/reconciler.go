package app

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/kube"
)

// Name is the controller's name: its Settings.Name, so the name of its
// Lease and the field manager of the statuses and finalizers it applies,
// and the field manager of the Deployments the Reconciler applies. One
// name for everything the controller writes makes its managed fields easy
// to read.
const Name = "memcached-controller"

// Finalizer is the finalizer the controller keeps on every Memcached until
// Reconciler.Finalize has run.
const Finalizer = "cache.example.com/finalizer"

// Reconciler applies a Deployment that each Memcached controls, and
// reports it in the Memcached's status.
type Reconciler struct {
	Kube kubernetes.Interface

	// Instance names this replica in the Events it records, such as its
	// pod's name.
	Instance string
}

// Reconcile applies m's Deployment. There is no Get and no not-found: m is
// the object as the cache last saw it. There is no status update and no
// conflict either: the controller applies the status it returns, and
// applies it on an error too, so a failure is a condition as well as an
// error.
func (r Reconciler) Reconcile(ctx context.Context, m kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Result[MemcachedStatus], error) {
	labels := map[string]string{"app": "memcached", "memcached": m.Name}
	d, err := r.Kube.AppsV1().Deployments(m.Namespace).Apply(ctx,
		appsv1ac.Deployment(m.Name, m.Namespace).
			// The controller owner reference is what kube.Owns matches, so
			// a change to the Deployment reconciles its Memcached, and what
			// the garbage collector follows to delete the Deployment with
			// it.
			WithOwnerReferences(metav1ac.OwnerReference().
				WithAPIVersion(m.APIVersion).WithKind(m.Kind).WithName(m.Name).WithUID(m.UID).
				WithController(true).WithBlockOwnerDeletion(true)).
			WithSpec(appsv1ac.DeploymentSpec().
				WithReplicas(m.Spec.Size).
				WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
				WithTemplate(corev1ac.PodTemplateSpec().
					WithLabels(labels).
					WithSpec(corev1ac.PodSpec().WithContainers(
						corev1ac.Container().WithName("memcached").WithImage(m.Spec.Image))))),
		// Force takes back any field someone else changed, such as a
		// hand-made scale: the Memcached's spec says how many replicas run.
		metav1.ApplyOptions{FieldManager: Name, Force: true},
	)
	st := m.Status
	if err != nil {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: "Available", Status: metav1.ConditionUnknown, Reason: "ApplyFailed",
			Message: err.Error(), ObservedGeneration: m.Generation,
		})
		return kube.Result[MemcachedStatus]{Status: &st}, err
	}
	st.ReadyReplicas = d.Status.ReadyReplicas
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: "Available", Status: metav1.ConditionTrue, Reason: "DeploymentApplied",
		ObservedGeneration: m.Generation,
	})
	return kube.Result[MemcachedStatus]{Status: &st}, nil
}

// Finalize runs once m is being deleted, before it goes. The Deployment
// needs no cleaning up here: the garbage collector deletes it, through its
// owner reference. A finalizer is for what owner references can't reach,
// such as something outside the cluster; this one records an Event saying
// that m was finalized, which kubectl events shows.
//
// An error keeps the finalizer, and retries with backoff: the deletion
// waits until Finalize returns nil. A namespace being deleted takes no new
// Event, so then Finalize records none, or a Memcached would keep its
// namespace from ever going.
func (r Reconciler) Finalize(ctx context.Context, m kube.Object[MemcachedSpec, MemcachedStatus]) error {
	now := time.Now()
	_, err := r.Kube.EventsV1().Events(m.Namespace).Create(ctx, &eventsv1.Event{
		// Named as client-go's event recorder names its Events.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", m.Name, now.UnixNano()), Namespace: m.Namespace},
		Regarding: corev1.ObjectReference{
			APIVersion: m.APIVersion, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: Name,
		ReportingInstance:   r.Instance,
		Type:                corev1.EventTypeNormal,
		Action:              "Finalize",
		Reason:              "Finalized",
		Note:                "The Memcached is finalized; the garbage collector deletes its Deployment.",
	}, metav1.CreateOptions{FieldManager: Name})
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		// m goes with its namespace, which takes no new Event: the Event
		// only tells of the finalizer, so it isn't worth keeping m for.
		return nil
	}
	if err != nil {
		return fmt.Errorf("app: recording that Memcached %s/%s is finalized: %w", m.Namespace, m.Name, err)
	}
	return nil
}
