package kube

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Reconciler brings the cluster to what an object's spec declares.
//
// Reconcile must be idempotent: it is called again for the same object
// after a change to it or to a resource it Owns, a resync, an error,
// Result.After, or a new leader, and must do nothing more the second time.
// It may be cut off (its context is cancelled when the Lease is lost or
// Shutdown's context ends), so it must leave the cluster in a state a
// later call can finish from.
//
// A reconcile's own writes don't call it again: the watch events of the
// finalizer and the status the controller applies for it queue nothing,
// unless by then the object changed in anything else (its generation,
// labels, annotations, owner references, others' finalizers, or a
// deletion begun); nor do those of its writes to the resources it Owns,
// when made through a clientset built from Client.Config with the
// context Reconcile is handed, whose answers the Client's transport reads
// for their resourceVersion. A write made any other way calls it again, as
// anyone's change does.
type Reconciler[Spec, Status any] interface {
	// Reconcile is handed obj, its own copy of the object as the cache last
	// saw it, and returns what obj's status is now.
	Reconcile(ctx context.Context, obj Object[Spec, Status]) (Result[Status], error)
}

// ReconcilerFunc is a function that is a Reconciler.
type ReconcilerFunc[Spec, Status any] func(ctx context.Context, obj Object[Spec, Status]) (Result[Status], error)

// Reconcile calls f.
func (f ReconcilerFunc[Spec, Status]) Reconcile(ctx context.Context, obj Object[Spec, Status]) (Result[Status], error) {
	return f(ctx, obj)
}

// Result is what a reconcile leaves its object with.
type Result[Status any] struct {
	// Status is the object's status now. nil leaves it as it is. The
	// controller applies it when it differs from the object's, whether or
	// not Reconcile returned an error, so a failure can be a condition.
	Status *Status

	// After reconciles the object again after this long, unless it changes
	// first. Zero waits for a change, or for the resync.
	After time.Duration
}

// Kind names a kind whose Go type is defined elsewhere, such as one of
// Kubernetes' own, corev1.Namespace. Its objects decode into T. Its status
// belongs to whoever defines the kind, so a controller of a Kind applies no
// status. A Kind has no CRD: its definition is the API server's.
type Kind[T any] struct {
	GVR   schema.GroupVersionResource // such as corev1.SchemeGroupVersion.WithResource("namespaces")
	Kind  string                      // such as Namespace
	Scope Scope
}

// KindReconciler brings the cluster to what an object of a Kind declares.
// Like a Reconciler, its Reconcile must be idempotent, and may be cut off.
type KindReconciler[T any] interface {
	// Reconcile is handed obj, its own copy of the object as the cache last
	// saw it. A positive after reconciles obj again after that long, unless
	// it changes first. Zero waits for a change, or for the resync.
	Reconcile(ctx context.Context, obj T) (after time.Duration, err error)
}

// KindReconcilerFunc is a function that is a KindReconciler.
type KindReconcilerFunc[T any] func(ctx context.Context, obj T) (time.Duration, error)

// Reconcile calls f.
func (f KindReconcilerFunc[T]) Reconcile(ctx context.Context, obj T) (time.Duration, error) {
	return f(ctx, obj)
}
