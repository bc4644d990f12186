package crdtest_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/crdtest"
)

// MirrorSpec names the namespaces a Mirror copies to: the user's list of
// the issue, whose rule over the items the API server refused for cost.
type MirrorSpec struct {
	Targets []string `json:"targets"`
}

const allDNSLabels = "self.targets.all(t, t.matches('^[a-z0-9-]+$'))"

// mirror is a Resource whose spec has rules, and whose spec's fields
// have the constraints fields gives them.
func mirror(rules func(spec *MirrorSpec) kube.TypeRules) kube.Resource[MirrorSpec, struct{}] {
	var spec MirrorSpec
	return kube.Resource[MirrorSpec, struct{}]{
		Group: "mirror.example.com", Version: "v1", Kind: "Mirror", Plural: "mirrors", Scope: kube.Namespaced,
		Rules: []kube.TypeRules{rules(&spec)},
	}
}

// TooCostly is the rule over unbounded items, which the API server
// refuses for its cost.
var TooCostly = mirror(func(spec *MirrorSpec) kube.TypeRules {
	return kube.Rules(spec).Validation(allDNSLabels, "")
})

// Bounded is the same rule, with the items bounded as the error says.
var Bounded = mirror(func(spec *MirrorSpec) kube.TypeRules {
	return kube.Rules(spec,
		kube.Field(&spec.Targets).MaxItems(16),
		kube.Each(&spec.Targets).MaxLength(63),
	).Validation(allDNSLabels, "")
})

func TestValidateRefusesARuleOverBudgetNamingTheBounds(t *testing.T) {
	crd, err := TooCostly.CRD()
	if err != nil {
		t.Fatal(err)
	}
	err = crdtest.Validate(crd)
	if err == nil {
		t.Fatal("Validate took a rule whose cost the API server refuses")
	}
	got := strings.Split(err.Error(), "\n")
	want := []string{
		`crdtest: mirrors.mirror.example.com: spec: x-kubernetes-validations[0].rule "` + allDNSLabels + `": Forbidden: ` +
			`estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared); ` +
			`bounds that bring it under the budget alone: maxItems 10 or less on spec.targets (MaxItems), or maxLength 2 or less on spec.targets[*] (MaxLength); ` +
			`together, each 2884 or less: maxItems on spec.targets (MaxItems), maxLength on spec.targets[*] (MaxLength)`,
		`crdtest: mirrors.mirror.example.com: spec: x-kubernetes-validations[0].rule "` + allDNSLabels + `": Forbidden: ` +
			`contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema`,
		`crdtest: mirrors.mirror.example.com: the root: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x ` +
			`(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Validate:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestValidateTakesTheRuleBounded(t *testing.T) {
	for name, r := range map[string]kube.Resource[MirrorSpec, struct{}]{
		"bounded as the error says": Bounded,
		"maxItems alone": mirror(func(spec *MirrorSpec) kube.TypeRules {
			return kube.Rules(spec, kube.Field(&spec.Targets).MaxItems(10)).Validation(allDNSLabels, "")
		}),
		"together": mirror(func(spec *MirrorSpec) kube.TypeRules {
			return kube.Rules(spec, kube.Field(&spec.Targets).MaxItems(2884), kube.Each(&spec.Targets).MaxLength(2884)).Validation(allDNSLabels, "")
		}),
		"a pattern on each item, which costs no CEL": mirror(func(spec *MirrorSpec) kube.TypeRules {
			return kube.Rules(spec, kube.Each(&spec.Targets).Pattern(regexp.MustCompile(`^[a-z0-9-]+$`)))
		}),
	} {
		t.Run(name, func(t *testing.T) {
			crd, err := r.CRD()
			if err != nil {
				t.Fatal(err)
			}
			if err := crdtest.Validate(crd); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidateNamesTheBoundsJustOver(t *testing.T) {
	r := mirror(func(spec *MirrorSpec) kube.TypeRules {
		return kube.Rules(spec, kube.Field(&spec.Targets).MaxItems(11)).Validation(allDNSLabels, "")
	})
	crd, err := r.CRD()
	if err != nil {
		t.Fatal(err)
	}
	err = crdtest.Validate(crd)
	if err == nil || !strings.Contains(err.Error(), "maxLength ") || !strings.Contains(err.Error(), "or less on spec.targets[*] (MaxLength)") {
		t.Errorf("Validate of maxItems 11: %v; want a maxLength bound on the items", err)
	}
}

func TestValidateSaysTheAPIServersOtherMistakes(t *testing.T) {
	r := mirror(func(spec *MirrorSpec) kube.TypeRules {
		return kube.Rules(spec).Validation("self.targets.size() > ", "")
	})
	crd, err := r.CRD()
	if err != nil {
		t.Fatal(err)
	}
	err = crdtest.Validate(crd)
	if err == nil || !strings.HasPrefix(err.Error(), `crdtest: mirrors.mirror.example.com: spec: x-kubernetes-validations[0].rule "self.targets.size() > ": Invalid value: `) ||
		!strings.Contains(err.Error(), "compilation failed") {
		t.Errorf("Validate of a rule that doesn't compile: %v", err)
	}
	if err := crdtest.Validate(nil); err == nil {
		t.Error("Validate(nil) is nil")
	}
}
