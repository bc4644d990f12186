package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// objectType is what a Controller knows of its objects' Go type: how to
// hand one from the cache to the end user's code. It is the only generic
// part of a Controller.
type Type interface {
	// Decode decodes u into the end user's own copy: step 2 of How one
	// key is reconciled (package doc).
	Decode(u *cache.Object) (Decoded, error)
}

// Decoded is one object, decoded, ready for the end user's code.
type Decoded interface {
	// Reconcile calls the Reconciler. status is the JSON of the status to
	// apply, or nil for none.
	Reconcile(ctx context.Context) (status []byte, after time.Duration, err error)

	// Finalize calls the finalizer's f.
	Finalize(ctx context.Context) error

	// StatusErr is why the object's status couldn't be decoded, so the
	// Reconciler is handed a zero status: nil when it could.
	StatusErr() error
}

// Decode decodes u into a new value at v, through its JSON, as the API
// server encoded it, and its metadata. The decode is the end user's copy:
// nothing they do to it changes the cache. Fields the Go type doesn't have
// are ignored, since a newer CRD may add them; a value of the wrong type is
// an error naming the object and the field.
func Decode(u *cache.Object, v any) error {
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
		return fmt.Errorf("kube: decoding %s: %w", Describe(u), err)
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
		return &DecodeError{
			msg:   fmt.Sprintf("kube: decoding %s: field %s: a JSON %s can't be a Go %s", Describe(u), te.Field, te.Value, te.Type),
			field: te.Field,
		}
	}
	return fmt.Errorf("kube: decoding %s: %w", Describe(u), err)
}

// DecodeError is a decode's error naming the field of the wrong type.
type DecodeError struct {
	msg   string
	field string // such as spec.size
}

func (e *DecodeError) Error() string { return e.msg }

// Describe names an object in errors and records, such as
// "Memcached default/cache".
func Describe(u *cache.Object) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.Kind + " " + ns + "/" + u.GetName()
	}
	return u.Kind + " " + u.GetName()
}
