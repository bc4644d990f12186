package crdtest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks crd as the API server does when it is created, with the
// API server's own code: the names, the structural schema, the defaults,
// and each CEL rule compiled, its cost estimated against the budget. It
// returns nil when the API server would take crd, and otherwise one error
// joining each of the API server's, each naming the field of the object
// it is about, such as spec.targets, rather than the schema's path.
//
// A rule the API server would refuse for its cost is said with the bounds
// that bring it under the budget: for each list, map or string the rule
// reaches whose size is unbounded, the greatest maxItems, maxProperties
// or maxLength (kube's MaxItems, MaxProperties and MaxLength, on
// kube.Field or, for the items of a slice or the values of a map,
// kube.Each and kube.Values) under which it fits alone, and, where there
// are more than one, or none fits alone, the greatest that fits given to
// them all.
func Validate(crd *apiextensionsv1.CustomResourceDefinition) error {
	if crd == nil {
		return errors.New("crdtest: the CRD is nil")
	}
	fieldErrs, err := validate(crd)
	if err != nil {
		return err
	}
	var errs []error
	for _, fe := range fieldErrs {
		errs = append(errs, describe(crd, fe))
	}
	return errors.Join(errs...)
}

// validate returns the API server's errors for a create of crd: crd
// defaulted and converted as the API server decodes it, its status as the
// API server's create sets it, and validated.
func validate(crd *apiextensionsv1.CustomResourceDefinition) (field.ErrorList, error) {
	c := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(c)
	var in apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(c, &in, nil); err != nil {
		return nil, fmt.Errorf("crdtest: %s: converting it as the API server does: %w", crd.Name, err)
	}
	in.Status = apiextensions.CustomResourceDefinitionStatus{}
	in.Generation = 1
	for _, v := range in.Spec.Versions {
		if v.Storage {
			in.Status.StoredVersions = []string{v.Name}
			break
		}
	}
	return validation.ValidateCustomResourceDefinition(context.Background(), &in), nil
}

// schemaPath matches the path of an error in a version's schema: the
// version's index, and the steps from the schema's root. The API server
// validates a schema that every version shares as spec.validation's.
var schemaPath = regexp.MustCompile(`^spec\.(?:versions\[(\d+)\]\.schema|validation)\.openAPIV3Schema((?:\.properties\[[^\]]*\]|\.items|\.additionalProperties)*)(?:\.(.*))?$`)

// schemaStep matches one step of schemaPath's steps.
var schemaStep = regexp.MustCompile(`\.properties\[([^\]]*)\]|\.items|\.additionalProperties`)

// describe returns fe as an error naming the CRD and the object's field
// fe is about, with the bounds that bring a rule under the cost budget.
func describe(crd *apiextensionsv1.CustomResourceDefinition, fe *field.Error) error {
	m := schemaPath.FindStringSubmatch(fe.Field)
	if m == nil {
		return fmt.Errorf("crdtest: %s: %s", crd.Name, fe.Error())
	}
	version := 0 // spec.validation's schema is every version's
	if m[1] != "" {
		version, _ = strconv.Atoi(m[1])
	}
	steps := parseSteps(m[2])
	where := objectPath(steps)
	what := fe.ErrorBody()
	if m[3] != "" {
		what = m[3] + ruleText(crd, version, steps, m[3]) + ": " + what
	}
	msg := fmt.Sprintf("crdtest: %s: %s: %s", crd.Name, where, what)
	if fe.Type == field.ErrorTypeForbidden && strings.Contains(fe.Detail, "exceeds budget") && ruleRef.MatchString(m[3]) {
		msg += bounds(crd, version, steps, fe.Field)
	}
	return errors.New(msg)
}

// ruleRef matches the rest of an error's path that is about a rule.
var ruleRef = regexp.MustCompile(`^x-kubernetes-validations\[(\d+)\]\.rule$`)

// ruleText is " " and the rule, quoted, when rest, the path of an error
// past the schema at steps, names one of its rules; "" otherwise.
func ruleText(crd *apiextensionsv1.CustomResourceDefinition, version int, steps []step, rest string) string {
	m := ruleRef.FindStringSubmatch(rest)
	if m == nil || version >= len(crd.Spec.Versions) || crd.Spec.Versions[version].Schema == nil {
		return ""
	}
	i, _ := strconv.Atoi(m[1])
	var text string
	at(crd.Spec.Versions[version].Schema.OpenAPIV3Schema.DeepCopy(), steps, func(p *apiextensionsv1.JSONSchemaProps) {
		if i < len(p.XValidations) {
			text = " " + strconv.Quote(p.XValidations[i].Rule)
		}
	})
	return text
}

// step is one step from a schema to one of its subschemas: a property by
// name, an array's items, or a map's values (additionalProperties).
type step struct {
	property      string
	items, values bool
}

func parseSteps(s string) []step {
	var out []step
	for _, m := range schemaStep.FindAllStringSubmatch(s, -1) {
		switch m[0] {
		case ".items":
			out = append(out, step{items: true})
		case ".additionalProperties":
			out = append(out, step{values: true})
		default:
			out = append(out, step{property: m[1]})
		}
	}
	return out
}

// objectPath names the field of the object steps lead to, as kube's
// errors do: spec.targets, spec.targets[*] for its items; "the root" for
// none.
func objectPath(steps []step) string {
	var b strings.Builder
	for _, s := range steps {
		if s.items || s.values {
			b.WriteString("[*]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.property)
	}
	if b.Len() == 0 {
		return "the root"
	}
	return b.String()
}

// at calls f with the schema steps lead to from p, and returns false when
// p has no such subschema.
func at(p *apiextensionsv1.JSONSchemaProps, steps []step, f func(*apiextensionsv1.JSONSchemaProps)) bool {
	if len(steps) == 0 {
		f(p)
		return true
	}
	s := steps[0]
	switch {
	case s.values:
		if p.AdditionalProperties == nil || p.AdditionalProperties.Schema == nil {
			return false
		}
		return at(p.AdditionalProperties.Schema, steps[1:], f)
	case s.items:
		if p.Items == nil || p.Items.Schema == nil {
			return false
		}
		return at(p.Items.Schema, steps[1:], f)
	}
	sub, ok := p.Properties[s.property]
	if !ok {
		return false
	}
	found := at(&sub, steps[1:], f)
	p.Properties[s.property] = sub
	return found
}

// bound is a size the API server can't estimate, and a bound to put on it:
// the schema at steps, and which of maxItems, maxProperties and maxLength.
type bound struct {
	steps []step
	kind  string // maxItems, maxProperties or maxLength
}

func (b bound) method() string {
	return map[string]string{"maxItems": "MaxItems", "maxProperties": "MaxProperties", "maxLength": "MaxLength"}[b.kind]
}

// set gives p the bound n.
func (b bound) set(p *apiextensionsv1.JSONSchemaProps, n int64) {
	switch b.kind {
	case "maxItems":
		p.MaxItems = &n
	case "maxProperties":
		p.MaxProperties = &n
	case "maxLength":
		p.MaxLength = &n
	}
}

// unbounded returns the bounds p lacks: its own, at steps, and those of
// every subschema of p.
func unbounded(p *apiextensionsv1.JSONSchemaProps, steps []step) []bound {
	var out []bound
	if b, ok := own(p, steps); ok {
		out = append(out, b)
	}
	switch {
	case p.Items != nil && p.Items.Schema != nil:
		out = append(out, unbounded(p.Items.Schema, append(steps[:len(steps):len(steps)], step{items: true}))...)
	case p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil:
		out = append(out, unbounded(p.AdditionalProperties.Schema, append(steps[:len(steps):len(steps)], step{values: true}))...)
	}
	for _, name := range sortedKeys(p.Properties) {
		sub := p.Properties[name]
		out = append(out, unbounded(&sub, append(steps[:len(steps):len(steps)], step{property: name}))...)
	}
	return out
}

// own returns the bound p, at steps, lacks itself, if any.
func own(p *apiextensionsv1.JSONSchemaProps, steps []step) (bound, bool) {
	switch {
	case p.Type == "array" && p.MaxItems == nil:
		return bound{steps: steps, kind: "maxItems"}, true
	case p.Type == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil && p.MaxProperties == nil:
		return bound{steps: steps, kind: "maxProperties"}, true
	case p.Type == "string" && p.MaxLength == nil && len(p.Enum) == 0:
		return bound{steps: steps, kind: "maxLength"}, true
	}
	return bound{}, false
}

// bounds says which bounds bring the rule whose cost error is at path, in
// the schema at steps of crd's version, under the budget: each unbounded
// list, map or string the rule reaches (the schema's own and those below
// it, and the lists and maps it is an item of, whose sizes multiply its
// cost), with the greatest bound under which it fits alone; or, when none
// fits alone, the greatest bound that fits given to them all.
func bounds(crd *apiextensionsv1.CustomResourceDefinition, version int, steps []step, path string) string {
	if version >= len(crd.Spec.Versions) || crd.Spec.Versions[version].Schema == nil {
		return ""
	}
	root := crd.Spec.Versions[version].Schema.OpenAPIV3Schema.DeepCopy() // at writes what it walks back
	var candidates []bound
	for i := range steps {
		at(root, steps[:i], func(p *apiextensionsv1.JSONSchemaProps) {
			if b, ok := own(p, steps[:i]); ok && b.kind != "maxLength" {
				candidates = append(candidates, b)
			}
		})
	}
	at(root, steps, func(p *apiextensionsv1.JSONSchemaProps) {
		candidates = append(candidates, unbounded(p, steps)...)
	})
	if len(candidates) == 0 {
		return "; no list, map or string it reaches is unbounded: simplify the rule"
	}
	var alone, all []string
	for _, b := range candidates {
		if n, ok := greatest(crd, version, path, []bound{b}); ok {
			alone = append(alone, fmt.Sprintf("%s %d or less on %s (%s)", b.kind, n, objectPath(b.steps), b.method()))
		}
		all = append(all, fmt.Sprintf("%s on %s (%s)", b.kind, objectPath(b.steps), b.method()))
	}
	var out []string
	if len(alone) > 0 {
		out = append(out, "bounds that bring it under the budget alone: "+strings.Join(alone, ", or "))
	}
	if len(candidates) > 1 || len(alone) == 0 {
		if n, ok := greatest(crd, version, path, candidates); ok {
			out = append(out, fmt.Sprintf("together, each %d or less: %s", n, strings.Join(all, ", ")))
		}
	}
	if len(out) == 0 {
		return "; no bounds on what it reaches bring it under the budget (" + strings.Join(all, ", ") + "): simplify the rule"
	}
	return "; " + strings.Join(out, "; ")
}

// maxBound is the greatest bound greatest tries.
const maxBound = 1 << 20

// greatest returns the greatest n up to maxBound such that crd, with
// each of bs given n, has no cost error at path; false when even 1 leaves
// one. A smaller bound never costs more, so it searches by halves.
func greatest(crd *apiextensionsv1.CustomResourceDefinition, version int, path string, bs []bound) (int64, bool) {
	fits := func(n int64) bool {
		c := crd.DeepCopy()
		root := c.Spec.Versions[version].Schema.OpenAPIV3Schema
		for _, b := range bs {
			at(root, b.steps, func(p *apiextensionsv1.JSONSchemaProps) { b.set(p, n) })
		}
		errs, err := validate(c)
		if err != nil {
			return false
		}
		for _, fe := range errs {
			if fe.Field == path && fe.Type == field.ErrorTypeForbidden && strings.Contains(fe.Detail, "exceeds budget") {
				return false
			}
		}
		return true
	}
	if !fits(1) {
		return 0, false
	}
	lo, hi := int64(1), int64(maxBound) // fits(lo); hi is the greatest tried
	if fits(hi) {
		return hi, true
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true
}

func sortedKeys(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
