package kube_test

import (
	"encoding/json"
	"regexp"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/z5labs/humus/kube"
)

// specSchema returns the schema CRD reflects for a Resource whose spec is
// a T.
func specSchema[T any](rules ...kube.TypeRules) (apiextensionsv1.JSONSchemaProps, error) {
	crd, err := kube.Resource[T, struct{}]{
		Group: "rules.example.com", Version: "v1", Kind: "Thing", Plural: "things", Scope: kube.Namespaced,
		Rules: rules,
	}.CRD()
	if err != nil {
		return apiextensionsv1.JSONSchemaProps{}, err
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"], nil
}

type (
	// Stamp encodes itself, so its schema is the one Schema gives.
	Stamp struct{ unix int64 } //nolint:unused // its fields aren't its encoding

	Listed struct {
		Name string `json:"name"`
		Port int32  `json:"port"`
	}
	Constrained struct {
		Count int32    `json:"count"`
		Mode  string   `json:"mode"`
		Tags  []string `json:"tags"`
		Ports []Listed `json:"ports"`
		Stamp Stamp    `json:"stamp"`
	}
)

func (Stamp) MarshalJSON() ([]byte, error) { return []byte(`"1970-01-01"`), nil }

// TestEachRuleMethodLandsInTheSchema checks that each method of FieldOf
// and TypeRules, and Schema, sets what its name says in the schema.
func TestEachRuleMethodLandsInTheSchema(t *testing.T) {
	var c Constrained
	s, err := specSchema[Constrained](
		kube.Rules(&c,
			kube.Field(&c.Count).Description("How many.").Default(3).Minimum(1).Maximum(5),
			kube.Field(&c.Mode).Enum("fast", "safe").MinLength(4).MaxLength(4).
				Pattern(regexp.MustCompile(`^[a-z]+$`)).Validation("self != 'slow'", "not slow"),
			kube.Field(&c.Tags).MinItems(1).MaxItems(3).ListSet(),
			kube.Field(&c.Ports).ListMap("name"),
		).Description("Every rule.").Validation("size(self.tags) > 0", ""),
		kube.Schema[Stamp](apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","description":"Every rule.","properties":{
		"count":{"type":"integer","format":"int32","description":"How many.","default":3,"minimum":1,"maximum":5},
		"mode":{"type":"string","enum":["fast","safe"],"minLength":4,"maxLength":4,"pattern":"^[a-z]+$",
			"x-kubernetes-validations":[{"rule":"self != 'slow'","message":"not slow"}]},
		"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3,"x-kubernetes-list-type":"set"},
		"ports":{"type":"array","items":{"type":"object","properties":{
			"name":{"type":"string"},"port":{"type":"integer","format":"int32"}},"required":["name","port"]},
			"x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"]},
		"stamp":{"type":"string","format":"date"}},
		"required":["mode","tags","ports","stamp"],
		"x-kubernetes-validations":[{"rule":"size(self.tags) > 0"}]}`
	if got, want := canonical(t, s), canonical(t, want); got != want {
		t.Errorf("schema:\n got %s\nwant %s", got, want)
	}
}

// canonical is v's JSON, or the JSON v holds when it is a string, with
// keys sorted.
func canonical(t *testing.T, v any) string {
	t.Helper()
	if s, ok := v.(string); ok {
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
	} else {
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestFieldOfIsAValue checks that each method returns a copy, so that two
// rules built from one FieldOf don't share constraints. Its base holds
// three constraints, in a slice append grew from two to room for at least
// four: a method that appended in place would write low's Maximum, then
// high's, into the spare slot they share, and low would get high's.
func TestFieldOfIsAValue(t *testing.T) {
	var c Constrained
	base := kube.Field(&c.Count).Minimum(1).Description("A count.").Validation("self != 13", "")
	low := base.Maximum(5)
	high := base.Maximum(50)
	for _, tt := range []struct {
		name    string
		rule    kube.FieldOf[int32]
		maximum float64
	}{{"low", low, 5}, {"high", high, 50}} {
		s, err := specSchema[Constrained](kube.Rules(&c, tt.rule), kube.Schema[Stamp](apiextensionsv1.JSONSchemaProps{Type: "string"}))
		if err != nil {
			t.Fatal(err)
		}
		count := s.Properties["count"]
		if count.Maximum == nil || *count.Maximum != tt.maximum || count.Minimum == nil || *count.Minimum != 1 {
			t.Errorf("%s count: minimum %v maximum %v, want 1 and %v", tt.name, orNil(count.Minimum), orNil(count.Maximum), tt.maximum)
		}
	}
}

// orNil returns *p, or nil for a nil p, to print.
func orNil(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
