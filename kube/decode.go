package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// objectType is what a Controller knows of its objects' Go type: how to
// hand one from the cache to the end user's code. It is the only generic
// part of a Controller.
type objectType interface {
	// decode decodes u into the end user's own copy: step 2 of How one
	// key is reconciled (package doc).
	decode(u *cache.Object) (decoded, error)
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

// decode decodes u into an Object. A status that can't be decoded, for
// whatever reason (a field of the wrong type, a time or a quantity that
// doesn't parse, a type's own UnmarshalJSON refusing it), written by an
// older version of the type or through a looser CRD, is the controller's
// own output, which only its next status apply can mend: the Object gets
// a zero status, and statusErr says why. The object decoded again without
// its status tells the status's error from the rest's: any error of the
// rest is the decode's.
func (r resourceType[Spec, Status]) decode(u *cache.Object) (decoded, error) {
	d := &resourceObject[Spec, Status]{typ: r, u: u}
	err := decode(u, &d.obj)
	if err == nil {
		return d, nil
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
	d.badStatus = statusError[Status](u, noStatus.Status, err)
	return d, nil
}

// statusError is why status, u's, can't be decoded, err being the
// object's decode error: err when it names the field; otherwise, as
// encoding/json names no field for an error of a type's own UnmarshalJSON,
// the error of the first of the status's members (by name) that can't be
// decoded alone, naming it.
func statusError[Status any](u *cache.Object, status json.RawMessage, err error) error {
	if _, ok := errors.AsType[*decodeError](err); ok {
		return err
	}
	field, cause := "status", json.Unmarshal(status, new(Status))
	var members map[string]json.RawMessage
	if json.Unmarshal(status, &members) == nil {
		for _, name := range slices.Sorted(maps.Keys(members)) {
			one, merr := json.Marshal(map[string]json.RawMessage{name: members[name]})
			if merr != nil {
				continue
			}
			if err := json.Unmarshal(one, new(Status)); err != nil {
				field, cause = "status."+name, err
				break
			}
		}
	}
	if cause == nil {
		return err
	}
	return fmt.Errorf("kube: decoding %s: field %s: %w", describe(u), field, cause)
}

type resourceObject[Spec, Status any] struct {
	typ       resourceType[Spec, Status]
	u         *cache.Object
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
func decode(u *cache.Object, v any) error {
	if err := unmarshal(u, u.Raw, v); err != nil {
		return err
	}
	if m := objectMeta(v); m != nil {
		u.DeepCopyInto(m)
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
func unmarshal(u *cache.Object, data []byte, v any) error {
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
func describe(u *cache.Object) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.Kind + " " + ns + "/" + u.GetName()
	}
	return u.Kind + " " + u.GetName()
}

// kindType is the Go type of a Kind's objects.
type kindType[T any] struct {
	rec KindReconciler[T]
	fin func(context.Context, T) error
}

func (k kindType[T]) decode(u *cache.Object) (decoded, error) {
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
