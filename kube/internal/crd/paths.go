package crd

import (
	"fmt"
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A printer column's JSONPath and the scale subresource's paths name
// fields of an object. Build checks each against the schema it reflected,
// with the object's metadata as ObjectMeta's fields, since the API server
// checks none: a path that names no field is accepted, and shows an empty
// column, or fails every scale.

// fieldPath is where a walk through a schema is, in the style of a site's
// path (spec.items[*].name), with the schema there. A nil schema is one
// the walk can't see into, such as x-kubernetes-preserve-unknown-fields:
// anything below it may be there.
type fieldPath struct {
	path   string
	schema *apiextensionsv1.JSONSchemaProps
}

// objectRoot is the root of an object's schema for walking paths: the
// CRD's root, with metadata as ObjectMeta's fields, which the API server
// fills in itself and the CRD's schema leaves out.
func objectRoot(root *apiextensionsv1.JSONSchemaProps) fieldPath {
	r := newReflector(nil)
	meta := r.structSchema(site{path: "metadata", owner: "metav1.ObjectMeta"}, reflect.TypeFor[metav1.ObjectMeta]())
	p := root.DeepCopy()
	p.Properties["metadata"] = *meta
	return fieldPath{schema: p}
}

// field steps into the field or map key name.
func (f fieldPath) field(name string) (fieldPath, error) {
	next := fieldPath{path: name}
	if f.path != "" {
		next.path = f.path + "." + name
	}
	p := f.schema
	switch {
	case p == nil:
		return next, nil
	case p.Properties != nil:
		if q, ok := p.Properties[name]; ok {
			next.schema = &q
			return next, nil
		}
	case p.AdditionalProperties != nil:
		next.schema = p.AdditionalProperties.Schema
		return next, nil
	}
	if p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields {
		return next, nil
	}
	if p.Type == "object" {
		return next, noField(fmt.Sprintf("%s has no field %q", f.where(), name))
	}
	return next, noField(fmt.Sprintf("%s is %s, which has no field %q", f.where(), describeSchema(p), name))
}

// items steps into an array's items, as an index or a filter does; what
// names the step, such as [0], is for the error.
func (f fieldPath) items(what string) (fieldPath, error) {
	next := fieldPath{path: f.path + "[*]"}
	p := f.schema
	switch {
	case p == nil:
		return next, nil
	case p.Type == "array" && p.Items != nil:
		next.schema = p.Items.Schema
		return next, nil
	case p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields:
		return next, nil
	}
	return next, noField(fmt.Sprintf("%s is %s, not an array, so %s finds nothing", f.where(), describeSchema(p), what))
}

// noField is a path that names no field of the schema, and why.
type noField string

func (e noField) Error() string { return "names no field of the schema: " + string(e) }

// where names f in an error.
func (f fieldPath) where() string {
	if f.path == "" {
		return "the object"
	}
	return f.path
}

// describeSchema says what a schema holds, as the reflector's errors do:
// type: integer, format: int32.
func describeSchema(p *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case p == nil:
		return "a field of any type"
	case p.XIntOrString:
		return "x-kubernetes-int-or-string"
	case p.Type == "":
		return "a schema of no type"
	}
	s := []string{"type: " + p.Type}
	if p.Format != "" {
		s = append(s, "format: "+p.Format)
	}
	if p.Nullable {
		s = append(s, "nullable")
	}
	return strings.Join(s, ", ")
}
