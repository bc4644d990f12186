package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// objectType is what a Controller knows of its objects' Go type: how to
// hand one from the cache to the end user's code. It is the only generic
// part of a Controller.
type objectType interface {
	// decode decodes u into the end user's own copy: step 2 of How one
	// key is reconciled (package doc).
	decode(u *cachedObject) (decoded, error)
}

// decoded is one object, decoded, ready for the end user's code.
type decoded interface {
	// reconcile calls the Reconciler. status is the JSON of the status to
	// apply, or nil for none.
	reconcile(ctx context.Context) (status []byte, after time.Duration, err error)

	// finalize calls the finalizer's f.
	finalize(ctx context.Context) error

	// statusErr is why the object's status couldn't be decoded, so the
	// Reconciler is handed a zero status: nil when it could.
	statusErr() error
}

// resourceType is the Go type of a Resource's objects.
type resourceType[Spec, Status any] struct {
	rec Reconciler[Spec, Status]
	fin func(context.Context, Object[Spec, Status]) error
}

// decode decodes u into an Object. A status that can't be decoded (a field
// of the wrong type, written by an older version of the type) is the
// controller's own output, which only its next status apply can mend: the
// Object gets a zero status, and statusErr says why.
func (r resourceType[Spec, Status]) decode(u *cachedObject) (decoded, error) {
	d := &resourceObject[Spec, Status]{typ: r, u: u}
	err := decode(u, &d.obj)
	var de *decodeError
	if err == nil || !errors.As(err, &de) || (de.field != "status" && !strings.HasPrefix(de.field, "status.")) {
		return d, err
	}
	var noStatus struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata,omitempty"`

		Spec   Spec            `json:"spec"`
		Status json.RawMessage `json:"status,omitempty"`
	}
	if err := decode(u, &noStatus); err != nil {
		return nil, err
	}
	d.obj = Object[Spec, Status]{TypeMeta: noStatus.TypeMeta, ObjectMeta: noStatus.ObjectMeta, Spec: noStatus.Spec}
	d.badStatus = err
	return d, nil
}

type resourceObject[Spec, Status any] struct {
	typ       resourceType[Spec, Status]
	u         *cachedObject
	obj       Object[Spec, Status]
	badStatus error // why the status couldn't be decoded
}

func (r *resourceObject[Spec, Status]) statusErr() error { return r.badStatus }

func (r *resourceObject[Spec, Status]) reconcile(ctx context.Context) ([]byte, time.Duration, error) {
	before, err := json.Marshal(r.obj.Status)
	if err != nil {
		return nil, 0, fmt.Errorf("kube: encoding %s's status: %w", describe(r.u), err)
	}
	if r.badStatus != nil {
		before = nil // what the API server holds isn't the zero status: apply whatever comes
	}
	res, err := r.typ.rec.Reconcile(ctx, r.obj)
	if res.Status == nil {
		return nil, res.After, err
	}
	after, encErr := json.Marshal(res.Status)
	if encErr != nil {
		return nil, res.After, errors.Join(err, fmt.Errorf("kube: encoding %s's new status: %w", describe(r.u), encErr))
	}
	if bytes.Equal(before, after) {
		return nil, res.After, err
	}
	return after, res.After, err
}

func (r *resourceObject[Spec, Status]) finalize(ctx context.Context) error {
	return r.typ.fin(ctx, r.obj)
}

// decode decodes u into a new value at v, through its JSON, as the API
// server encoded it, and its metadata. The decode is the end user's copy:
// nothing they do to it changes the cache. Fields the Go type doesn't have
// are ignored, since a newer CRD may add them; a value of the wrong type is
// an error naming the object and the field.
func decode(u *cachedObject, v any) error {
	if err := unmarshal(u, u.raw, v); err != nil {
		return err
	}
	if m := objectMeta(v); m != nil {
		u.ObjectMeta.DeepCopyInto(m)
		return nil
	}
	// A type whose metadata isn't an embedded metav1.ObjectMeta: through
	// JSON, as the rest.
	meta, err := json.Marshal(map[string]*metav1.ObjectMeta{"metadata": &u.ObjectMeta})
	if err != nil {
		return fmt.Errorf("kube: decoding %s: %w", describe(u), err)
	}
	return unmarshal(u, meta, v)
}

// objectMeta is the metav1.ObjectMeta v, a pointer to a value or to a
// pointer, embeds, or nil.
func objectMeta(v any) *metav1.ObjectMeta {
	acc, ok := v.(metav1.ObjectMetaAccessor)
	if p := reflect.ValueOf(v); !ok && p.Kind() == reflect.Pointer && p.Elem().Kind() == reflect.Pointer && !p.Elem().IsNil() {
		acc, ok = p.Elem().Interface().(metav1.ObjectMetaAccessor)
	}
	if !ok {
		return nil
	}
	m, _ := acc.GetObjectMeta().(*metav1.ObjectMeta)
	return m
}

// unmarshal decodes data, u's JSON, into v.
func unmarshal(u *cachedObject, data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field != "":
		return &decodeError{
			msg:   fmt.Sprintf("kube: decoding %s: field %s: a JSON %s can't be a Go %s", describe(u), te.Field, te.Value, te.Type),
			field: te.Field,
		}
	}
	return fmt.Errorf("kube: decoding %s: %w", describe(u), err)
}

// decodeError is a decode's error naming the field of the wrong type.
type decodeError struct {
	msg   string
	field string // such as spec.size
}

func (e *decodeError) Error() string { return e.msg }

// describe names an object in errors and records, such as
// "Memcached default/cache".
func describe(u *cachedObject) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.Kind + " " + ns + "/" + u.GetName()
	}
	return u.Kind + " " + u.GetName()
}
