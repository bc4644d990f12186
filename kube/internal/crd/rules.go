package crd

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TypeRules are a kube.TypeRules: the constraints on one Go type's fields,
// and on the type itself, wherever it appears in the schema.
type TypeRules struct {
	// Type is the type the rules constrain; nil for an empty
	// kube.TypeRules, which is an error.
	Type reflect.Type

	// Base is the value handed to kube.Rules, whose fields' addresses
	// name the fields Fields constrain; nil for kube.Schema.
	Base unsafe.Pointer

	// Fields are the Fields handed to kube.Rules, in order, each a func
	// that returns it, nil for a nil kube.FieldRule. Build calls each
	// only when it resolves the Field, once it has found Type and Base
	// sound.
	Fields []func() Field

	// Schema is the type's whole schema, from kube.Schema; nil for one
	// reflected from the type.
	Schema *apiextensionsv1.JSONSchemaProps

	// Descriptions and Validations describe and constrain the type
	// itself, in the order given: a description more than once is an
	// error.
	Descriptions []string
	Validations  []apiextensionsv1.ValidationRule
}

// Field is a kube.FieldOf: a field of the type its TypeRules constrain,
// and its constraints, in the order given.
type Field struct {
	Ptr  unsafe.Pointer // the field's address in the TypeRules' Base
	Type reflect.Type   // the field's type, which Ptr points at

	// Items, from kube.Each or kube.Values, puts Constraints on the items
	// of the slice, or the values of the map, that the field holds,
	// rather than on the field.
	Items bool

	Constraints []Constraint
}

// resolvedRules are TypeRules, checked, with each Field resolved to the
// field of their type it names.
type resolvedRules struct {
	t            reflect.Type
	schema       *apiextensionsv1.JSONSchemaProps
	descriptions []string
	validations  []apiextensionsv1.ValidationRule
	fields       map[string]*resolvedField // by indexKey
}

// resolvedField is a Field resolved to a field of its TypeRules' type.
type resolvedField struct {
	owner       reflect.Type // the type of the Rules
	name        string       // the field's Go name
	items       bool         // the constraints are on its items, or its map's values
	constraints []Constraint
}

// subject names the field, and [*] after it for its items.
func (f *resolvedField) subject() string {
	s := typeName(f.owner) + "." + f.name
	if f.items {
		s += "[*]"
	}
	return s
}

// itemsKey is the key, in resolvedRules.fields, of the rules for the items
// of the field whose indexKey is key.
func itemsKey(key string) string { return key + "[*]" }

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
func resolveRules(rules []TypeRules) (map[reflect.Type]*resolvedRules, []error) {
	var errs []error
	out := make(map[reflect.Type]*resolvedRules, len(rules))
	first := make(map[reflect.Type]int, len(rules))
	for i, tr := range rules {
		if tr.Type == nil {
			errs = append(errs, fmt.Errorf("kube: Resource.Rules[%d] is an empty TypeRules: make it with kube.Rules or kube.Schema", i))
			continue
		}
		if j, ok := first[tr.Type]; ok {
			errs = append(errs, fmt.Errorf("kube: Rules for %s: two Rules for one type, Resource.Rules[%d] and [%d]: give one", typeName(tr.Type), j, i))
			continue
		}
		first[tr.Type] = i
		resolved, resolveErrs := resolveType(tr)
		out[tr.Type] = resolved
		errs = append(errs, resolveErrs...)
	}
	return out, errs
}

// resolveType checks tr, whose Type is set, and resolves each of its
// Fields, unless its Base is nil.
func resolveType(tr TypeRules) (*resolvedRules, []error) {
	var errs []error
	subject := "kube: Rules for " + typeName(tr.Type)
	resolved := &resolvedRules{
		t:            tr.Type,
		schema:       tr.Schema,
		descriptions: tr.Descriptions,
		validations:  tr.Validations,
		fields:       make(map[string]*resolvedField, len(tr.Fields)),
	}
	if len(tr.Descriptions) > 1 {
		errs = append(errs, fmt.Errorf("%s: Description is given %d times: give it once", subject, len(tr.Descriptions)))
	}
	for j, v := range tr.Validations {
		if strings.TrimSpace(v.Rule) == "" {
			errs = append(errs, fmt.Errorf("%s: Validation %d has no rule", subject, j))
		}
	}
	if tr.Schema == nil && tr.Base == nil {
		errs = append(errs, fmt.Errorf("%s: v is nil: it must point at a %s for its Fields to point into", subject, typeName(tr.Type)))
		return resolved, errs
	}
	for j, field := range tr.Fields {
		if field == nil {
			errs = append(errs, fmt.Errorf("%s: fields[%d] is nil", subject, j))
			continue
		}
		f := field()
		rf, key, err := resolveField(tr.Type, tr.Base, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: fields[%d], a Field of %s, %w", subject, j, typeName(f.Type), err))
			continue
		}
		if _, ok := resolved.fields[key]; ok {
			errs = append(errs, fmt.Errorf("%s: fields[%d] names %s again: give each field one Field", subject, j, rf.subject()))
			continue
		}
		resolved.fields[key] = rf
		errs = append(errs, checkRepeats(rf)...)
	}
	return resolved, errs
}

// checkRepeats reports a constraint given twice for one field.
func checkRepeats(rf *resolvedField) []error {
	var errs []error
	seen := map[Kind]bool{}
	for _, c := range rf.constraints {
		k := c.Kind
		if k == Validation {
			continue
		}
		if k == ListMap {
			k = ListSet // both set x-kubernetes-list-type
		}
		if seen[k] {
			name := c.Kind.String()
			if c.Kind == ListSet || c.Kind == ListMap {
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
func resolveField(t reflect.Type, base unsafe.Pointer, f Field) (*resolvedField, string, error) {
	if f.Ptr == nil {
		return nil, "", fmt.Errorf("is a rule that names no field: its pointer is nil")
	}
	if t.Kind() != reflect.Struct {
		return nil, "", fmt.Errorf("is a rule that names no field: %s isn't a struct, so it has none", typeName(t))
	}
	off := uintptr(f.Ptr) - uintptr(base)
	if uintptr(f.Ptr) < uintptr(base) || off >= t.Size() {
		return nil, "", fmt.Errorf("is a rule that names no field: it points outside the %s handed to Rules", typeName(t))
	}
	loc, ok := locate(t, off, f.Type)
	if !ok {
		return nil, "", fmt.Errorf("is a rule that names no field: it points inside the %s handed to Rules, but at no field of type %s", typeName(t), typeName(f.Type))
	}
	if loc.nested != nil {
		return nil, "", fmt.Errorf("names %s.%s, a field of %s, which a struct field holds: constrain it in the Rules for %[3]s",
			typeName(loc.nested), loc.name, typeName(loc.nested))
	}
	if why := notEncoded(t, loc.index); why != "" {
		return nil, "", fmt.Errorf("names %s.%s, which isn't in %s's JSON encoding: %s", typeName(t), loc.name, typeName(t), why)
	}
	key := indexKey(loc.index)
	if f.Items {
		if k := f.Type.Kind(); k != reflect.Slice && k != reflect.Map {
			return nil, "", fmt.Errorf("names the items of %s.%s, which is a %s, neither a slice nor a map", typeName(t), loc.name, typeName(f.Type))
		}
		key = itemsKey(key)
	}
	return &resolvedField{owner: t, name: loc.name, items: f.Items, constraints: f.Constraints}, key, nil
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
