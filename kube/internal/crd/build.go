package crd

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Meta is a kube.Resource without its type parameters and its Rules: what
// names the resource, and the CRD's details.
type Meta struct {
	Group, Version, Kind, Plural string
	Scope                        apiextensionsv1.ResourceScope

	ShortNames, Categories []string
	Columns                []Column
	Scale                  *Scale
}

// Build returns the CRD of the resource m names, whose objects' spec is a
// spec and status a status, with its schema reflected from them and
// constrained by rules: the CRD kube.Resource.CRD returns, and its doc
// says. When it finds a mistake, it returns no CRD, and one error that
// joins every mistake it finds, in the order m's fields, the rules, the
// schema, the names, the columns and the scale have them.
func Build(m Meta, spec, status reflect.Type, rules []TypeRules) (*apiextensionsv1.CustomResourceDefinition, error) {
	errs := m.errs(spec, status)

	r := newReflector(rules)
	specSchema, _ := r.field(site{path: "spec", owner: typeName(spec)}, spec, jsonOpts{}, nil)
	statusSchema, _ := r.field(site{path: "status", owner: typeName(status)}, status, jsonOpts{omitEmpty: true}, nil)
	errs = append(errs, r.finish()...)
	// A status apply that sets none of the fields its manager owned (every
	// one omitted, empty) releases them all, which leaves the API server
	// a null status: allowed, or the API server refuses the apply, and the
	// status can never be emptied.
	statusSchema.Nullable = true

	root := &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"metadata":   {Type: "object"},
			"spec":       *specSchema,
			"status":     *statusSchema,
		},
		Required: []string{"spec"},
	}
	errs = append(errs, nameErrs(m)...)
	var (
		columns []apiextensionsv1.CustomResourceColumnDefinition
		scale   *apiextensionsv1.CustomResourceSubresourceScale
	)
	if len(m.Columns) > 0 || m.Scale != nil {
		obj := objectRoot(root)
		var colErrs, scaleErrs []error
		columns, colErrs = printerColumns(m.Columns, obj)
		scale, scaleErrs = scaleSubresource(m.Scale, obj)
		errs = append(append(errs, colErrs...), scaleErrs...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m.crd(root, columns, scale), nil
}

// KindSchema returns the structural schema of t, the Go type of a kind's
// objects, such as one of Kubernetes' own in k8s.io/api, as encoding/json
// writes it and as a CRD's is reflected: a metav1.Time a string of format
// date-time, a resource.Quantity and an intstr.IntOrString
// x-kubernetes-int-or-string, a map an object of additionalProperties, the
// fields of an embedded struct inlined, no field required; an ObjectMeta with every field, its managedFields' fieldsV1
// any object. No list, map or string is bounded, as in Kubernetes' own
// schemas. It returns every mistake found, such as a field of a type
// that encodes itself and isn't one of those.
func KindSchema(t reflect.Type) (*apiextensionsv1.JSONSchemaProps, error) {
	r := newReflector(nil)
	r.kind = true
	p := r.schema(site{path: "", owner: typeName(t)}, t)
	unrequire(p)
	return p, errors.Join(r.finish()...)
}

// unrequire drops every required list of p and its subschemas, as the
// API server's own schemas of its kinds, resolved for CEL, have none: an
// object's smallest encoding, by which the API server's estimator sizes a
// list without maxItems, is then {}.
func unrequire(p *apiextensionsv1.JSONSchemaProps) {
	p.Required = nil
	if p.Items != nil && p.Items.Schema != nil {
		unrequire(p.Items.Schema)
	}
	if p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
		unrequire(p.AdditionalProperties.Schema)
	}
	for n, sub := range p.Properties {
		unrequire(&sub)
		p.Properties[n] = sub
	}
}

// errs returns every mistake in the names and the scope m gives: each
// missing, or one the API server would refuse.
func (m Meta) errs(spec, status reflect.Type) []error {
	subject := fmt.Sprintf("kube: Resource[%s, %s]", typeName(spec), typeName(status))
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{subject}, args...)...))
	}
	if m.Group == "" {
		bad("missing Group")
	} else if e := validation.IsDNS1123Subdomain(m.Group); len(e) > 0 {
		bad("Group %q: %s", m.Group, strings.Join(e, "; "))
	} else if !strings.Contains(m.Group, ".") {
		bad("Group %q: should be a domain with at least one dot", m.Group)
	}
	if m.Version == "" {
		bad("missing Version")
	} else if e := validation.IsDNS1035Label(m.Version); len(e) > 0 {
		bad("Version %q: %s", m.Version, strings.Join(e, "; "))
	}
	if m.Kind == "" {
		bad("missing Kind")
	} else if e := validation.IsDNS1035Label(strings.ToLower(m.Kind)); len(e) > 0 {
		bad("Kind %q: may have mixed case, but should otherwise match: %s", m.Kind, strings.Join(e, "; "))
	}
	if m.Plural == "" {
		bad("missing Plural")
	} else if e := validation.IsDNS1035Label(m.Plural); len(e) > 0 {
		bad("Plural %q: %s", m.Plural, strings.Join(e, "; "))
	}
	if m.Scope != apiextensionsv1.NamespaceScoped && m.Scope != apiextensionsv1.ClusterScoped {
		bad("Scope %q is neither %s nor %s", m.Scope, apiextensionsv1.NamespaceScoped, apiextensionsv1.ClusterScoped)
	}
	return errs
}

// crd is the CRD of m, with root as its schema.
func (m Meta) crd(root *apiextensionsv1.JSONSchemaProps, columns []apiextensionsv1.CustomResourceColumnDefinition, scale *apiextensionsv1.CustomResourceSubresourceScale) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{
			APIVersion: apiextensionsv1.SchemeGroupVersion.String(),
			Kind:       "CustomResourceDefinition",
		},
		ObjectMeta: metav1.ObjectMeta{Name: m.Plural + "." + m.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: m.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural:     m.Plural,
				Singular:   strings.ToLower(m.Kind),
				ShortNames: slices.Clone(m.ShortNames),
				Kind:       m.Kind,
				ListKind:   m.Kind + "List",
				Categories: slices.Clone(m.Categories),
			},
			Scope: m.Scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:    m.Version,
				Served:  true,
				Storage: true,
				Schema:  &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: root},
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale:  scale,
				},
				AdditionalPrinterColumns: columns,
			}},
		},
	}
}
