package kube

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Scope is whether a resource's objects are in a namespace.
type Scope string

const (
	Namespaced Scope = "Namespaced"
	Cluster    Scope = "Cluster"
)

// Resource declares a custom resource of one version, whose objects have a
// spec of type Spec and a status of type Status.
type Resource[Spec, Status any] struct {
	Group   string // such as cache.example.com
	Version string // such as v1alpha1
	Kind    string // such as Memcached
	Plural  string // such as memcacheds
	Scope   Scope

	// ShortNames are more names kubectl takes for the resource, such as
	// "mc" in kubectl get mc. Default none. Each is a DNS-1035 label (lower
	// case), given once, and neither Plural nor the singular (Kind in lower
	// case).
	ShortNames []string

	// Categories are groups of resources that kubectl get lists together
	// by the group's name, such as "all" in kubectl get all. Default none.
	// Each is a DNS-1035 label, given once.
	Categories []string

	// Columns are the columns kubectl get prints for the objects, after
	// NAME. Default none: kubectl prints NAME and AGE. With Columns, it
	// prints NAME and Columns alone, so AGE is a Column of its own:
	// {Name: "Age", JSONPath: ".metadata.creationTimestamp"}. Each names a
	// field of the schema, as Column says.
	Columns []Column

	// Scale, when not nil, adds the scale subresource, so kubectl scale and
	// a HorizontalPodAutoscaler can scale the objects. Default nil: none.
	Scale *Scale

	// Rules constrain the fields of Spec, of Status, and of the types they
	// hold.
	Rules []TypeRules
}

// GVR is the resource's group, version and plural name.
func (r Resource[Spec, Status]) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Plural}
}

// CRD returns the resource's CustomResourceDefinition: one version, served
// and stored, with the status subresource, and a schema reflected from Spec
// and Status and constrained by Rules. It returns one error that names
// every mistake it finds. MarshalCRD writes it as YAML.
//
// The CRD is named <Plural>.<Group>, and carries Scope. Its names' singular
// is Kind in lower case and its list kind is Kind+"List", as the API server
// would default them, so the CRD it holds is the one CRD returns. Its root
// schema has apiVersion and kind (strings), metadata (an object, which the
// API server validates itself), a required spec and an optional status.
// ShortNames and Categories are its names' shortNames and categories,
// Columns its version's additionalPrinterColumns, each with its Type, and
// Scale its scale subresource.
//
// Besides every mistake in the schema and its Rules, CRD reports a missing
// Group, Version, Kind or Plural, a Scope that is neither Namespaced nor
// Cluster, and any of them the API server would refuse: a Group that isn't
// a DNS subdomain with at least one dot, a Version or Plural that isn't a
// DNS-1035 label, and a Kind that isn't one but for its case. It reports
// the mistakes in ShortNames, Categories, Columns and Scale that their
// docs name, each path checked against the schema it reflected, which the
// API server doesn't do: there, a column whose path names no field stays
// empty, and a scale whose path names none fails.
//
// CRD doesn't compile the CEL rules given with Validation: the API server
// compiles them when the CRD is created or updated, and refuses it, naming
// the rule, when one doesn't compile or is too costly.
func (r Resource[Spec, Status]) CRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	return buildCRD(resourceMeta{
		Group:      r.Group,
		Version:    r.Version,
		Kind:       r.Kind,
		Plural:     r.Plural,
		Scope:      r.Scope,
		ShortNames: r.ShortNames,
		Categories: r.Categories,
		Columns:    r.Columns,
		Scale:      r.Scale,
	}, reflect.TypeFor[Spec](), reflect.TypeFor[Status](), r.Rules)
}

// Object is one object of a Resource. The controller's cache keeps each
// object as its metadata and its JSON, without managedFields, and decodes
// an Object from that JSON for each reconcile, so an Object handed to a
// Reconciler or to Finalize has none: read them from the API server when
// they matter.
type Object[Spec, Status any] struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   Spec   `json:"spec"`
	Status Status `json:"status,omitempty"`
}

// resourceMeta is a Resource without its type parameters.
type resourceMeta struct {
	Group, Version, Kind, Plural string
	Scope                        Scope

	ShortNames, Categories []string
	Columns                []Column
	Scale                  *Scale
}

func (m resourceMeta) errs(spec, status reflect.Type) []error {
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
	if m.Scope != Namespaced && m.Scope != Cluster {
		bad("Scope %q is neither %s nor %s", m.Scope, Namespaced, Cluster)
	}
	return errs
}

// buildCRD is CRD, on reflect.Types, so that generated types can be
// reflected too.
func buildCRD(m resourceMeta, spec, status reflect.Type, rules []TypeRules) (*apiextensionsv1.CustomResourceDefinition, error) {
	errs := m.errs(spec, status)

	r := newReflector(rules)
	specSchema, _ := r.field(site{path: "spec", owner: typeName(spec)}, spec, jsonOpts{}, nil)
	statusSchema, _ := r.field(site{path: "status", owner: typeName(status)}, status, jsonOpts{omitEmpty: true}, nil)
	errs = append(errs, r.finish()...)

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

// crd is the CRD of m, with root as its schema.
func (m resourceMeta) crd(root *apiextensionsv1.JSONSchemaProps, columns []apiextensionsv1.CustomResourceColumnDefinition, scale *apiextensionsv1.CustomResourceSubresourceScale) *apiextensionsv1.CustomResourceDefinition {
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
			Scope: apiextensionsv1.ResourceScope(m.Scope),
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
