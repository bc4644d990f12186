package app

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

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
	// Kube applies the Deployments: a clientset, such as a
	// test's fake, or Init's apps/v1 client.
	Kube AppsV1Getter

	// Deployments reads the Deployments it applies, from the controller's
	// cache: Init's kube.Reader, or a test's.
	Deployments DeploymentReader

	// Events records the Events about the Memcacheds: Init's
	// kube.Recorder, or a test's; nil records none.
	Events EventRecorder
}

// AppsV1Getter is the part of client-go's clientset (kubernetes.Interface)
// the Reconciler uses. Init hands it client-go's apps/v1 client alone: the
// whole clientset would link the typed client of every API group into the
// binary, 14 MB of its 79 (kube/BENCHMARKS.md, "Binary size").
type AppsV1Getter interface {
	AppsV1() appsv1client.AppsV1Interface
}

// appsV1 is client-go's apps/v1 client as an AppsV1Getter.
type appsV1 struct{ appsv1client.AppsV1Interface }

func (a appsV1) AppsV1() appsv1client.AppsV1Interface { return a.AppsV1Interface }

// EventRecorder records an Event, with the proof of the Lease that ctx, a
// reconcile's, carries: a *kube.Recorder does.
type EventRecorder interface {
	Record(ctx context.Context, e kube.Event)
}

// Reconcile makes sure m's Deployment is what m says, and returns m's
// status. There is no Get of m and no not-found: m is the object as the
// cache last saw it. There is no status update and no conflict either:
// the controller applies the status it returns, and applies it on an error
// too, so a failure is a condition as well as an error.
//
// It reads the Deployment first, from the cache the controller keeps of
// the Deployments it owns, and applies it only when it is missing or
// differs from what it would apply (upToDate): a write that changes
// nothing still costs the API server a request, an etcd write and an
// event to every watcher, and a controller's restart reconciles every
// Memcached at once. So a restart, or a resync, reads each Deployment,
// sends no request for it, and writes none that is as it should be. The
// read sees the controller's own last apply of it: after a reconcile
// applied the Deployment, the next one's read waits for the cache to
// bring that version (kube.Reader.Get).
func (r Reconciler) Reconcile(ctx context.Context, m kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Result[MemcachedStatus], error) {
	st := m.Status
	failed := func(reason string, err error) (kube.Result[MemcachedStatus], error) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: "Available", Status: metav1.ConditionUnknown, Reason: reason,
			Message: err.Error(), ObservedGeneration: m.Generation,
		})
		return kube.Result[MemcachedStatus]{Status: &st}, err
	}

	d, err := r.Deployments.Get(ctx, m.Namespace, m.Name)
	missing := apierrors.IsNotFound(err)
	if err != nil && !missing {
		return failed("GetFailed", err)
	}
	ready := d.Status.ReadyReplicas
	if missing || !upToDate(&d, m) {
		applied, err := r.Kube.AppsV1().Deployments(m.Namespace).Apply(ctx, deployment(m),
			// Force takes back any field someone else changed, such as a
			// hand-made scale: the Memcached's spec says how many replicas
			// run.
			metav1.ApplyOptions{FieldManager: Name, Force: true},
		)
		if err != nil {
			return failed("ApplyFailed", err)
		}
		ready = applied.Status.ReadyReplicas
		// A clientset's answer carries no kind: the reference to the
		// Deployment is written out.
		ref := &corev1.ObjectReference{
			APIVersion: "apps/v1", Kind: "Deployment", Namespace: applied.Namespace, Name: applied.Name, UID: applied.UID,
		}
		if missing {
			r.event(ctx, m, ref, "DeploymentCreated", "Create", "Created Deployment "+applied.Name)
		} else {
			// Such as after a hand-made scale: each time it is put back,
			// the Recorder counts it into the Event's series.
			r.event(ctx, m, ref, "DeploymentReapplied", "Apply", "Applied Deployment "+applied.Name+" again: it differed from the Memcached")
		}
	}
	st.ReadyReplicas = ready
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: "Available", Status: metav1.ConditionTrue, Reason: "DeploymentApplied",
		ObservedGeneration: m.Generation,
	})
	return kube.Result[MemcachedStatus]{Status: &st}, nil
}

// labels are the labels of m's Deployment's selector and pods.
func labels(m kube.Object[MemcachedSpec, MemcachedStatus]) map[string]string {
	return map[string]string{"app": "memcached", "memcached": m.Name}
}

// deployment is the Deployment Reconcile applies for m: every field the
// controller owns, and nothing else.
func deployment(m kube.Object[MemcachedSpec, MemcachedStatus]) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment(m.Name, m.Namespace).
		// The controller owner reference is what kube.Owns matches, so a
		// change to the Deployment reconciles its Memcached, and what the
		// garbage collector follows to delete the Deployment with it.
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(m.APIVersion).WithKind(m.Kind).WithName(m.Name).WithUID(m.UID).
			WithController(true).WithBlockOwnerDeletion(true)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(m.Spec.Size).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels(m))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels(m)).
				WithSpec(corev1ac.PodSpec().WithContainers(
					corev1ac.Container().WithName(container).WithImage(m.Spec.Image)))))
}

// container is the name of the Deployment's memcached container.
const container = "memcached"

// upToDate reports whether d already has what deployment(m) would apply,
// so applying it would change nothing. What others add beside it, such as
// a label or a sidecar container, doesn't count: an apply would leave it
// there too.
func upToDate(d *Deployment, m kube.Object[MemcachedSpec, MemcachedStatus]) bool {
	owner := metav1.GetControllerOf(d)
	ownedByM := owner != nil && owner.UID == m.UID && owner.APIVersion == m.APIVersion &&
		owner.Kind == m.Kind && owner.Name == m.Name &&
		owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion
	replicas := d.Spec.Replicas != nil && *d.Spec.Replicas == m.Spec.Size
	selector := d.Spec.Selector != nil && maps.Equal(d.Spec.Selector.MatchLabels, labels(m)) &&
		len(d.Spec.Selector.MatchExpressions) == 0
	podLabels := true
	for k, v := range labels(m) {
		if got, ok := d.Spec.Template.Metadata.Labels[k]; !ok || got != v {
			podLabels = false
		}
	}
	image := false
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == container {
			image = c.Image == m.Spec.Image
		}
	}
	return ownedByM && replicas && selector && podLabels && image
}

// Finalize runs once m is being deleted, before it goes. The Deployment
// needs no cleaning up here: the garbage collector deletes it, through its
// owner reference. A finalizer is for what owner references can't reach,
// such as something outside the cluster; this one records an Event saying
// that m was finalized, which kubectl events shows.
//
// The Event is recorded as kube.Recorder records them, in the background,
// with retries of its own, so Finalize returns nil and the deletion
// doesn't wait for it. An Event the API server refuses, such as in a
// namespace being deleted, which takes no new Event, is dropped: it only
// tells of the finalizer, so it isn't worth keeping m for.
func (r Reconciler) Finalize(ctx context.Context, m kube.Object[MemcachedSpec, MemcachedStatus]) error {
	r.event(ctx, m, nil, "Finalized", "Finalize",
		"The Memcached is finalized; the garbage collector deletes its Deployment.")
	return nil
}

// event records a Normal Event about m, and related when it isn't nil,
// with ctx, the reconcile's.
func (r Reconciler) event(ctx context.Context, m kube.Object[MemcachedSpec, MemcachedStatus], related *corev1.ObjectReference, reason, action, note string) {
	if r.Events == nil {
		return
	}
	r.Events.Record(ctx, kube.Event{
		Regarding: kube.Ref(&m), Related: related,
		Type: kube.Normal, Reason: reason, Action: action, Note: note,
	})
}
