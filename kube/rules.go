package kube

import (
	"reflect"
	"regexp"
	"slices"
	"unsafe"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/z5labs/humus/kube/internal/crd"
)

// TypeRules constrain the fields of one Go type, wherever the type appears
// in a schema.
//
// A Resource's Rules hold one TypeRules for a type: two, from Rules or
// Schema, are an error from CRD, as are Rules for a type that appears
// nowhere in Spec or Status, since they would constrain nothing.
//
// Where the type is embedded in a struct, and encoding/json inlines its
// fields, its Rules constrain those fields there too, and its Validations
// apply to the struct it is inlined in; the outer struct's own Rules for
// the same fields apply after them, so a constraint set by both is the
// outer one's.
type TypeRules struct {
	r crd.TypeRules
}

// Rules constrains the fields of T. v only names them: each of fields is a
// Field of a field of *v.
//
// A field of *v is one of T's own, or one promoted from a struct T embeds
// by value. A field of a struct T holds by name, such as &v.Template.Port,
// is constrained by that struct's own Rules: naming it here is an error
// from CRD, as is a Field that points anywhere but at a field of *v, and a
// field that isn't in T's JSON encoding (json:"-", unexported, or hidden by
// another of the same name).
func Rules[T any](v *T, fields ...FieldRule) TypeRules {
	fs := make([]func() crd.Field, len(fields))
	for i, f := range fields {
		if f != nil {
			fs[i] = f.fieldRule // called by CRD, as it reads the field
		}
	}
	return TypeRules{r: crd.TypeRules{Type: reflect.TypeFor[T](), Base: unsafe.Pointer(v), Fields: fs}}
}

// Description and Validation describe and constrain the type itself.
// Validation is a CEL rule the API server checks, such as
// "self.minReplicas <= self.maxReplicas".
//
// Description sets the schema's description wherever the type appears; a
// field's own Description replaces it on that field. Validation adds to the
// schema's x-kubernetes-validations, with message as the error the API
// server reports when rule is false ("" for the API server's own).
func (r TypeRules) Description(s string) TypeRules {
	r.r.Descriptions = append(slices.Clip(r.r.Descriptions), s)
	return r
}

// Validation: see Description.
func (r TypeRules) Validation(rule, message string) TypeRules {
	r.r.Validations = append(slices.Clip(r.r.Validations), apiextensionsv1.ValidationRule{Rule: rule, Message: message})
	return r
}

// Schema gives T's schema whole, for a type that encodes itself, whose
// schema can't be reflected.
//
// CRD uses a copy of s wherever T appears, as it is: it must be a
// structural schema, which the API server checks when the CRD is created.
// A *T field is nullable, as for a reflected schema. Schema is how a type
// that implements json.Marshaler gets a schema; CRD reports one that has
// none.
func Schema[T any](s apiextensionsv1.JSONSchemaProps) TypeRules {
	return TypeRules{r: crd.TypeRules{Type: reflect.TypeFor[T](), Schema: s.DeepCopy()}}
}

// FieldRule is a FieldOf of any type.
type FieldRule interface {
	fieldRule() crd.Field
}

// FieldOf is a field of type T, and its constraints. Each method returns a
// copy with one more constraint. A constraint that doesn't fit the field's
// type, such as Pattern on a number, is an error from CRD.
//
// Each constraint lands in the field's schema, where the API server reads
// it. Each one may be given once for a field, but for Validation, which may
// be given as often as the field has rules.
type FieldOf[T any] struct {
	p           *T
	constraints []crd.Constraint
}

// Field names the field p points to.
func Field[T any](p *T) FieldOf[T] {
	return FieldOf[T]{p: p}
}

func (f FieldOf[T]) with(c crd.Constraint) FieldOf[T] {
	f.constraints = append(slices.Clip(f.constraints), c)
	return f
}

func (f FieldOf[T]) fieldRule() crd.Field {
	return crd.Field{Ptr: unsafe.Pointer(f.p), Type: reflect.TypeFor[T](), Constraints: f.constraints}
}

// Description sets the field's description, which kubectl explain shows.
func (f FieldOf[T]) Description(s string) FieldOf[T] {
	return f.with(crd.Constraint{Kind: crd.Description, Text: s})
}

// Default is the value the API server sets the field to when an object
// leaves it out: v's JSON encoding. The field is optional.
func (f FieldOf[T]) Default(v T) FieldOf[T] { // and the field is optional
	return f.with(crd.Constraint{Kind: crd.Default, Value: v})
}

// Enum limits the field to values, each compared by its JSON encoding.
func (f FieldOf[T]) Enum(values ...T) FieldOf[T] {
	vs := make([]any, len(values))
	for i, v := range values {
		vs[i] = v
	}
	return f.with(crd.Constraint{Kind: crd.Enum, Values: vs})
}

// Minimum is the least value the field takes, for a number (an integer or
// floating-point field, or a pointer to one).
func (f FieldOf[T]) Minimum(v T) FieldOf[T] { // numbers
	return f.with(crd.Constraint{Kind: crd.Minimum, Value: v})
}

// Maximum is the greatest value the field takes, for a number.
func (f FieldOf[T]) Maximum(v T) FieldOf[T] {
	return f.with(crd.Constraint{Kind: crd.Maximum, Value: v})
}

// MinLength is the least length of the field, for a string, in characters.
func (f FieldOf[T]) MinLength(n int) FieldOf[T] { // strings
	return f.with(crd.Constraint{Kind: crd.MinLength, N: n})
}

// MaxLength is the greatest length of the field, for a string.
func (f FieldOf[T]) MaxLength(n int) FieldOf[T] {
	return f.with(crd.Constraint{Kind: crd.MaxLength, N: n})
}

// Pattern is a regular expression the field matches, for a string. The API
// server reports a mismatch as "<path> in body should match '<re>'".
func (f FieldOf[T]) Pattern(re *regexp.Regexp) FieldOf[T] {
	return f.with(crd.Constraint{Kind: crd.Pattern, Regexp: re})
}

// MinItems is the least number of items in the field, for a slice or an
// array.
func (f FieldOf[T]) MinItems(n int) FieldOf[T] { // slices
	return f.with(crd.Constraint{Kind: crd.MinItems, N: n})
}

// MaxItems is the greatest number of items in the field, for a slice or an
// array.
func (f FieldOf[T]) MaxItems(n int) FieldOf[T] {
	return f.with(crd.Constraint{Kind: crd.MaxItems, N: n})
}

// ListSet makes the list a set (x-kubernetes-list-type: set): its items are
// unique, and server-side apply merges them one by one. The items must be
// scalars or lists, and not nullable.
func (f FieldOf[T]) ListSet() FieldOf[T] {
	return f.with(crd.Constraint{Kind: crd.ListSet})
}

// ListMap makes the list a map keyed by its items' keys
// (x-kubernetes-list-type: map, with x-kubernetes-list-map-keys): no two
// items have the same keys, and server-side apply merges the items by them,
// so two field managers can own two items. The items must be structs, and
// each key the JSON name of a scalar field of theirs that is required or
// has a Default, and isn't nullable.
func (f FieldOf[T]) ListMap(keys ...string) FieldOf[T] {
	return f.with(crd.Constraint{Kind: crd.ListMap, Keys: slices.Clone(keys)})
}

// Validation adds a CEL rule the API server checks on the field, such as
// "self.startsWith('memcached:')", with message as its error ("" for the
// API server's own).
func (f FieldOf[T]) Validation(rule, message string) FieldOf[T] { // CEL
	return f.with(crd.Constraint{Kind: crd.Validation, Rule: apiextensionsv1.ValidationRule{Rule: rule, Message: message}})
}
