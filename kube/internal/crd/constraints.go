package crd

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Kind is what a Constraint sets in its field's schema. Each is named as
// the kube.FieldOf method that makes it.
type Kind int

// The Kinds, one for each kube.FieldOf method.
const (
	Description   Kind = iota // Text: description
	Default                   // Value: default, its JSON; the field isn't required
	Enum                      // Values: enum, each its JSON
	Minimum                   // Value, a number or a pointer to one: minimum
	Maximum                   // Value, a number or a pointer to one: maximum
	MinLength                 // N: minLength
	MaxLength                 // N: maxLength
	Pattern                   // Regexp: pattern
	MinItems                  // N: minItems
	MaxItems                  // N: maxItems
	ListSet                   // x-kubernetes-list-type: set
	ListMap                   // Keys: x-kubernetes-list-type: map, and its keys
	Validation                // Rule: one more x-kubernetes-validations
	MinProperties             // N: minProperties
	MaxProperties             // N: maxProperties
)

// String is k's name, as its kube.FieldOf method's, such as "Minimum".
func (k Kind) String() string {
	return [...]string{"Description", "Default", "Enum", "Minimum", "Maximum", "MinLength", "MaxLength",
		"Pattern", "MinItems", "MaxItems", "ListSet", "ListMap", "Validation", "MinProperties", "MaxProperties"}[k]
}

// Constraint is one constraint on a field, as a kube.FieldOf method gives
// it: its Kind, and the value of those below that its Kind takes.
type Constraint struct {
	Kind   Kind
	Text   string
	Value  any
	Values []any
	N      int
	Regexp *regexp.Regexp
	Keys   []string
	Rule   apiextensionsv1.ValidationRule
}

// constrain applies rf's constraints to p, the schema of its field at s,
// and reports whether it gave the field a default. A constraint that
// doesn't fit p is left out of it, and reported once for rf.
func (r *reflector) constrain(s site, p *apiextensionsv1.JSONSchemaProps, rf *resolvedField) bool {
	s.owner = rf.subject()
	var errs []error
	defaulted := false
	for _, c := range rf.constraints {
		msg := misfitOf(p, c)
		if rf.items && c.Kind == Default {
			msg = "sets nothing on the items of a slice or the values of a map: an item is never missing"
		}
		if msg != "" {
			errs = append(errs, s.errorf("%s %s", constraintName(c), msg))
			continue
		}
		encodeErrs := setConstraint(p, c)
		for _, err := range encodeErrs {
			errs = append(errs, s.errorf("%s: %w", c.Kind, err))
		}
		if c.Kind == Default && len(encodeErrs) == 0 {
			defaulted = true
		}
	}
	for _, msg := range rangeMisfits(p) {
		errs = append(errs, s.errorf("%s", msg))
	}
	if len(errs) > 0 && !r.misfit[rf] {
		r.errs = append(r.errs, errs...)
		r.misfit[rf] = true
	}
	return defaulted
}

// misfitOf says why c doesn't fit p, "" when it fits, by the misfit of c's
// family. A Description or a Default fits every schema.
func misfitOf(p *apiextensionsv1.JSONSchemaProps, c Constraint) string {
	switch c.Kind {
	case Enum:
		return enumMisfit(c.Values)
	case Minimum, Maximum:
		return numberMisfit(p, c)
	case MinLength, MaxLength, Pattern:
		return stringMisfit(p, c)
	case MinItems, MaxItems:
		return itemsMisfit(p, c)
	case MinProperties, MaxProperties:
		return propertiesMisfit(p, c)
	case ListSet:
		return listSetMisfit(p)
	case ListMap:
		return listMapMisfit(p, c.Keys)
	case Validation:
		return validationMisfit(c.Rule)
	}
	return ""
}

// constraintName names c in an error, as the method that made it is named,
// with a ListMap's keys.
func constraintName(c Constraint) string {
	if c.Kind == ListMap {
		return fmt.Sprintf("ListMap%q", c.Keys)
	}
	return c.Kind.String()
}

// setConstraint sets c, which fits p, in p. It returns the errors encoding
// the values of a Default or an Enum as JSON; a value that doesn't encode
// is left out of p.
func setConstraint(p *apiextensionsv1.JSONSchemaProps, c Constraint) []error {
	switch c.Kind {
	case Description:
		p.Description = c.Text
	case Default:
		v, err := encodeJSON(c.Value)
		if err != nil {
			return []error{err}
		}
		p.Default = v
	case Enum:
		return setEnum(p, c.Values)
	case Minimum:
		v, _ := number(c.Value)
		p.Minimum = &v
	case Maximum:
		v, _ := number(c.Value)
		p.Maximum = &v
	case MinLength:
		p.MinLength = ptrTo(int64(c.N))
	case MaxLength:
		p.MaxLength = ptrTo(int64(c.N))
	case Pattern:
		p.Pattern = c.Regexp.String()
	case MinItems:
		p.MinItems = ptrTo(int64(c.N))
	case MaxItems:
		p.MaxItems = ptrTo(int64(c.N))
	case MinProperties:
		p.MinProperties = ptrTo(int64(c.N))
	case MaxProperties:
		p.MaxProperties = ptrTo(int64(c.N))
	case ListSet:
		p.XListType, p.XListMapKeys = ptrTo("set"), nil
	case ListMap:
		p.XListType, p.XListMapKeys = ptrTo("map"), slices.Clone(c.Keys)
	case Validation:
		p.XValidations = append(p.XValidations, c.Rule)
	}
	return nil
}

// setEnum makes p's enum the JSON encodings of values, in order, and
// returns the errors of those that don't encode, which it leaves out.
func setEnum(p *apiextensionsv1.JSONSchemaProps, values []any) []error {
	var errs []error
	p.Enum = nil
	for _, v := range values {
		e, err := encodeJSON(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.Enum = append(p.Enum, *e)
	}
	return errs
}

// encodeJSON returns v's JSON encoding, as a schema holds a default or an
// enum's value.
func encodeJSON(v any) (*apiextensionsv1.JSON, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %v: %w", v, err)
	}
	return &apiextensionsv1.JSON{Raw: b}, nil
}

// enumMisfit says why an Enum of values fits no field: it has no values.
func enumMisfit(values []any) string {
	if len(values) == 0 {
		return "is given no values"
	}
	return ""
}

// numberMisfit says why c, a Minimum or a Maximum, doesn't fit p: p isn't
// a number's, or c's value is a nil pointer.
func numberMisfit(p *apiextensionsv1.JSONSchemaProps, c Constraint) string {
	if p.Type != "integer" && p.Type != "number" {
		return "needs a number, and the field's schema is " + schemaKind(p)
	}
	if _, ok := number(c.Value); !ok {
		return "is nil"
	}
	return ""
}

// stringMisfit says why c, a MinLength, a MaxLength or a Pattern, doesn't
// fit p: p isn't a string's, a Pattern's regexp is nil, or a length is
// negative.
func stringMisfit(p *apiextensionsv1.JSONSchemaProps, c Constraint) string {
	switch {
	case p.Type != "string":
		return "needs a string, and the field's schema is " + schemaKind(p)
	case c.Kind == Pattern && c.Regexp == nil:
		return "is given a nil regexp"
	case c.Kind != Pattern && c.N < 0:
		return fmt.Sprintf("is %d: it can't be negative", c.N)
	}
	return ""
}

// itemsMisfit says why c, a MinItems or a MaxItems, doesn't fit p: p isn't
// an array's, or the number is negative.
func itemsMisfit(p *apiextensionsv1.JSONSchemaProps, c Constraint) string {
	switch {
	case p.Type != "array":
		return "needs a slice or an array, and the field's schema is " + schemaKind(p)
	case c.N < 0:
		return fmt.Sprintf("is %d: it can't be negative", c.N)
	}
	return ""
}

// propertiesMisfit says why c, a MinProperties or a MaxProperties,
// doesn't fit p: p isn't a map's, or the number is negative.
func propertiesMisfit(p *apiextensionsv1.JSONSchemaProps, c Constraint) string {
	switch {
	case p.Type != "object" || p.AdditionalProperties == nil || p.AdditionalProperties.Schema == nil:
		return "needs a map, and the field's schema is " + mapKind(p)
	case c.N < 0:
		return fmt.Sprintf("is %d: it can't be negative", c.N)
	}
	return ""
}

// mapKind names a schema's type in an error about a map: a struct's
// schema, type: object too, is named as a struct's.
func mapKind(p *apiextensionsv1.JSONSchemaProps) string {
	if p.Type == "object" && (p.AdditionalProperties == nil || p.AdditionalProperties.Schema == nil) {
		return "a struct's, type: object with properties"
	}
	return schemaKind(p)
}

// listSetMisfit says why a ListSet doesn't fit p: p isn't an array's, or
// its items are objects or nullable.
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

// listMapMisfit says why a ListMap of keys doesn't fit p: p isn't an
// array's, its items aren't structs or are nullable, or a key isn't the
// JSON name of an item's scalar field that is required or defaulted, and
// not nullable. It names every key that can't be one.
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

// validationMisfit says why a Validation of rule fits no field: its rule
// is blank.
func validationMisfit(rule apiextensionsv1.ValidationRule) string {
	if strings.TrimSpace(rule.Rule) == "" {
		return "has no rule"
	}
	return ""
}

// rangeMisfits says where p's least bound is more than its greatest: its
// Minimum than its Maximum, MinLength than MaxLength, MinItems than
// MaxItems, MinProperties than MaxProperties. The bounds may come from
// more than one Rules.
func rangeMisfits(p *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	if p.Minimum != nil && p.Maximum != nil && *p.Minimum > *p.Maximum {
		out = append(out, fmt.Sprintf("Minimum %v is more than Maximum %v", *p.Minimum, *p.Maximum))
	}
	if p.MinLength != nil && p.MaxLength != nil && *p.MinLength > *p.MaxLength {
		out = append(out, fmt.Sprintf("MinLength %d is more than MaxLength %d", *p.MinLength, *p.MaxLength))
	}
	if p.MinItems != nil && p.MaxItems != nil && *p.MinItems > *p.MaxItems {
		out = append(out, fmt.Sprintf("MinItems %d is more than MaxItems %d", *p.MinItems, *p.MaxItems))
	}
	if p.MinProperties != nil && p.MaxProperties != nil && *p.MinProperties > *p.MaxProperties {
		out = append(out, fmt.Sprintf("MinProperties %d is more than MaxProperties %d", *p.MinProperties, *p.MaxProperties))
	}
	return out
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
