package kube

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	t      reflect.Type
	base   unsafe.Pointer // the v handed to Rules; nil for Schema
	fields []FieldRule

	schema *apiextensionsv1.JSONSchemaProps // Schema's, whole

	descriptions []string
	validations  []apiextensionsv1.ValidationRule
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
	return TypeRules{
		t:      reflect.TypeFor[T](),
		base:   unsafe.Pointer(v),
		fields: slices.Clone(fields),
	}
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
	r.descriptions = append(slices.Clip(r.descriptions), s)
	return r
}

// Validation: see Description.
func (r TypeRules) Validation(rule, message string) TypeRules {
	r.validations = append(slices.Clip(r.validations), apiextensionsv1.ValidationRule{Rule: rule, Message: message})
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
	return TypeRules{t: reflect.TypeFor[T](), schema: s.DeepCopy()}
}

// FieldRule is a FieldOf of any type.
type FieldRule interface {
	fieldRule() fieldRule
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
	constraints []constraint
}

// Field names the field p points to.
func Field[T any](p *T) FieldOf[T] {
	return FieldOf[T]{p: p}
}

func (f FieldOf[T]) with(c constraint) FieldOf[T] {
	f.constraints = append(slices.Clip(f.constraints), c)
	return f
}

func (f FieldOf[T]) fieldRule() fieldRule {
	return fieldRule{p: unsafe.Pointer(f.p), t: reflect.TypeFor[T](), constraints: f.constraints}
}

// Description sets the field's description, which kubectl explain shows.
func (f FieldOf[T]) Description(s string) FieldOf[T] {
	return f.with(constraint{kind: cDescription, s: s})
}

// Default is the value the API server sets the field to when an object
// leaves it out: v's JSON encoding. The field is optional.
func (f FieldOf[T]) Default(v T) FieldOf[T] { // and the field is optional
	return f.with(constraint{kind: cDefault, v: v})
}

// Enum limits the field to values, each compared by its JSON encoding.
func (f FieldOf[T]) Enum(values ...T) FieldOf[T] {
	vs := make([]any, len(values))
	for i, v := range values {
		vs[i] = v
	}
	return f.with(constraint{kind: cEnum, vs: vs})
}

// Minimum is the least value the field takes, for a number (an integer or
// floating-point field, or a pointer to one).
func (f FieldOf[T]) Minimum(v T) FieldOf[T] { // numbers
	return f.with(constraint{kind: cMinimum, v: v})
}

// Maximum is the greatest value the field takes, for a number.
func (f FieldOf[T]) Maximum(v T) FieldOf[T] {
	return f.with(constraint{kind: cMaximum, v: v})
}

// MinLength is the least length of the field, for a string, in characters.
func (f FieldOf[T]) MinLength(n int) FieldOf[T] { // strings
	return f.with(constraint{kind: cMinLength, n: n})
}

// MaxLength is the greatest length of the field, for a string.
func (f FieldOf[T]) MaxLength(n int) FieldOf[T] {
	return f.with(constraint{kind: cMaxLength, n: n})
}

// Pattern is a regular expression the field matches, for a string. The API
// server reports a mismatch as "<path> in body should match '<re>'".
func (f FieldOf[T]) Pattern(re *regexp.Regexp) FieldOf[T] {
	return f.with(constraint{kind: cPattern, re: re})
}

// MinItems is the least number of items in the field, for a slice or an
// array.
func (f FieldOf[T]) MinItems(n int) FieldOf[T] { // slices
	return f.with(constraint{kind: cMinItems, n: n})
}

// MaxItems is the greatest number of items in the field, for a slice or an
// array.
func (f FieldOf[T]) MaxItems(n int) FieldOf[T] {
	return f.with(constraint{kind: cMaxItems, n: n})
}

// ListSet makes the list a set (x-kubernetes-list-type: set): its items are
// unique, and server-side apply merges them one by one. The items must be
// scalars or lists, and not nullable.
func (f FieldOf[T]) ListSet() FieldOf[T] {
	return f.with(constraint{kind: cListSet})
}

// ListMap makes the list a map keyed by its items' keys
// (x-kubernetes-list-type: map, with x-kubernetes-list-map-keys): no two
// items have the same keys, and server-side apply merges the items by them,
// so two field managers can own two items. The items must be structs, and
// each key the JSON name of a scalar field of theirs that is required or
// has a Default, and isn't nullable.
func (f FieldOf[T]) ListMap(keys ...string) FieldOf[T] {
	return f.with(constraint{kind: cListMap, keys: slices.Clone(keys)})
}

// Validation adds a CEL rule the API server checks on the field, such as
// "self.startsWith('memcached:')", with message as its error ("" for the
// API server's own).
func (f FieldOf[T]) Validation(rule, message string) FieldOf[T] { // CEL
	return f.with(constraint{kind: cValidation, rule: apiextensionsv1.ValidationRule{Rule: rule, Message: message}})
}

type constraintKind int

const (
	cDescription constraintKind = iota
	cDefault
	cEnum
	cMinimum
	cMaximum
	cMinLength
	cMaxLength
	cPattern
	cMinItems
	cMaxItems
	cListSet
	cListMap
	cValidation
)

func (k constraintKind) String() string {
	return [...]string{"Description", "Default", "Enum", "Minimum", "Maximum", "MinLength", "MaxLength",
		"Pattern", "MinItems", "MaxItems", "ListSet", "ListMap", "Validation"}[k]
}

type constraint struct {
	kind constraintKind
	s    string
	v    any
	vs   []any
	n    int
	re   *regexp.Regexp
	keys []string
	rule apiextensionsv1.ValidationRule
}

// fieldRule is a FieldOf without its type parameter.
type fieldRule struct {
	p           unsafe.Pointer
	t           reflect.Type
	constraints []constraint
}

// typeRules is a TypeRules, checked and resolved.
type typeRules struct {
	t            reflect.Type
	schema       *apiextensionsv1.JSONSchemaProps
	descriptions []string
	validations  []apiextensionsv1.ValidationRule
	fields       map[string]*resolvedField // by indexKey
}

// resolvedField is a fieldRule resolved to a field of its type.
type resolvedField struct {
	owner       reflect.Type // the type of the Rules
	name        string       // the field's Go name
	constraints []constraint
}

func (f *resolvedField) subject() string { return typeName(f.owner) + "." + f.name }

func indexKey(index []int) string {
	var b strings.Builder
	for i, x := range index {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}

// resolveRules checks every TypeRules, and resolves each Field to the field
// of its type it names.
func resolveRules(rules []TypeRules) (map[reflect.Type]*typeRules, []error) {
	var errs []error
	out := make(map[reflect.Type]*typeRules, len(rules))
	first := make(map[reflect.Type]int, len(rules))
	for i, tr := range rules {
		if tr.t == nil {
			errs = append(errs, fmt.Errorf("kube: Resource.Rules[%d] is an empty TypeRules: make it with kube.Rules or kube.Schema", i))
			continue
		}
		subject := "kube: Rules for " + typeName(tr.t)
		if j, ok := first[tr.t]; ok {
			errs = append(errs, fmt.Errorf("%s: two Rules for one type, Resource.Rules[%d] and [%d]: give one", subject, j, i))
			continue
		}
		first[tr.t] = i
		resolved := &typeRules{
			t:            tr.t,
			schema:       tr.schema,
			descriptions: tr.descriptions,
			validations:  tr.validations,
			fields:       make(map[string]*resolvedField, len(tr.fields)),
		}
		out[tr.t] = resolved
		if len(tr.descriptions) > 1 {
			errs = append(errs, fmt.Errorf("%s: Description is given %d times: give it once", subject, len(tr.descriptions)))
		}
		for j, v := range tr.validations {
			if strings.TrimSpace(v.Rule) == "" {
				errs = append(errs, fmt.Errorf("%s: Validation %d has no rule", subject, j))
			}
		}
		if tr.schema == nil && tr.base == nil {
			errs = append(errs, fmt.Errorf("%s: v is nil: it must point at a %s for its Fields to point into", subject, typeName(tr.t)))
			continue
		}
		for j, fr := range tr.fields {
			if fr == nil {
				errs = append(errs, fmt.Errorf("%s: fields[%d] is nil", subject, j))
				continue
			}
			f := fr.fieldRule()
			rf, key, err := resolveField(tr.t, tr.base, f)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: fields[%d], a Field of %s, %w", subject, j, typeName(f.t), err))
				continue
			}
			if _, ok := resolved.fields[key]; ok {
				errs = append(errs, fmt.Errorf("%s: fields[%d] names %s again: give each field one Field", subject, j, rf.subject()))
				continue
			}
			resolved.fields[key] = rf
			errs = append(errs, checkRepeats(rf)...)
		}
	}
	return out, errs
}

// checkRepeats reports a constraint given twice for one field.
func checkRepeats(rf *resolvedField) []error {
	var errs []error
	seen := map[constraintKind]bool{}
	for _, c := range rf.constraints {
		k := c.kind
		if k == cValidation {
			continue
		}
		if k == cListMap {
			k = cListSet // both set x-kubernetes-list-type
		}
		if seen[k] {
			name := c.kind.String()
			if c.kind == cListSet || c.kind == cListMap {
				name = "ListSet or ListMap"
			}
			errs = append(errs, fmt.Errorf("kube: Rules for %s: %s: %s is given twice: give it once", typeName(rf.owner), rf.subject(), name))
		}
		seen[k] = true
	}
	return errs
}

// resolveField finds the field of t that f points to in the t at base, by
// its offset and type, and returns its index path.
func resolveField(t reflect.Type, base unsafe.Pointer, f fieldRule) (*resolvedField, string, error) {
	if f.p == nil {
		return nil, "", fmt.Errorf("is a rule that names no field: its pointer is nil")
	}
	if t.Kind() != reflect.Struct {
		return nil, "", fmt.Errorf("is a rule that names no field: %s isn't a struct, so it has none", typeName(t))
	}
	off := uintptr(f.p) - uintptr(base)
	if uintptr(f.p) < uintptr(base) || off >= t.Size() {
		return nil, "", fmt.Errorf("is a rule that names no field: it points outside the %s handed to Rules", typeName(t))
	}
	loc, ok := locate(t, off, f.t)
	if !ok {
		return nil, "", fmt.Errorf("is a rule that names no field: it points inside the %s handed to Rules, but at no field of type %s", typeName(t), typeName(f.t))
	}
	if loc.nested != nil {
		return nil, "", fmt.Errorf("names %s.%s, a field of %s, which a struct field holds: constrain it in the Rules for %[3]s",
			typeName(loc.nested), loc.name, typeName(loc.nested))
	}
	if why := notEncoded(t, loc.index); why != "" {
		return nil, "", fmt.Errorf("names %s.%s, which isn't in %s's JSON encoding: %s", typeName(t), loc.name, typeName(t), why)
	}
	return &resolvedField{owner: t, name: loc.name, constraints: f.constraints}, indexKey(loc.index), nil
}

type location struct {
	index  []int
	name   string
	nested reflect.Type // the struct the field is one of, when a struct field or array holds it
}

// locate finds the field at offset off of struct t whose type is ft,
// through embedded structs, and through structs and arrays held by name
// (then nested is set).
func locate(t reflect.Type, off uintptr, ft reflect.Type) (location, bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		size := sf.Type.Size()
		if off < sf.Offset || off > sf.Offset+size || (off == sf.Offset+size && size != 0) {
			continue
		}
		rel := off - sf.Offset
		if rel == 0 && sf.Type == ft {
			return location{index: []int{i}, name: sf.Name}, true
		}
		switch sf.Type.Kind() {
		case reflect.Struct:
			loc, ok := locate(sf.Type, rel, ft)
			if !ok {
				continue
			}
			if !sf.Anonymous && loc.nested == nil {
				loc.nested = sf.Type
			}
			loc.index = append([]int{i}, loc.index...)
			return loc, true
		case reflect.Array:
			elem := sf.Type.Elem()
			if elem.Kind() != reflect.Struct || elem.Size() == 0 {
				continue
			}
			loc, ok := locate(elem, rel%elem.Size(), ft)
			if !ok {
				continue
			}
			if loc.nested == nil {
				loc.nested = elem
			}
			return loc, true
		}
	}
	return location{}, false
}

// notEncoded says why the field at index of t isn't among encoding/json's
// fields of t, or "" when it is.
func notEncoded(t reflect.Type, index []int) string {
	for _, f := range jsonFields(t).fields {
		if slices.Equal(f.index, index) {
			return ""
		}
	}
	cur := t
	for i, x := range index {
		sf := cur.Field(x)
		tag := sf.Tag.Get("json")
		switch {
		case tag == "-":
			return fmt.Sprintf("%s's json tag is \"-\"", sf.Name)
		case !sf.IsExported() && !sf.Anonymous:
			return fmt.Sprintf("%s is unexported", sf.Name)
		case i < len(index)-1:
			if name, _, _ := strings.Cut(tag, ","); name != "" {
				return fmt.Sprintf("it is in the embedded %s, which has a json name, so it is a field of %s, which its own Rules constrain", sf.Name, typeName(sf.Type))
			}
		}
		cur = sf.Type
	}
	return "another field of the same JSON name hides it"
}
