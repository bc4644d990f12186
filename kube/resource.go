package kube

import (
	"reflect"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/z5labs/humus/kube/internal/crd"
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

// Column is a column that kubectl get prints for a Resource's objects,
// after NAME: the API server fills it in, from each object's field that
// JSONPath names, in the Table it answers a request for
// application/json;as=Table;v=v1;g=meta.k8s.io with.
type Column struct {
	// Name is the column's heading, such as Ready. Required. kubectl
	// prints headings in upper case, so no two Columns may have names that
	// differ only in case, and none may be Name, the table's first column.
	Name string

	// JSONPath is the field the column shows, from the object's root:
	// field names, array indexes and filters, such as ".spec.size",
	// `.status.conditions[?(@.type=="Available")].status` or
	// ".metadata.creationTimestamp". Required. It must name a field of the
	// schema CRD reflects, or of the object's metadata; an index or a
	// filter steps into an array's items, and a filter's own field names
	// must be fields of the items too. A key with dots in it is written
	// with them escaped, as in .metadata.labels.app\.kubernetes\.io/name.
	// An object that lacks the field, or whose array no item of matches
	// the filter, shows an empty cell.
	JSONPath string

	// Type is how the API server reads the field: "integer", "number",
	// "string", "boolean", or "date", a timestamp, which kubectl prints as
	// an age such as 5m. Default "": the field's schema says: type:
	// integer is "integer", type: number "number", type: boolean
	// "boolean", a string of format date-time or date (such as a
	// metav1.Time) "date", and anything else "string". A Type given must
	// be able to show the field: "integer" and "number" a number,
	// "boolean" a boolean, "date" a string; "string" shows any field, an
	// object or an array as its JSON.
	Type string

	// Format is a hint for a client showing the value: "int32", "int64",
	// "float", "double", "byte", "date", "date-time" or "password".
	// Default "": none.
	Format string

	// Description is what the column shows, in the Table's column
	// definitions. Default "": the API server writes "Custom resource
	// definition column (in JSONPath format): " and JSONPath.
	Description string

	// Priority 0, the default, shows the column in kubectl get; above 0,
	// only in kubectl get -o wide.
	Priority int32
}

// Scale is a Resource's scale subresource: each object's /scale, an
// autoscaling/v1 Scale read from and written to the object's own fields,
// which kubectl scale, kubectl autoscale and a HorizontalPodAutoscaler
// use. A write to /scale sets the field SpecReplicasPath names, and is
// validated by the schema as any write of the object is.
//
// Each path is a field's names from the object's root, joined by dots,
// such as ".spec.replicas": the API server splits it at each dot, so it
// can't hold an index, a filter or an escaped dot.
type Scale struct {
	// SpecReplicasPath is the field of Spec that the Scale's
	// spec.replicas reads and writes, such as ".spec.replicas". Required:
	// a field under .spec, of an int32 (type: integer, format: int32:
	// int32, int16, int8, uint16 or uint8 in Go), as a Scale's replicas
	// are, and not nullable. The API server fails a GET of /scale for an
	// object without the field, so leave its json tag without omitempty,
	// or give it a Default.
	SpecReplicasPath string

	// StatusReplicasPath is the field of Status that the Scale's
	// status.replicas reads, such as ".status.replicas". Required: a field
	// under .status, of an int32, not nullable. An object without it
	// reads as 0.
	StatusReplicasPath string

	// LabelSelectorPath is the field that the Scale's status.selector
	// reads: the label selector of the pods the object runs, in its
	// string form (metav1.FormatLabelSelector writes it), such as
	// ".status.selector". A HorizontalPodAutoscaler needs it to find the
	// pods. Default "": none. Otherwise a string field, not nullable,
	// under .spec or .status, as the API server requires.
	LabelSelectorPath string
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
	return crd.Build(crd.Meta{
		Group:      r.Group,
		Version:    r.Version,
		Kind:       r.Kind,
		Plural:     r.Plural,
		Scope:      apiextensionsv1.ResourceScope(r.Scope),
		ShortNames: r.ShortNames,
		Categories: r.Categories,
		Columns:    crdColumns(r.Columns),
		Scale:      (*crd.Scale)(r.Scale),
	}, reflect.TypeFor[Spec](), reflect.TypeFor[Status](), crdRules(r.Rules))
}

// crdColumns returns cols as package crd's Columns; nil for none.
func crdColumns(cols []Column) []crd.Column {
	if len(cols) == 0 {
		return nil
	}
	out := make([]crd.Column, len(cols))
	for i, c := range cols {
		out[i] = crd.Column(c)
	}
	return out
}

// crdRules returns rules as package crd's TypeRules; nil for none.
func crdRules(rules []TypeRules) []crd.TypeRules {
	if len(rules) == 0 {
		return nil
	}
	out := make([]crd.TypeRules, len(rules))
	for i, r := range rules {
		out[i] = r.r
	}
	return out
}

// MarshalCRD returns crd as the YAML file that deploys it, such as the one
// a golden test keeps in step with the Go types (the package doc shows
// one). It is sigs.k8s.io/yaml's encoding of crd, keys sorted, without
// the status: yaml.Marshal writes a CRD's zero status as
// "status: {acceptedNames: {kind: "", plural: ""}, conditions: null,
// storedVersions: null}", which is the API server's to write, and which an
// apply of the file ignores.
//
// MarshalCRD takes the CRD rather than the Resource, so a CRD the end user
// changes before writing it, with a label or an annotation such as
// helm.sh/resource-policy: keep, is written the same way, and
// Resource.CRD stays the one way a CRD is built.
func MarshalCRD(c *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	return crd.Marshal(c)
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
