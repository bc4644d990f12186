package admission

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// refusal is the Status a webhook's function's error refuses a write
// with, as ValidateFunc says: field errors as Invalid, with their causes,
// as the API server refuses a write its schema refuses; an API status as
// it is; anything else as Forbidden.
func refusal(err error, gk schema.GroupKind, name string) *metav1.Status {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		if s.Code < http.StatusBadRequest {
			s.Code = http.StatusForbidden
		}
		s.Status = metav1.StatusFailure
		return &s
	}
	if fes, ok := fieldErrors(err); ok {
		s := apierrors.NewInvalid(gk, name, fes).ErrStatus
		return &s
	}
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: err.Error(),
	}
}

// fieldErrors returns the field errors err is made of: err itself, or
// each error it joins (errors.Join, a utilerrors.Aggregate such as
// field.ErrorList.ToAggregate's) or wraps; false when any part of it
// isn't one.
func fieldErrors(err error) (field.ErrorList, bool) {
	var fe *field.Error
	if errors.As(err, &fe) && !joins(err) {
		return field.ErrorList{fe}, true
	}
	var parts []error
	//nolint:errorlint // each layer of err in turn: errors.As would skip to the first join
	switch e := err.(type) {
	case utilerrors.Aggregate:
		parts = e.Errors()
	case interface{ Unwrap() []error }:
		parts = e.Unwrap()
	default:
		if u := errors.Unwrap(err); u != nil {
			return fieldErrors(u)
		}
		return nil, false
	}
	var out field.ErrorList
	for _, p := range parts {
		fes, ok := fieldErrors(p)
		if !ok {
			return nil, false
		}
		out = append(out, fes...)
	}
	return out, len(out) > 0
}

// joins is whether err is, or wraps, a join of several errors.
func joins(err error) bool {
	for err != nil {
		switch err.(type) { //nolint:errorlint // each layer of err in turn, unwrapped below
		case utilerrors.Aggregate, interface{ Unwrap() []error }:
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}
