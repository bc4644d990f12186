package kube_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/z5labs/humus/kube"
)

type (
	Port struct {
		Name     string  `json:"name"`
		Number   int32   `json:"number"`
		Protocol string  `json:"protocol,omitempty"`
		Host     *string `json:"host"`
	}
	Constrained struct {
		Count    int32              `json:"count"`
		Big      uint64             `json:"big"`
		Ratio    float64            `json:"ratio"`
		Name     string             `json:"name"`
		Mode     string             `json:"mode"`
		Tags     []string           `json:"tags"`
		Fixed    [2]int32           `json:"fixed"`
		Ports    []Port             `json:"ports"`
		Optional *int32             `json:"optional,omitempty"`
		Nullable *int32             `json:"nullable"`
		Data     []byte             `json:"data"`
		Labels   map[string]string  `json:"labels"`
		Size     resource.Quantity  `json:"size"`
		Target   intstr.IntOrString `json:"target"`
		Pointers []*string          `json:"pointers"`
		Lists    [][]string         `json:"lists"`
		Maps     []map[string]int   `json:"maps"`
	}
)

func TestRulesEachConstraint(t *testing.T) {
	var c Constrained
	tests := []struct {
		name     string
		rules    kube.TypeRules
		prop     string
		want     string
		optional bool
	}{
		{"Description", kube.Rules(&c, kube.Field(&c.Name).Description("The name.")), "name",
			`{"description":"The name.","type":"string"}`, false},
		{"Default makes the field optional", kube.Rules(&c, kube.Field(&c.Count).Default(3)), "count",
			`{"type":"integer","format":"int32","default":3}`, true},
		{"Default of a struct", kube.Rules(&c, kube.Field(&c.Ports).Default([]Port{{Name: "http", Number: 80}})), "ports",
			`{"type":"array","items":{"type":"object","properties":{"host":{"type":"string","nullable":true},"name":{"type":"string"},"number":{"type":"integer","format":"int32"},"protocol":{"type":"string"}},"required":["name","number","host"]},"default":[{"name":"http","number":80,"host":null}]}`, true},
		{"Enum", kube.Rules(&c, kube.Field(&c.Mode).Enum("fast", "safe")), "mode",
			`{"type":"string","enum":["fast","safe"]}`, false},
		{"Minimum and Maximum on an integer", kube.Rules(&c, kube.Field(&c.Count).Minimum(-1).Maximum(10)), "count",
			`{"type":"integer","format":"int32","maximum":10,"minimum":-1}`, false},
		{"Maximum on a uint64", kube.Rules(&c, kube.Field(&c.Big).Maximum(1<<40)), "big",
			`{"type":"integer","format":"int64","maximum":1099511627776}`, false},
		{"Minimum on a float", kube.Rules(&c, kube.Field(&c.Ratio).Minimum(0.5)), "ratio",
			`{"type":"number","minimum":0.5}`, false},
		{"Minimum on a pointer", kube.Rules(&c, kube.Field(&c.Optional).Minimum(new(int32(2)))), "optional",
			`{"type":"integer","format":"int32","minimum":2}`, true},
		{"MinLength and MaxLength", kube.Rules(&c, kube.Field(&c.Name).MinLength(1).MaxLength(63)), "name",
			`{"type":"string","maxLength":63,"minLength":1}`, false},
		{"Pattern", kube.Rules(&c, kube.Field(&c.Name).Pattern(regexp.MustCompile(`^[a-z]+$`))), "name",
			`{"type":"string","pattern":"^[a-z]+$"}`, false},
		{"MaxLength on []byte, a string", kube.Rules(&c, kube.Field(&c.Data).MaxLength(1024)), "data",
			`{"type":"string","format":"byte","maxLength":1024}`, false},
		{"MinItems and MaxItems on a slice", kube.Rules(&c, kube.Field(&c.Tags).MinItems(1).MaxItems(5)), "tags",
			`{"type":"array","items":{"type":"string"},"maxItems":5,"minItems":1}`, false},
		{"MaxItems on an array", kube.Rules(&c, kube.Field(&c.Fixed).MaxItems(2)), "fixed",
			`{"type":"array","items":{"type":"integer","format":"int32"},"maxItems":2}`, false},
		{"ListSet", kube.Rules(&c, kube.Field(&c.Tags).ListSet()), "tags",
			`{"type":"array","items":{"type":"string"},"x-kubernetes-list-type":"set"}`, false},
		{"ListSet of lists", kube.Rules(&c, kube.Field(&c.Lists).ListSet()), "lists",
			`{"type":"array","items":{"type":"array","items":{"type":"string"}},"x-kubernetes-list-type":"set"}`, false},
		{"ListMap", kube.Rules(&c, kube.Field(&c.Ports).ListMap("name", "number")), "ports",
			`{"type":"array","items":{"type":"object","properties":{"host":{"type":"string","nullable":true},"name":{"type":"string"},"number":{"type":"integer","format":"int32"},"protocol":{"type":"string"}},"required":["name","number","host"]},"x-kubernetes-list-map-keys":["name","number"],"x-kubernetes-list-type":"map"}`, false},
		{"Validation", kube.Rules(&c, kube.Field(&c.Name).Validation("self.startsWith('a')", "starts with a").Validation("size(self) < 10", "")), "name",
			`{"type":"string","x-kubernetes-validations":[{"rule":"self.startsWith('a')","message":"starts with a"},{"rule":"size(self) < 10"}]}`, false},
		{"Enum and Default on an int-or-string", kube.Rules(&c, kube.Field(&c.Target).Enum(intstr.FromInt32(80), intstr.FromString("http")).Default(intstr.FromString("http"))), "target",
			`{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}],"enum":[80,"http"],"default":"http"}`, true},
		{"Description on a nullable pointer", kube.Rules(&c, kube.Field(&c.Nullable).Description("Or null.")), "nullable",
			`{"type":"integer","format":"int32","nullable":true,"description":"Or null."}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd, err := kube.Resource[Constrained, struct{}]{
				Group: "rules.example.com", Version: "v1", Kind: "Thing", Plural: "things", Scope: kube.Namespaced,
				Rules: []kube.TypeRules{tt.rules},
			}.CRD()
			if err != nil {
				t.Fatal(err)
			}
			s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			got, _ := json.Marshal(s.Properties[tt.prop])
			var want any
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			w, _ := json.Marshal(want)
			if canonical(t, got) != canonical(t, w) {
				t.Errorf("%s:\n got %s\nwant %s", tt.prop, got, w)
			}
			if required := slices.Contains(s.Required, tt.prop); required == tt.optional {
				t.Errorf("%s required = %v, want %v", tt.prop, required, !tt.optional)
			}
		})
	}
}

// canonical re-encodes JSON with sorted keys.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestRulesMisfits checks that each constraint that doesn't fit its field's
// type is an error naming the type, the field and its path.
func TestRulesMisfits(t *testing.T) {
	var c Constrained
	tests := []struct {
		name  string
		field kube.FieldRule
		want  string
	}{
		{"Minimum on a string", kube.Field(&c.Name).Minimum("a"),
			`kube: kube_test.Constrained.Name (spec.name): Minimum needs a number, and the field's schema is type: string`},
		{"Maximum on a slice", kube.Field(&c.Tags).Maximum(nil),
			`kube: kube_test.Constrained.Tags (spec.tags): Maximum needs a number, and the field's schema is type: array`},
		{"Minimum on a Quantity", kube.Field(&c.Size).Minimum(resource.MustParse("1")),
			`kube: kube_test.Constrained.Size (spec.size): Minimum needs a number, and the field's schema is x-kubernetes-int-or-string`},
		{"Minimum of a nil pointer", kube.Field(&c.Optional).Minimum(nil),
			`kube: kube_test.Constrained.Optional (spec.optional): Minimum is nil`},
		{"Pattern on a number", kube.Field(&c.Count).Pattern(regexp.MustCompile(`^1`)),
			`kube: kube_test.Constrained.Count (spec.count): Pattern needs a string, and the field's schema is type: integer`},
		{"Pattern on an int-or-string", kube.Field(&c.Target).Pattern(regexp.MustCompile(`^1`)),
			`kube: kube_test.Constrained.Target (spec.target): Pattern needs a string, and the field's schema is x-kubernetes-int-or-string`},
		{"a nil Pattern", kube.Field(&c.Name).Pattern(nil),
			`kube: kube_test.Constrained.Name (spec.name): Pattern is given a nil regexp`},
		{"MinLength on a map", kube.Field(&c.Labels).MinLength(1),
			`kube: kube_test.Constrained.Labels (spec.labels): MinLength needs a string, and the field's schema is type: object`},
		{"a negative MaxLength", kube.Field(&c.Name).MaxLength(-1),
			`kube: kube_test.Constrained.Name (spec.name): MaxLength is -1: it can't be negative`},
		{"MinLength over MaxLength", kube.Field(&c.Name).MinLength(5).MaxLength(2),
			`kube: kube_test.Constrained.Name (spec.name): MinLength 5 is more than MaxLength 2`},
		{"Minimum over Maximum", kube.Field(&c.Count).Minimum(5).Maximum(2),
			`kube: kube_test.Constrained.Count (spec.count): Minimum 5 is more than Maximum 2`},
		{"MinItems on a non-slice", kube.Field(&c.Count).MinItems(1),
			`kube: kube_test.Constrained.Count (spec.count): MinItems needs a slice or an array, and the field's schema is type: integer`},
		{"MaxItems on []byte, a string", kube.Field(&c.Data).MaxItems(1),
			`kube: kube_test.Constrained.Data (spec.data): MaxItems needs a slice or an array, and the field's schema is type: string`},
		{"MinItems over MaxItems", kube.Field(&c.Tags).MinItems(3).MaxItems(1),
			`kube: kube_test.Constrained.Tags (spec.tags): MinItems 3 is more than MaxItems 1`},
		{"ListSet on a string", kube.Field(&c.Name).ListSet(),
			`kube: kube_test.Constrained.Name (spec.name): ListSet needs a slice or an array, and the field's schema is type: string`},
		{"ListSet of structs", kube.Field(&c.Ports).ListSet(),
			`kube: kube_test.Constrained.Ports (spec.ports): ListSet needs scalar items, and the items are objects: use ListMap for a list of structs`},
		{"ListSet of pointers", kube.Field(&c.Pointers).ListSet(),
			`kube: kube_test.Constrained.Pointers (spec.pointers): ListSet needs items that aren't nullable, and the items are pointers`},
		{"ListMap of strings", kube.Field(&c.Tags).ListMap("name"),
			`kube: kube_test.Constrained.Tags (spec.tags): ListMap["name"] needs items that are structs, and the items' schema is type: string`},
		{"ListMap of maps", kube.Field(&c.Maps).ListMap("name"),
			`kube: kube_test.Constrained.Maps (spec.maps): ListMap["name"] needs items that are structs, and the items' schema is type: object`},
		{"ListMap without keys", kube.Field(&c.Ports).ListMap(),
			`kube: kube_test.Constrained.Ports (spec.ports): ListMap[] is given no keys`},
		{"ListMap with keys that can't be keys", kube.Field(&c.Ports).ListMap("protocol", "nope", "host", "name", "name"),
			`kube: kube_test.Constrained.Ports (spec.ports): ListMap["protocol" "nope" "host" "name" "name"] key "protocol" is neither required nor defaulted: drop its omitempty, or give it a Default; "nope" is no item field's JSON name; key "host" is nullable; "name" is given twice`},
		{"a Validation without a rule", kube.Field(&c.Name).Validation(" ", "empty"),
			`kube: kube_test.Constrained.Name (spec.name): Validation has no rule`},
		{"Enum without values", kube.Field(&c.Mode).Enum(),
			`kube: kube_test.Constrained.Mode (spec.mode): Enum is given no values`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := specSchema[Constrained](kube.Rules(&c, tt.field))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}

type (
	Item struct {
		Key   string `json:"key,omitempty"`
		Value string `json:"value"`
	}
	Keyed struct {
		Items []Item `json:"items"`
	}
)

// TestRulesListMapKeyDefaulted checks that a key with a Default, in its
// item type's Rules, is a key ListMap takes though it is omitempty.
func TestRulesListMapKeyDefaulted(t *testing.T) {
	var (
		keyed Keyed
		item  Item
	)
	s, err := specSchema[Keyed](
		kube.Rules(&keyed, kube.Field(&keyed.Items).ListMap("key")),
		kube.Rules(&item, kube.Field(&item.Key).Default("main")),
	)
	if err != nil {
		t.Fatal(err)
	}
	items := s.Properties["items"]
	if items.XListType == nil || *items.XListType != "map" || !slices.Equal(items.XListMapKeys, []string{"key"}) {
		t.Errorf("items list type %v keys %v, want map keyed by key", items.XListType, items.XListMapKeys)
	}
	if d := items.Items.Schema.Properties["key"].Default; d == nil || string(d.Raw) != `"main"` {
		t.Errorf("key's default = %v, want \"main\"", d)
	}
}

type (
	Inner struct {
		Port int32 `json:"port"`
	}
	Promotes struct {
		Inner
		Nested Inner    `json:"nested"`
		List   [2]Inner `json:"list"`
		Hidden string   `json:"-"`
		Named  Named    `json:"named"`
		Value  int32    `json:"value"`
		Other  int32    `json:"other"`
	}
	Named struct {
		Inner `json:"inner"`
	}
)

// TestRulesResolution checks how a Field's pointer is resolved to a field
// of the type handed to Rules, and each way it can name none.
func TestRulesResolution(t *testing.T) {
	var (
		p     Promotes
		other Promotes
		n     int32
		f     float32
		nm    Named
		name  Name
	)
	t.Run("a promoted field", func(t *testing.T) {
		s, err := specSchema[Promotes](kube.Rules(&p, kube.Field(&p.Port).Minimum(7)))
		if err != nil {
			t.Fatal(err)
		}
		if m := s.Properties["port"].Minimum; m == nil || *m != 7 {
			t.Errorf("port's minimum = %v, want 7", m)
		}
		if m := s.Properties["nested"].Properties["port"].Minimum; m != nil {
			t.Errorf("nested.port's minimum = %v: Promotes' Rules constrained Inner's field", *m)
		}
	})
	errorRows := []struct {
		name  string
		rules []kube.TypeRules
		want  []string
	}{
		{"a nested field, and one in an array", []kube.TypeRules{kube.Rules(&p,
			kube.Field(&p.Nested.Port).Minimum(1),
			kube.Field(&p.List[1].Port).Minimum(1),
		)}, []string{
			`kube: Rules for kube_test.Promotes: fields[0], a Field of int32, names kube_test.Inner.Port, a field of kube_test.Inner, which a struct field holds: constrain it in the Rules for kube_test.Inner`,
			`kube: Rules for kube_test.Promotes: fields[1], a Field of int32, names kube_test.Inner.Port, a field of kube_test.Inner, which a struct field holds: constrain it in the Rules for kube_test.Inner`,
		}},
		{"a pointer into another variable", []kube.TypeRules{kube.Rules(&p,
			kube.Field(&other.Value).Minimum(1),
			kube.Field(&n).Minimum(1),
			kube.Field[int32](nil).Minimum(1),
		)}, []string{
			`kube: Rules for kube_test.Promotes: fields[0], a Field of int32, is a rule that names no field: it points outside the kube_test.Promotes handed to Rules`,
			`kube: Rules for kube_test.Promotes: fields[1], a Field of int32, is a rule that names no field: it points outside the kube_test.Promotes handed to Rules`,
			`kube: Rules for kube_test.Promotes: fields[2], a Field of int32, is a rule that names no field: its pointer is nil`,
		}},
		{"fields outside the encoding", []kube.TypeRules{
			kube.Rules(&p, kube.Field(&p.Hidden).MinLength(1)),
			kube.Rules(&nm, kube.Field(&nm.Port).Minimum(1)),
		}, []string{
			`kube: Rules for kube_test.Promotes: fields[0], a Field of string, names kube_test.Promotes.Hidden, which isn't in kube_test.Promotes's JSON encoding: Hidden's json tag is "-"`,
			`kube: Rules for kube_test.Named: fields[0], a Field of int32, names kube_test.Named.Port, which isn't in kube_test.Named's JSON encoding: it is in the embedded Inner, which has a json name, so it is a field of kube_test.Inner, which its own Rules constrain`,
		}},
		{"a field named twice, a constraint given twice", []kube.TypeRules{kube.Rules(&p,
			kube.Field(&p.Value).Minimum(1).Minimum(2).ListSet().ListMap("a"),
			kube.Field(&p.Value).Maximum(1),
		)}, []string{
			`kube: Rules for kube_test.Promotes: kube_test.Promotes.Value: Minimum is given twice: give it once`,
			`kube: Rules for kube_test.Promotes: kube_test.Promotes.Value: ListSet or ListMap is given twice: give it once`,
			`kube: Rules for kube_test.Promotes: fields[1] names kube_test.Promotes.Value again: give each field one Field`,
			`kube: kube_test.Promotes.Value (spec.value): ListSet needs a slice or an array, and the field's schema is type: integer`,
			`kube: kube_test.Promotes.Value (spec.value): ListMap["a"] needs a slice or an array, and the field's schema is type: integer`,
		}},
		{"a Field of a type that isn't a struct", []kube.TypeRules{kube.Rules(&name, kube.Field(&name).MinLength(1))}, []string{
			`kube: Rules for kube_test.Name: fields[0], a Field of kube_test.Name, is a rule that names no field: kube_test.Name isn't a struct, so it has none`,
			`kube: Rules for kube_test.Name: kube_test.Name appears nowhere in Spec or Status, so its Rules constrain nothing`,
		}},
		{"two Rules for one type, and Rules for a type that appears nowhere", []kube.TypeRules{
			kube.Rules(&p),
			kube.Schema[Promotes](apiextensionsv1.JSONSchemaProps{Type: "object"}),
			kube.Rules(&f),
			{},
			kube.Rules[Inner](nil).Description("a").Description("b"),
		}, []string{
			`kube: Rules for kube_test.Promotes: two Rules for one type, Resource.Rules[0] and [1]: give one`,
			`kube: Resource.Rules[3] is an empty TypeRules: make it with kube.Rules or kube.Schema`,
			`kube: Rules for kube_test.Inner: Description is given 2 times: give it once`,
			`kube: Rules for kube_test.Inner: v is nil: it must point at a kube_test.Inner for its Fields to point into`,
			`kube: Rules for float32: float32 appears nowhere in Spec or Status, so its Rules constrain nothing`,
		}},
	}
	for _, tt := range errorRows {
		t.Run(tt.name, func(t *testing.T) {
			_, err := specSchema[Promotes](tt.rules...)
			var got []string
			var joined interface{ Unwrap() []error }
			if errors.As(err, &joined) {
				for _, e := range joined.Unwrap() {
					got = append(got, e.Error())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
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
		s, err := specSchema[Constrained](kube.Rules(&c, tt.rule))
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
