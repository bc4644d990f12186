package crd_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"testing"
	"unsafe"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/z5labs/humus/kube/internal/crd"
)

// thing names a resource whose CRD is all right, for tests of its schema.
var thing = crd.Meta{Group: "schema.example.com", Version: "v1", Kind: "Thing", Plural: "things", Scope: apiextensionsv1.NamespaceScoped}

// specSchema returns the schema Build reflects for a resource whose spec
// is a T.
func specSchema[T any](rules ...crd.TypeRules) (apiextensionsv1.JSONSchemaProps, error) {
	c, err := crd.Build(thing, reflect.TypeFor[T](), reflect.TypeFor[struct{}](), rules)
	if err != nil {
		return apiextensionsv1.JSONSchemaProps{}, err
	}
	return c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"], nil
}

// rules are T's TypeRules, as kube.Rules makes them: fields name fields of
// *v.
func rules[T any](v *T, fields ...crd.Field) crd.TypeRules {
	r := crd.TypeRules{Type: reflect.TypeFor[T](), Base: unsafe.Pointer(v)}
	for _, f := range fields {
		r.Fields = append(r.Fields, func() crd.Field { return f })
	}
	return r
}

// described is r with the type's Description s, as TypeRules.Description
// gives it.
func described(r crd.TypeRules, s string) crd.TypeRules {
	r.Descriptions = append(r.Descriptions, s)
	return r
}

// validated is r with the type's Validation, as TypeRules.Validation gives
// it.
func validated(r crd.TypeRules, rule, message string) crd.TypeRules {
	r.Validations = append(r.Validations, validation(rule, message))
	return r
}

// validation is a CEL rule and its message.
func validation(rule, message string) apiextensionsv1.ValidationRule {
	return apiextensionsv1.ValidationRule{Rule: rule, Message: message}
}

// field is the field p points to, with constraints, as kube.Field and
// FieldOf's methods make it.
func field[T any](p *T, constraints ...crd.Constraint) crd.Field {
	return crd.Field{Ptr: unsafe.Pointer(p), Type: reflect.TypeFor[T](), Constraints: constraints}
}

// with is a constraint of kind k, whose value v is in the field of
// Constraint that k takes, as FieldOf's method of k's name makes it.
func with(k crd.Kind, v any) crd.Constraint {
	c := crd.Constraint{Kind: k}
	switch k {
	case crd.Description:
		c.Text = v.(string)
	case crd.Enum:
		c.Values, _ = v.([]any)
	case crd.MinLength, crd.MaxLength, crd.MinItems, crd.MaxItems, crd.MinProperties, crd.MaxProperties:
		c.N = v.(int)
	case crd.Pattern:
		c.Regexp, _ = v.(*regexp.Regexp)
	case crd.ListMap:
		c.Keys, _ = v.([]string)
	case crd.Validation:
		c.Rule = v.(apiextensionsv1.ValidationRule)
	case crd.ListSet:
	default:
		c.Value = v
	}
	return c
}

// errorLines returns the errors err joins, each as its text; err's own
// text when it joins none.
func errorLines(err error) []string {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		var out []string
		for _, e := range joined.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	if err != nil {
		return []string{err.Error()}
	}
	return nil
}

// canonical re-encodes JSON with sorted keys.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
