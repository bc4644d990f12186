package kube

import (
	"reflect"
	"regexp"
	"slices"
	"unsafe"

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
// the rule, when one doesn't compile or is too costly. crdtest.Validate
// does both in a test, with the API server's own code.
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

// FieldOf is a field of type T, or the items of type T of a slice or map
// field, and its constraints. Each method returns a copy with one more
// constraint. A constraint that doesn't fit the field's type, such as
// Pattern on a number, is an error from CRD.
//
// Each constraint lands in the field's schema, or its items', where the
// API server reads it. Each one may be given once for a field, and once
// for its items, but for Validation, which may be given as often as the
// field has rules.
type FieldOf[T any] struct {
	ptr         unsafe.Pointer // the field's address
	typ         reflect.Type   // the field's type: T, or Each's slice or Values' map of T
	items       bool           // from Each or Values
	constraints []crd.Constraint
}

// Field names the field p points to.
func Field[T any](p *T) FieldOf[T] {
	return FieldOf[T]{ptr: unsafe.Pointer(p), typ: reflect.TypeFor[T]()}
}

// Each names the items of the slice field p points to, so its constraints
// apply to each item, as Field's apply to the field:
//
//	kube.Field(&spec.Targets).MaxItems(16),                    // the list
//	kube.Each(&spec.Targets).Pattern(namespace).MaxLength(63), // each item
//
// A constraint on the items is typed by the item's type, so a
// kube.Each(&spec.Ports).Maximum(65535) on a []int32 takes an int32. The
// items' schema is where the API server reads it: items in the field's
// schema. Default doesn't apply to items, which are never missing, and is
// an error from CRD.
func Each[S ~[]E, E any](p *S) FieldOf[E] {
	return FieldOf[E]{ptr: unsafe.Pointer(p), typ: reflect.TypeFor[S](), items: true}
}

// Values names the values of the map field p points to, so its
// constraints apply to each value, as Each's do to a slice's items:
//
//	kube.Field(&spec.Labels).MaxProperties(64),  // the map
//	kube.Values(&spec.Labels).MaxLength(63),     // each value
//
// The values' schema is additionalProperties in the field's schema.
func Values[M ~map[K]V, K ~string, V any](p *M) FieldOf[V] {
	return FieldOf[V]{ptr: unsafe.Pointer(p), typ: reflect.TypeFor[M](), items: true}
}

func (f FieldOf[T]) with(c crd.Constraint) FieldOf[T] {
	f.constraints = append(slices.Clip(f.constraints), c)
	return f
}

func (f FieldOf[T]) fieldRule() crd.Field {
	typ := f.typ
	if typ == nil { // a FieldOf made without Field, Each or Values
		typ = reflect.TypeFor[T]()
	}
	return crd.Field{Ptr: f.ptr, Type: typ, Items: f.items, Constraints: f.constraints}
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

// MinProperties is the least number of keys in the field, for a map.
func (f FieldOf[T]) MinProperties(n int) FieldOf[T] { // maps
	return f.with(crd.Constraint{Kind: crd.MinProperties, N: n})
}

// MaxProperties is the greatest number of keys in the field, for a map.
func (f FieldOf[T]) MaxProperties(n int) FieldOf[T] {
	return f.with(crd.Constraint{Kind: crd.MaxProperties, N: n})
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
