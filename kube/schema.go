package kube

import (
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"

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

func (s site) errorf(format string, args ...any) error {
	return fmt.Errorf("kube: %s (%s): "+format, append([]any{s.owner, s.path}, args...)...)
}

// reflector reflects Go types into one CRD's structural schema.
type reflector struct {
	rules map[reflect.Type]*typeRules
	errs  []error

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

type jsonOpts struct {
	omitEmpty, omitZero, quoted bool
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

func isQuotable(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer && t.Name() == "" {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
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

func (r *reflector) reflect(s site, t reflect.Type) *apiextensionsv1.JSONSchemaProps {
	if tr, ok := r.rules[t]; ok && tr.schema != nil {
		return tr.schema.DeepCopy()
	}
	if t.Kind() == reflect.Pointer {
		p := r.schema(s, t.Elem())
		p.Nullable = true
		return p
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

func encodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(marshalerType) || pt.Implements(marshalerType) ||
		t.Implements(textMarshalerType) || pt.Implements(textMarshalerType)
}

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
		fp, required := r.field(fs, f.typ, f.opts, r.fieldRules(t, f.index))
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

// fieldRules returns the rules for the field at index of t: those of each
// struct it is promoted from, innermost first, then t's own.
func (r *reflector) fieldRules(t reflect.Type, index []int) []*resolvedField {
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
			if rf, ok := tr.fields[indexKey(index[j:])]; ok {
				out = append(out, rf)
			}
		}
	}
	return out
}

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

// jsonField is one field of a struct's JSON encoding.
type jsonField struct {
	name       string
	index      []int
	typ        reflect.Type // as declared
	tagged     bool
	opts       jsonOpts
	viaPointer bool // promoted through an embedded pointer, so left out when it is nil
}

type structEncoding struct {
	fields  []jsonField
	inlined []reflect.Type // the embedded structs whose fields are inlined
}

// jsonFields returns the fields encoding/json writes for struct t, by its
// rules: exported fields named by their json tags, json:"-" left out, the
// fields of embedded structs without a json name inlined, and of two fields
// with one name, the shallower, or the tagged one at the same depth; when
// neither wins, both are left out.
func jsonFields(t reflect.Type) structEncoding {
	type queued struct {
		typ        reflect.Type
		index      []int
		viaPointer bool
	}
	var enc structEncoding
	current := []queued{}
	next := []queued{{typ: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, q := range current {
			if visited[q.typ] {
				continue
			}
			visited[q.typ] = true
			if q.typ != t {
				enc.inlined = append(enc.inlined, q.typ)
			}
			for i := range q.typ.NumField() {
				sf := q.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, optList, _ := strings.Cut(tag, ",")
				if !isValidTag(name) {
					name = ""
				}
				opts := jsonOpts{}
				for o := range strings.SplitSeq(optList, ",") {
					switch o {
					case "omitempty":
						opts.omitEmpty = true
					case "omitzero":
						opts.omitZero = true
					case "string":
						opts.quoted = true
					}
				}
				index := append(slices.Clip(q.index), i)
				ft := sf.Type
				ptr := false
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
					ptr = true
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					f := jsonField{
						name:       cmp.Or(name, sf.Name),
						index:      index,
						typ:        sf.Type,
						tagged:     name != "",
						opts:       opts,
						viaPointer: q.viaPointer,
					}
					enc.fields = append(enc.fields, f)
					if count[q.typ] > 1 {
						// Two instances of the type at one depth: a
						// duplicate annihilates both, as in encoding/json.
						enc.fields = append(enc.fields, f)
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, queued{typ: ft, index: index, viaPointer: q.viaPointer || ptr})
				}
			}
		}
	}

	fields := enc.fields
	slices.SortFunc(fields, func(a, b jsonField) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return +1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for advance, i := 0, 0; i < len(fields); i += advance {
		name := fields[i].name
		for advance = 1; i+advance < len(fields) && fields[i+advance].name == name; advance++ {
		}
		group := fields[i : i+advance]
		if len(group) > 1 && len(group[0].index) == len(group[1].index) && group[0].tagged == group[1].tagged {
			continue // neither dominates: encoding/json writes neither
		}
		out = append(out, group[0])
	}
	slices.SortFunc(out, func(a, b jsonField) int { return slices.Compare(a.index, b.index) })
	enc.fields = out
	return enc
}

// isValidTag is encoding/json's test of a json tag's name.
func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// constrain applies rf's constraints to p, the schema of its field at s,
// and reports whether it gave the field a default. Each constraint that
// doesn't fit p is reported once for rf.
func (r *reflector) constrain(s site, p *apiextensionsv1.JSONSchemaProps, rf *resolvedField) bool {
	s.owner = rf.subject()
	report := !r.misfit[rf]
	bad := func(format string, args ...any) {
		if report {
			r.errs = append(r.errs, s.errorf(format, args...))
			r.misfit[rf] = true
		}
	}
	defaulted := false
	for _, c := range rf.constraints {
		switch c.kind {
		case cDescription:
			p.Description = c.s
		case cDefault:
			b, err := json.Marshal(c.v)
			if err != nil {
				bad("Default: encoding %v: %w", c.v, err)
				continue
			}
			p.Default = &apiextensionsv1.JSON{Raw: b}
			defaulted = true
		case cEnum:
			if len(c.vs) == 0 {
				bad("Enum is given no values")
				continue
			}
			p.Enum = nil
			for _, v := range c.vs {
				b, err := json.Marshal(v)
				if err != nil {
					bad("Enum: encoding %v: %w", v, err)
					continue
				}
				p.Enum = append(p.Enum, apiextensionsv1.JSON{Raw: b})
			}
		case cMinimum, cMaximum:
			if p.Type != "integer" && p.Type != "number" {
				bad("%s needs a number, and the field's schema is %s", c.kind, schemaKind(p))
				continue
			}
			v, ok := number(c.v)
			if !ok {
				bad("%s is nil", c.kind)
				continue
			}
			if c.kind == cMinimum {
				p.Minimum = &v
			} else {
				p.Maximum = &v
			}
		case cMinLength, cMaxLength, cPattern:
			if p.Type != "string" {
				bad("%s needs a string, and the field's schema is %s", c.kind, schemaKind(p))
				continue
			}
			switch {
			case c.kind == cPattern && c.re == nil:
				bad("Pattern is given a nil regexp")
			case c.kind == cPattern:
				p.Pattern = c.re.String()
			case c.n < 0:
				bad("%s is %d: it can't be negative", c.kind, c.n)
			case c.kind == cMinLength:
				p.MinLength = ptrTo(int64(c.n))
			default:
				p.MaxLength = ptrTo(int64(c.n))
			}
		case cMinItems, cMaxItems:
			if p.Type != "array" {
				bad("%s needs a slice or an array, and the field's schema is %s", c.kind, schemaKind(p))
				continue
			}
			switch {
			case c.n < 0:
				bad("%s is %d: it can't be negative", c.kind, c.n)
			case c.kind == cMinItems:
				p.MinItems = ptrTo(int64(c.n))
			default:
				p.MaxItems = ptrTo(int64(c.n))
			}
		case cListSet:
			if msg := listSetMisfit(p); msg != "" {
				bad("ListSet %s", msg)
				continue
			}
			p.XListType = ptrTo("set")
			p.XListMapKeys = nil
		case cListMap:
			if msg := listMapMisfit(p, c.keys); msg != "" {
				bad("ListMap%q %s", c.keys, msg)
				continue
			}
			p.XListType = ptrTo("map")
			p.XListMapKeys = slices.Clone(c.keys)
		case cValidation:
			if strings.TrimSpace(c.rule.Rule) == "" {
				bad("Validation has no rule")
				continue
			}
			p.XValidations = append(p.XValidations, c.rule)
		}
	}
	if p.Minimum != nil && p.Maximum != nil && *p.Minimum > *p.Maximum {
		bad("Minimum %v is more than Maximum %v", *p.Minimum, *p.Maximum)
	}
	if p.MinLength != nil && p.MaxLength != nil && *p.MinLength > *p.MaxLength {
		bad("MinLength %d is more than MaxLength %d", *p.MinLength, *p.MaxLength)
	}
	if p.MinItems != nil && p.MaxItems != nil && *p.MinItems > *p.MaxItems {
		bad("MinItems %d is more than MaxItems %d", *p.MinItems, *p.MaxItems)
	}
	return defaulted
}

// schemaKind names a schema's type in an error.
func schemaKind(p *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case p.XIntOrString:
		return "x-kubernetes-int-or-string"
	case p.Type != "":
		return "type: " + p.Type
	case p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields:
		return "x-kubernetes-preserve-unknown-fields"
	}
	return "without a type"
}

// number converts a numeric value, or a pointer to one, to a float64.
func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return 0, false
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

func listSetMisfit(p *apiextensionsv1.JSONSchemaProps) string {
	if p.Type != "array" || p.Items == nil || p.Items.Schema == nil {
		return "needs a slice or an array, and the field's schema is " + schemaKind(p)
	}
	items := p.Items.Schema
	switch {
	case items.Type == "object":
		return "needs scalar items, and the items are objects: use ListMap for a list of structs"
	case items.Nullable:
		return "needs items that aren't nullable, and the items are pointers"
	}
	return ""
}

func listMapMisfit(p *apiextensionsv1.JSONSchemaProps, keys []string) string {
	if p.Type != "array" || p.Items == nil || p.Items.Schema == nil {
		return "needs a slice or an array, and the field's schema is " + schemaKind(p)
	}
	items := p.Items.Schema
	switch {
	case len(keys) == 0:
		return "is given no keys"
	case items.Type != "object" || len(items.Properties) == 0:
		return "needs items that are structs, and the items' schema is " + schemaKind(items)
	case items.Nullable:
		return "needs items that aren't nullable, and the items are pointers"
	}
	var problems []string
	seen := map[string]bool{}
	for _, k := range keys {
		prop, ok := items.Properties[k]
		switch {
		case seen[k]:
			problems = append(problems, fmt.Sprintf("%q is given twice", k))
		case !ok:
			problems = append(problems, fmt.Sprintf("%q is no item field's JSON name", k))
		case prop.Type == "array" || prop.Type == "object":
			problems = append(problems, fmt.Sprintf("key %q is %s, not a scalar", k, schemaKind(&prop)))
		case prop.Nullable:
			problems = append(problems, fmt.Sprintf("key %q is nullable", k))
		case prop.Default == nil && !slices.Contains(items.Required, k):
			problems = append(problems, fmt.Sprintf("key %q is neither required nor defaulted: drop its omitempty, or give it a Default", k))
		}
		seen[k] = true
	}
	return strings.Join(problems, "; ")
}
