package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
func (r resourceType[Spec, Status]) Decode(u *cache.Object) (control.Decoded, error) {
	d := &resourceObject[Spec, Status]{typ: r, u: u}
	err := control.Decode(u, &d.obj)
	if err == nil {
		return d, nil
	}
	var noStatus struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata,omitempty"`

		Spec   Spec            `json:"spec"`
		Status json.RawMessage `json:"status,omitempty"`
	}
	if err := control.Decode(u, &noStatus); err != nil {
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
	if _, ok := errors.AsType[*control.DecodeError](err); ok {
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
	return fmt.Errorf("kube: decoding %s: field %s: %w", control.Describe(u), field, cause)
}

type resourceObject[Spec, Status any] struct {
	typ       resourceType[Spec, Status]
	u         *cache.Object
	obj       Object[Spec, Status]
	badStatus error // why the status couldn't be decoded
}

func (r *resourceObject[Spec, Status]) StatusErr() error { return r.badStatus }

func (r *resourceObject[Spec, Status]) Reconcile(ctx context.Context) ([]byte, time.Duration, error) {
	before, err := json.Marshal(r.obj.Status)
	if err != nil {
		return nil, 0, fmt.Errorf("kube: encoding %s's status: %w", control.Describe(r.u), err)
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
		return nil, res.After, errors.Join(err, fmt.Errorf("kube: encoding %s's new status: %w", control.Describe(r.u), encErr))
	}
	if bytes.Equal(before, after) {
		return nil, res.After, err
	}
	return after, res.After, err
}

func (r *resourceObject[Spec, Status]) Finalize(ctx context.Context) error {
	return r.typ.fin(ctx, r.obj)
}

// kindType is the Go type of a Kind's objects.
type kindType[T any] struct {
	rec KindReconciler[T]
	fin func(context.Context, T) error
}

func (k kindType[T]) Decode(u *cache.Object) (control.Decoded, error) {
	d := &kindObject[T]{typ: k}
	if err := control.Decode(u, &d.obj); err != nil {
		return nil, err
	}
	return d, nil
}

type kindObject[T any] struct {
	typ kindType[T]
	obj T
}

func (k *kindObject[T]) Reconcile(ctx context.Context) ([]byte, time.Duration, error) {
	after, err := k.typ.rec.Reconcile(ctx, k.obj)
	return nil, after, err
}

func (k *kindObject[T]) Finalize(ctx context.Context) error { return k.typ.fin(ctx, k.obj) }

// statusErr is nil: a Kind's object is decoded whole, or not at all.
func (k *kindObject[T]) StatusErr() error { return nil }
