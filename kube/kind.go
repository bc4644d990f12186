package kube

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

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

// kindType is the Go type of a Kind's objects.
type kindType[T any] struct {
	rec KindReconciler[T]
	fin func(context.Context, T) error
}

func (k kindType[T]) decode(u *cachedObject) (decoded, error) {
	d := &kindObject[T]{typ: k}
	if err := decode(u, &d.obj); err != nil {
		return nil, err
	}
	return d, nil
}

type kindObject[T any] struct {
	typ kindType[T]
	obj T
}

func (k *kindObject[T]) reconcile(ctx context.Context) ([]byte, time.Duration, error) {
	after, err := k.typ.rec.Reconcile(ctx, k.obj)
	return nil, after, err
}

func (k *kindObject[T]) finalize(ctx context.Context) error { return k.typ.fin(ctx, k.obj) }

// statusErr is nil: a Kind's object is decoded whole, or not at all.
func (k *kindObject[T]) statusErr() error { return nil }
