package crd

import (
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The schemas of the types that encode themselves, which apimachinery
// defines and every CRD uses.
var wellKnown = map[reflect.Type]func() *apiextensionsv1.JSONSchemaProps{
	reflect.TypeFor[metav1.Time](): func() *apiextensionsv1.JSONSchemaProps {
		return &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}
	},
	reflect.TypeFor[metav1.MicroTime](): func() *apiextensionsv1.JSONSchemaProps {
		return &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}
	},
	reflect.TypeFor[metav1.Duration]():    func() *apiextensionsv1.JSONSchemaProps { return &apiextensionsv1.JSONSchemaProps{Type: "string"} },
	reflect.TypeFor[resource.Quantity]():  intOrString,
	reflect.TypeFor[intstr.IntOrString](): intOrString,
	reflect.TypeFor[runtime.RawExtension](): func() *apiextensionsv1.JSONSchemaProps {
		return &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}
	},
	reflect.TypeFor[metav1.ObjectMeta](): templateMetadata,
	reflect.TypeFor[metav1.Condition]():  condition,
}

// condition is the schema of a metav1.Condition, with the constraints its
// kubebuilder markers in k8s.io/apimachinery give it, as Kubernetes' own
// types and controller-gen's CRDs carry them: the API server then refuses
// a condition whose status isn't True, False or Unknown, whose type or
// reason isn't of the form metav1.Condition documents, or that lacks a
// field the type requires.
func condition() *apiextensionsv1.JSONSchemaProps {
	enum := func(vs ...string) []apiextensionsv1.JSON {
		out := make([]apiextensionsv1.JSON, len(vs))
		for i, v := range vs {
			out[i] = apiextensionsv1.JSON{Raw: []byte(strconv.Quote(v))}
		}
		return out
	}
	return &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"type": {
				Type:      "string",
				MaxLength: ptrTo[int64](316),
				Pattern:   `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`,
			},
			"status":             {Type: "string", Enum: enum("True", "False", "Unknown")},
			"observedGeneration": {Type: "integer", Format: "int64", Minimum: ptrTo[float64](0)},
			"lastTransitionTime": {Type: "string", Format: "date-time"},
			"reason": {
				Type:      "string",
				MinLength: ptrTo[int64](1),
				MaxLength: ptrTo[int64](1024),
				Pattern:   `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`,
			},
			"message": {Type: "string", MaxLength: ptrTo[int64](32768)},
		},
		Required: []string{"type", "status", "lastTransitionTime", "reason", "message"},
	}
}

// templateMetadata is the schema of an ObjectMeta below the root, such as
// a template's. The API server validates only the root's metadata (and an
// x-kubernetes-embedded-resource's) itself; below them it prunes, or
// under fieldValidation=Strict refuses, every field the schema doesn't
// name, so an object with nothing but type: object loses its template's
// labels. These are the fields a template sets, as controller-gen's
// generateEmbeddedObjectMeta gives them: the rest of ObjectMeta is the
// API server's to set on the object made from the template.
func templateMetadata() *apiextensionsv1.JSONSchemaProps {
	strings := &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}
	return &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"name":        {Type: "string"},
			"namespace":   {Type: "string"},
			"labels":      {Type: "object", AdditionalProperties: strings},
			"annotations": {Type: "object", AdditionalProperties: strings.DeepCopy()},
			"finalizers":  {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
		},
	}
}

// intOrString is the schema of a value encoded as an integer or a string.
func intOrString() *apiextensionsv1.JSONSchemaProps {
	return &apiextensionsv1.JSONSchemaProps{
		XIntOrString: true,
		AnyOf:        []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}},
	}
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// ptrTo returns a pointer to a copy of v.
func ptrTo[T any](v T) *T { return &v }

// typeName names t in errors: as Go writes it, and "<nil>" for no type.
func typeName(t reflect.Type) string {
	if t == nil {
		return "<nil>"
	}
	return t.String()
}

// site is where in the schema a type is being reflected: its path from the
// root, and the Go field (or, at the root, the type) it is the schema of.
type site struct {
	path  string // such as spec.size, or spec.items[*].name
	owner string // such as app.MemcachedSpec.Size
}

// errorf returns an error that names s's owner and path, then says what
// format and args say.
func (s site) errorf(format string, args ...any) error {
	return fmt.Errorf("kube: %s (%s): "+format, append([]any{s.owner, s.path}, args...)...)
}

// reflector reflects Go types into one CRD's structural schema.
type reflector struct {
	rules map[reflect.Type]*resolvedRules
	errs  []error
	kind  bool // a kind's whole object, not a CRD's spec or status: KindSchema

	done     map[reflect.Type]*apiextensionsv1.JSONSchemaProps // each type's schema, once reflected
	building map[reflect.Type]bool                             // the types being reflected, to find recursion
	used     map[reflect.Type]bool                             // the types whose rules were applied
	misfit   map[*resolvedField]bool                           // the rules whose misfits were reported
}

func newReflector(rules []TypeRules) *reflector {
	resolved, errs := resolveRules(rules)
	return &reflector{
		rules:    resolved,
		errs:     errs,
		done:     map[reflect.Type]*apiextensionsv1.JSONSchemaProps{},
		building: map[reflect.Type]bool{},
		used:     map[reflect.Type]bool{},
		misfit:   map[*resolvedField]bool{},
	}
}

// finish reports the Rules of types that appear nowhere, and returns every
// mistake found.
func (r *reflector) finish() []error {
	var unused []reflect.Type
	for t := range r.rules {
		if !r.used[t] {
			unused = append(unused, t)
		}
	}
	slices.SortFunc(unused, func(a, b reflect.Type) int { return cmp.Compare(a.String(), b.String()) })
	for _, t := range unused {
		r.errs = append(r.errs, fmt.Errorf("kube: Rules for %s: %[1]s appears nowhere in Spec or Status, so its Rules constrain nothing", typeName(t)))
	}
	return r.errs
}

// field returns the schema of a field of type t, encoded with opts, with the
// rules in apply (outermost last), and whether the field is required.
func (r *reflector) field(s site, t reflect.Type, opts jsonOpts, apply []*resolvedField) (*apiextensionsv1.JSONSchemaProps, bool) {
	var p *apiextensionsv1.JSONSchemaProps
	if opts.quoted && isQuotable(t) {
		// encoding/json's ",string" writes the value as a JSON string.
		p = &apiextensionsv1.JSONSchemaProps{Type: "string", Nullable: t.Kind() == reflect.Pointer}
	} else {
		p = r.schema(s, t)
	}
	if t.Kind() == reflect.Pointer && (opts.omitEmpty || opts.omitZero) {
		p.Nullable = false
	}
	defaulted := false
	for _, rf := range apply {
		if r.constrain(s, p, rf) {
			defaulted = true
		}
	}
	return p, !opts.omitEmpty && !opts.omitZero && !defaulted
}

// schema returns a copy of t's schema, reflected at s the first time t is
// seen, with the Rules for t applied.
func (r *reflector) schema(s site, t reflect.Type) *apiextensionsv1.JSONSchemaProps {
	if t == nil {
		r.errs = append(r.errs, s.errorf("an interface has no schema"))
		return &apiextensionsv1.JSONSchemaProps{}
	}
	if p, ok := r.done[t]; ok {
		return p.DeepCopy()
	}
	if r.building[t] {
		r.errs = append(r.errs, s.errorf("%s contains itself, which a schema without $ref can't express", typeName(t)))
		p := &apiextensionsv1.JSONSchemaProps{}
		r.done[t] = p // reported once
		return p.DeepCopy()
	}
	r.building[t] = true
	p := r.reflect(s, t)
	delete(r.building, t)
	if tr, ok := r.rules[t]; ok {
		r.used[t] = true
		if len(tr.descriptions) > 0 {
			p.Description = tr.descriptions[len(tr.descriptions)-1]
		}
		p.XValidations = append(p.XValidations, tr.validations...)
	}
	if _, ok := r.done[t]; !ok {
		r.done[t] = p
	}
	return r.done[t].DeepCopy()
}

// reflect returns t's schema, as its kube.Schema gives it, or reflected
// from t as encoding/json writes it. A type with no JSON encoding, or one
// its fields don't describe, is reported, and given an empty schema.
func (r *reflector) reflect(s site, t reflect.Type) *apiextensionsv1.JSONSchemaProps {
	if tr, ok := r.rules[t]; ok && tr.schema != nil {
		return tr.schema.DeepCopy()
	}
	if t.Kind() == reflect.Pointer {
		p := r.schema(s, t.Elem())
		p.Nullable = true
		return p
	}
	if r.kind {
		switch t {
		case reflect.TypeFor[metav1.ObjectMeta]():
			return r.structSchema(s, t) // every field, as Kubernetes' own schemas have them
		case reflect.TypeFor[metav1.FieldsV1]():
			return &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}
		}
	}
	if f, ok := wellKnown[t]; ok {
		return f()
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		r.errs = append(r.errs, s.errorf("%s implements json.Marshaler, so its fields aren't its encoding: give its schema with kube.Schema[%s]", typeName(t), typeName(t)))
		return &apiextensionsv1.JSONSchemaProps{}
	}
	if t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType) {
		// encoding/json writes what MarshalText returns, as a string.
		return &apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return &apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return &apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32"}
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64"}
	case reflect.Float32, reflect.Float64:
		return &apiextensionsv1.JSONSchemaProps{Type: "number"}
	case reflect.String:
		return &apiextensionsv1.JSONSchemaProps{Type: "string"}
	case reflect.Slice:
		if e := t.Elem(); e.Kind() == reflect.Uint8 && !encodesItself(e) {
			// encoding/json writes a []byte as base64.
			return &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "byte"}
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{
			Schema: r.schema(site{path: s.path + "[*]", owner: s.owner}, t.Elem()),
		}}
	case reflect.Array:
		return &apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{
			Schema: r.schema(site{path: s.path + "[*]", owner: s.owner}, t.Elem()),
		}}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			r.errs = append(r.errs, s.errorf("%s has keys of type %s: a map's keys must be strings", typeName(t), typeName(t.Key())))
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{
			Allows: true,
			Schema: r.schema(site{path: s.path + "[*]", owner: s.owner}, t.Elem()),
		}}
	case reflect.Struct:
		return r.structSchema(s, t)
	case reflect.Interface:
		r.errs = append(r.errs, s.errorf("%s is an interface, which has no schema: use a concrete type, or runtime.RawExtension for any object", typeName(t)))
	case reflect.Chan:
		r.errs = append(r.errs, s.errorf("%s is a channel, which has no schema", typeName(t)))
	case reflect.Func:
		r.errs = append(r.errs, s.errorf("%s is a function, which has no schema", typeName(t)))
	default: // complex numbers and unsafe.Pointer, which encoding/json refuses
		r.errs = append(r.errs, s.errorf("%s has no JSON encoding, so no schema", typeName(t)))
	}
	return &apiextensionsv1.JSONSchemaProps{}
}

// encodesItself reports whether encoding/json writes a t by its own
// MarshalJSON or MarshalText.
func encodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(marshalerType) || pt.Implements(marshalerType) ||
		t.Implements(textMarshalerType) || pt.Implements(textMarshalerType)
}

// structSchema returns the schema of struct t: a property for each field
// encoding/json writes, with its rules applied, required unless it is
// omitempty, omitzero, defaulted or promoted through an embedded pointer;
// and the Validations of the embedded structs whose fields it inlines.
func (r *reflector) structSchema(s site, t reflect.Type) *apiextensionsv1.JSONSchemaProps {
	p := &apiextensionsv1.JSONSchemaProps{Type: "object"}
	enc := jsonFields(t)
	for _, e := range enc.inlined {
		tr, ok := r.rules[e]
		if !ok {
			continue
		}
		r.used[e] = true
		if tr.schema != nil {
			r.errs = append(r.errs, s.errorf("%s has a kube.Schema, but %s embeds it and encoding/json inlines its fields, so the Schema can't apply: give %s a kube.Schema, or embed %s with a json name", typeName(e), typeName(t), typeName(t), typeName(e)))
		}
		p.XValidations = append(p.XValidations, tr.validations...)
	}
	for _, f := range enc.fields {
		fs := site{path: s.path + "." + f.name, owner: typeName(t) + "." + lastField(t, f.index).Name}
		fp, required := r.field(fs, f.typ, f.opts, r.fieldRules(t, f.index, false))
		r.constrainItems(fs, fp, r.fieldRules(t, f.index, true))
		if p.Properties == nil {
			p.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		p.Properties[f.name] = *fp
		if required && !f.viaPointer {
			p.Required = append(p.Required, f.name)
		}
	}
	return p
}

// constrainItems applies the rules in apply, from kube.Each and
// kube.Values, to the items of p, the schema of the field at s: its
// array's items, or its map's values. Where p has neither, as for a
// []byte or a type with a kube.Schema, each rule is reported once.
func (r *reflector) constrainItems(s site, p *apiextensionsv1.JSONSchemaProps, apply []*resolvedField) {
	if len(apply) == 0 {
		return
	}
	var items *apiextensionsv1.JSONSchemaProps
	switch {
	case p.Type == "array" && p.Items != nil:
		items = p.Items.Schema
	case p.Type == "object" && p.AdditionalProperties != nil:
		items = p.AdditionalProperties.Schema
	}
	for _, rf := range apply {
		if items == nil {
			if !r.misfit[rf] {
				s.owner = rf.subject()
				r.errs = append(r.errs, s.errorf("has no items: it needs a slice or a map, and the field's schema is %s", schemaKind(p)))
				r.misfit[rf] = true
			}
			continue
		}
		r.constrain(site{path: s.path + "[*]", owner: s.owner}, items, rf)
	}
}

// fieldRules returns the rules for the field at index of t, or with items
// for its items: those of each struct it is promoted from, innermost
// first, then t's own.
func (r *reflector) fieldRules(t reflect.Type, index []int, items bool) []*resolvedField {
	var out []*resolvedField
	cur := t
	types := []reflect.Type{t}
	for _, x := range index[:len(index)-1] {
		cur = cur.Field(x).Type
		if cur.Kind() == reflect.Pointer {
			cur = cur.Elem()
		}
		types = append(types, cur)
	}
	for j := len(types) - 1; j >= 0; j-- {
		if tr, ok := r.rules[types[j]]; ok {
			key := indexKey(index[j:])
			if items {
				key = itemsKey(key)
			}
			if rf, ok := tr.fields[key]; ok {
				out = append(out, rf)
			}
		}
	}
	return out
}

// lastField returns the field at index of t, through embedded pointers.
func lastField(t reflect.Type, index []int) reflect.StructField {
	var sf reflect.StructField
	for _, x := range index {
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		sf = t.Field(x)
		t = sf.Type
	}
	return sf
}
