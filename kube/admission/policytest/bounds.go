package policytest

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// bound is a size the schema doesn't bound: the subschema at steps, and
// which of maxItems, maxProperties and maxLength it lacks.
type bound struct {
	steps []string // property names; "[*]" for items or values
	kind  string
}

func (b bound) where() string {
	var s strings.Builder
	for _, st := range b.steps {
		if st == "[*]" {
			s.WriteString(st)
			continue
		}
		if s.Len() > 0 {
			s.WriteByte('.')
		}
		s.WriteString(st)
	}
	return s.String()
}

func (b bound) method() string {
	return map[string]string{"maxItems": "MaxItems", "maxProperties": "MaxProperties", "maxLength": "MaxLength"}[b.kind]
}

// unbounded returns the sizes p, at steps, and its subschemas leave
// unbounded; metadata's, which the API server's OpenAPI leaves so, aren't.
func unbounded(p *apiextensions.JSONSchemaProps, steps []string) []bound {
	var out []bound
	switch {
	case p.Type == "array" && p.MaxItems == nil:
		out = append(out, bound{steps: steps, kind: "maxItems"})
	case p.Type == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil && p.MaxProperties == nil:
		out = append(out, bound{steps: steps, kind: "maxProperties"})
	case p.Type == "string" && p.MaxLength == nil && len(p.Enum) == 0 && p.Format == "":
		out = append(out, bound{steps: steps, kind: "maxLength"})
	}
	child := func(name string) []string { return append(slices.Clip(steps), name) }
	if p.Items != nil && p.Items.Schema != nil {
		out = append(out, unbounded(p.Items.Schema, child("[*]"))...)
	}
	if p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
		out = append(out, unbounded(p.AdditionalProperties.Schema, child("[*]"))...)
	}
	names := make([]string, 0, len(p.Properties))
	for n := range p.Properties {
		if len(steps) == 0 && (n == "metadata" || n == "apiVersion" || n == "kind") {
			continue
		}
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		sub := p.Properties[n]
		out = append(out, unbounded(&sub, child(n))...)
	}
	return out
}

// with returns a copy of the schema with each of bs set to n.
func with(s *apiextensions.JSONSchemaProps, bs []bound, n int64) *apiextensions.JSONSchemaProps {
	c := s.DeepCopy()
	for _, b := range bs {
		set(c, b.steps, b.kind, n)
	}
	return c
}

func set(p *apiextensions.JSONSchemaProps, steps []string, kind string, n int64) {
	if len(steps) == 0 {
		switch kind {
		case "maxItems":
			p.MaxItems = &n
		case "maxProperties":
			p.MaxProperties = &n
		case "maxLength":
			p.MaxLength = &n
		}
		return
	}
	if steps[0] == "[*]" {
		switch {
		case p.Items != nil && p.Items.Schema != nil:
			set(p.Items.Schema, steps[1:], kind, n)
		case p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil:
			set(p.AdditionalProperties.Schema, steps[1:], kind, n)
		}
		return
	}
	sub := p.Properties[steps[0]]
	set(&sub, steps[1:], kind, n)
	p.Properties[steps[0]] = sub
}

// maxBound is the greatest bound fits tries.
const maxBound = 1 << 20

// bounds says which bounds bring e under the limit: each unbounded size
// whose bound alone does, with the greatest such bound; and, where none
// does alone, the greatest bound that does given to them all.
func (t *objectType) bounds(e expression) string {
	all := unbounded(t.schema, nil)
	if len(all) == 0 {
		return "; no list, map or string of the schema is unbounded: simplify the expression"
	}
	// Of those, the ones the estimate sized.
	if _, read, err := t.estimate(t.decl, e); err == nil {
		all = slices.DeleteFunc(all, func(b bound) bool { return !read[strings.Join(b.steps, "/")] })
	}
	costWith := func(bs []bound, n int64) (uint64, bool) {
		decl, err := declType(with(t.schema, bs, n))
		if err != nil {
			return 0, false
		}
		cost, err := t.cost(decl, e)
		return cost, err == nil
	}
	fits := func(bs []bound, n int64) bool {
		cost, ok := costWith(bs, n)
		return ok && cost <= celconfig.PerCallLimit
	}
	greatest := func(bs []bound) (int64, bool) {
		if !fits(bs, 1) {
			return 0, false
		}
		lo, hi := int64(1), int64(maxBound)
		if fits(bs, hi) {
			return hi, true
		}
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if fits(bs, mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		return lo, true
	}
	// The sizes the expression's cost depends on: those whose bound
	// lowers it.
	base, _ := costWith(nil, 0)
	var reached []bound
	for _, b := range all {
		if cost, ok := costWith([]bound{b}, 1); ok && cost < base {
			reached = append(reached, b)
		}
	}
	if len(reached) == 0 {
		return "; no bound on a list, map or string of the schema lowers its cost: simplify the expression"
	}
	return t.advice(reached, greatest)
}

// advice says which of reached, the sizes whose bounds lower e's cost,
// bring it under the limit, with the greatest bound that does.
func (t *objectType) advice(reached []bound, greatest func([]bound) (int64, bool)) string {
	method := func(b bound) string {
		if t.kind {
			return "" // no kube method bounds a Kubernetes kind's schema
		}
		return " (" + b.method() + ")"
	}
	var alone, names []string
	for _, b := range reached {
		names = append(names, fmt.Sprintf("%s on %s%s", b.kind, b.where(), method(b)))
		if n, ok := greatest([]bound{b}); ok {
			alone = append(alone, fmt.Sprintf("%s %d or less on %s%s", b.kind, n, b.where(), method(b)))
		}
	}
	var out []string
	if len(alone) > 0 {
		out = append(out, "bounds that bring it under the limit alone: "+strings.Join(alone, ", or "))
	}
	if len(reached) > 1 || len(alone) == 0 {
		if n, ok := greatest(reached); ok {
			out = append(out, fmt.Sprintf("together, each %d or less: %s", n, strings.Join(names, ", ")))
		}
	}
	if len(out) == 0 {
		return "; no bounds on what it reaches bring it under the limit (" + strings.Join(names, ", ") + "): simplify the expression"
	}
	if t.kind {
		// Kubernetes' schema is the API server's: no bound can be added.
		return "; the schema of a Kubernetes kind bounds none of what it reads, so it fits the limit only on objects within these sizes: " +
			strings.Join(out, "; ") + "; to bring it under, read each list fewer times (no iteration of a list inside an iteration of it), or check it in a webhook"
	}
	return "; " + strings.Join(out, "; ")
}
