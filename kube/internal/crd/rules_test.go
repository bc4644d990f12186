package crd_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/z5labs/humus/kube/internal/crd"
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

// constraintRow is a field's rules, and the schema of its property prop
// they give, as JSON, and whether it is optional.
type constraintRow struct {
	name     string
	rules    crd.TypeRules
	prop     string
	want     string
	optional bool
}

// checkConstraintRows checks each row's property, and whether it is
// required, in the spec of a Constrained.
func checkConstraintRows(t *testing.T, rows []constraintRow) {
	t.Helper()
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			s, err := specSchema[Constrained](tt.rules)
			if err != nil {
				t.Fatal(err)
			}
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

// TestRulesEachScalarConstraint checks each constraint on a scalar field,
// and Description, Default and Validation, in the field's schema.
func TestRulesEachScalarConstraint(t *testing.T) {
	var c Constrained
	checkConstraintRows(t, []constraintRow{
		{"Description", rules(&c, field(&c.Name, with(crd.Description, "The name."))), "name",
			`{"description":"The name.","type":"string"}`, false},
		{"Default makes the field optional", rules(&c, field(&c.Count, with(crd.Default, int32(3)))), "count",
			`{"type":"integer","format":"int32","default":3}`, true},
		{"Enum", rules(&c, field(&c.Mode, with(crd.Enum, []any{"fast", "safe"}))), "mode",
			`{"type":"string","enum":["fast","safe"]}`, false},
		{"Minimum and Maximum on an integer", rules(&c, field(&c.Count, with(crd.Minimum, int32(-1)), with(crd.Maximum, int32(10)))), "count",
			`{"type":"integer","format":"int32","maximum":10,"minimum":-1}`, false},
		{"Maximum on a uint64", rules(&c, field(&c.Big, with(crd.Maximum, uint64(1<<40)))), "big",
			`{"type":"integer","format":"int64","maximum":1099511627776}`, false},
		{"Minimum on a float", rules(&c, field(&c.Ratio, with(crd.Minimum, 0.5))), "ratio",
			`{"type":"number","minimum":0.5}`, false},
		{"Minimum on a pointer", rules(&c, field(&c.Optional, with(crd.Minimum, new(int32(2))))), "optional",
			`{"type":"integer","format":"int32","minimum":2}`, true},
		{"MinLength and MaxLength", rules(&c, field(&c.Name, with(crd.MinLength, 1), with(crd.MaxLength, 63))), "name",
			`{"type":"string","maxLength":63,"minLength":1}`, false},
		{"Pattern", rules(&c, field(&c.Name, with(crd.Pattern, regexp.MustCompile(`^[a-z]+$`)))), "name",
			`{"type":"string","pattern":"^[a-z]+$"}`, false},
		{"MaxLength on []byte, a string", rules(&c, field(&c.Data, with(crd.MaxLength, 1024))), "data",
			`{"type":"string","format":"byte","maxLength":1024}`, false},
		{"Validation", rules(&c, field(&c.Name, with(crd.Validation, validation("self.startsWith('a')", "starts with a")), with(crd.Validation, validation("size(self) < 10", "")))), "name",
			`{"type":"string","x-kubernetes-validations":[{"rule":"self.startsWith('a')","message":"starts with a"},{"rule":"size(self) < 10"}]}`, false},
		{"Enum and Default on an int-or-string", rules(&c, field(&c.Target, with(crd.Enum, []any{intstr.FromInt32(80), intstr.FromString("http")}), with(crd.Default, intstr.FromString("http")))), "target",
			`{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}],"enum":[80,"http"],"default":"http"}`, true},
		{"Description on a nullable pointer", rules(&c, field(&c.Nullable, with(crd.Description, "Or null."))), "nullable",
			`{"type":"integer","format":"int32","nullable":true,"description":"Or null."}`, false},
	})
}

// TestRulesEachListConstraint checks each constraint on a list, and a
// Default of one, in the field's schema.
func TestRulesEachListConstraint(t *testing.T) {
	var c Constrained
	checkConstraintRows(t, []constraintRow{
		{"Default of a struct", rules(&c, field(&c.Ports, with(crd.Default, []Port{{Name: "http", Number: 80}}))), "ports",
			`{"type":"array","items":{"type":"object","properties":{"host":{"type":"string","nullable":true},"name":{"type":"string"},"number":{"type":"integer","format":"int32"},"protocol":{"type":"string"}},"required":["name","number","host"]},"default":[{"name":"http","number":80,"host":null}]}`, true},
		{"MinItems and MaxItems on a slice", rules(&c, field(&c.Tags, with(crd.MinItems, 1), with(crd.MaxItems, 5))), "tags",
			`{"type":"array","items":{"type":"string"},"maxItems":5,"minItems":1}`, false},
		{"MaxItems on an array", rules(&c, field(&c.Fixed, with(crd.MaxItems, 2))), "fixed",
			`{"type":"array","items":{"type":"integer","format":"int32"},"maxItems":2}`, false},
		{"ListSet", rules(&c, field(&c.Tags, with(crd.ListSet, nil))), "tags",
			`{"type":"array","items":{"type":"string"},"x-kubernetes-list-type":"set"}`, false},
		{"ListSet of lists", rules(&c, field(&c.Lists, with(crd.ListSet, nil))), "lists",
			`{"type":"array","items":{"type":"array","items":{"type":"string"}},"x-kubernetes-list-type":"set"}`, false},
		{"ListMap", rules(&c, field(&c.Ports, with(crd.ListMap, []string{"name", "number"}))), "ports",
			`{"type":"array","items":{"type":"object","properties":{"host":{"type":"string","nullable":true},"name":{"type":"string"},"number":{"type":"integer","format":"int32"},"protocol":{"type":"string"}},"required":["name","number","host"]},"x-kubernetes-list-map-keys":["name","number"],"x-kubernetes-list-type":"map"}`, false},
	})
}

// TestRulesMisfits checks that each constraint that doesn't fit its field's
// type is an error naming the type, the field and its path.
func TestRulesMisfits(t *testing.T) {
	var c Constrained
	tests := []struct {
		name  string
		field crd.Field
		want  string
	}{
		{"Minimum on a string", field(&c.Name, with(crd.Minimum, "a")),
			`kube: crd_test.Constrained.Name (spec.name): Minimum needs a number, and the field's schema is type: string`},
		{"Maximum on a slice", field(&c.Tags, with(crd.Maximum, nil)),
			`kube: crd_test.Constrained.Tags (spec.tags): Maximum needs a number, and the field's schema is type: array`},
		{"Minimum on a Quantity", field(&c.Size, with(crd.Minimum, resource.MustParse("1"))),
			`kube: crd_test.Constrained.Size (spec.size): Minimum needs a number, and the field's schema is x-kubernetes-int-or-string`},
		{"Minimum of a nil pointer", field(&c.Optional, with(crd.Minimum, (*int32)(nil))),
			`kube: crd_test.Constrained.Optional (spec.optional): Minimum is nil`},
		{"Pattern on a number", field(&c.Count, with(crd.Pattern, regexp.MustCompile(`^1`))),
			`kube: crd_test.Constrained.Count (spec.count): Pattern needs a string, and the field's schema is type: integer`},
		{"Pattern on an int-or-string", field(&c.Target, with(crd.Pattern, regexp.MustCompile(`^1`))),
			`kube: crd_test.Constrained.Target (spec.target): Pattern needs a string, and the field's schema is x-kubernetes-int-or-string`},
		{"a nil Pattern", field(&c.Name, with(crd.Pattern, nil)),
			`kube: crd_test.Constrained.Name (spec.name): Pattern is given a nil regexp`},
		{"MinLength on a map", field(&c.Labels, with(crd.MinLength, 1)),
			`kube: crd_test.Constrained.Labels (spec.labels): MinLength needs a string, and the field's schema is type: object`},
		{"a negative MaxLength", field(&c.Name, with(crd.MaxLength, -1)),
			`kube: crd_test.Constrained.Name (spec.name): MaxLength is -1: it can't be negative`},
		{"MinLength over MaxLength", field(&c.Name, with(crd.MinLength, 5), with(crd.MaxLength, 2)),
			`kube: crd_test.Constrained.Name (spec.name): MinLength 5 is more than MaxLength 2`},
		{"Minimum over Maximum", field(&c.Count, with(crd.Minimum, int32(5)), with(crd.Maximum, int32(2))),
			`kube: crd_test.Constrained.Count (spec.count): Minimum 5 is more than Maximum 2`},
		{"MinItems on a non-slice", field(&c.Count, with(crd.MinItems, 1)),
			`kube: crd_test.Constrained.Count (spec.count): MinItems needs a slice or an array, and the field's schema is type: integer`},
		{"MaxItems on []byte, a string", field(&c.Data, with(crd.MaxItems, 1)),
			`kube: crd_test.Constrained.Data (spec.data): MaxItems needs a slice or an array, and the field's schema is type: string`},
		{"MinItems over MaxItems", field(&c.Tags, with(crd.MinItems, 3), with(crd.MaxItems, 1)),
			`kube: crd_test.Constrained.Tags (spec.tags): MinItems 3 is more than MaxItems 1`},
		{"ListSet on a string", field(&c.Name, with(crd.ListSet, nil)),
			`kube: crd_test.Constrained.Name (spec.name): ListSet needs a slice or an array, and the field's schema is type: string`},
		{"ListSet of structs", field(&c.Ports, with(crd.ListSet, nil)),
			`kube: crd_test.Constrained.Ports (spec.ports): ListSet needs scalar items, and the items are objects: use ListMap for a list of structs`},
		{"ListSet of pointers", field(&c.Pointers, with(crd.ListSet, nil)),
			`kube: crd_test.Constrained.Pointers (spec.pointers): ListSet needs items that aren't nullable, and the items are pointers`},
		{"ListMap of strings", field(&c.Tags, with(crd.ListMap, []string{"name"})),
			`kube: crd_test.Constrained.Tags (spec.tags): ListMap["name"] needs items that are structs, and the items' schema is type: string`},
		{"ListMap of maps", field(&c.Maps, with(crd.ListMap, []string{"name"})),
			`kube: crd_test.Constrained.Maps (spec.maps): ListMap["name"] needs items that are structs, and the items' schema is type: object`},
		{"ListMap without keys", field(&c.Ports, with(crd.ListMap, []string{})),
			`kube: crd_test.Constrained.Ports (spec.ports): ListMap[] is given no keys`},
		{"ListMap with keys that can't be keys", field(&c.Ports, with(crd.ListMap, []string{"protocol", "nope", "host", "name", "name"})),
			`kube: crd_test.Constrained.Ports (spec.ports): ListMap["protocol" "nope" "host" "name" "name"] key "protocol" is neither required nor defaulted: drop its omitempty, or give it a Default; "nope" is no item field's JSON name; key "host" is nullable; "name" is given twice`},
		{"a Validation without a rule", field(&c.Name, with(crd.Validation, validation(" ", "empty"))),
			`kube: crd_test.Constrained.Name (spec.name): Validation has no rule`},
		{"Enum without values", field(&c.Mode, with(crd.Enum, []any{})),
			`kube: crd_test.Constrained.Mode (spec.mode): Enum is given no values`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := specSchema[Constrained](rules(&c, tt.field))
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
		rules(&keyed, field(&keyed.Items, with(crd.ListMap, []string{"key"}))),
		rules(&item, field(&item.Key, with(crd.Default, "main"))),
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

// TestRulesOfAPromotedField checks that a Field of a field promoted from
// an embedded struct constrains it in the outer type, and not where the
// embedded type is a field of its own.
func TestRulesOfAPromotedField(t *testing.T) {
	var p Promotes
	s, err := specSchema[Promotes](rules(&p, field(&p.Port, with(crd.Minimum, int32(7)))))
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Properties["port"].Minimum; m == nil || *m != 7 {
		t.Errorf("port's minimum = %v, want 7", m)
	}
	if m := s.Properties["nested"].Properties["port"].Minimum; m != nil {
		t.Errorf("nested.port's minimum = %v: Promotes' Rules constrained Inner's field", *m)
	}
}

// errorsRow is Rules for a Promotes spec, and the errors Build returns
// for them, in order.
type errorsRow struct {
	name  string
	rules []crd.TypeRules
	want  []string
}

// checkErrorsRows checks each row's errors.
func checkErrorsRows(t *testing.T, rows []errorsRow) {
	t.Helper()
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			_, err := specSchema[Promotes](tt.rules...)
			if got := errorLines(err); !slices.Equal(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestRulesNamingNoField checks each way a Field's pointer can name no
// field of the type handed to Rules that its Rules constrain.
func TestRulesNamingNoField(t *testing.T) {
	var (
		p     Promotes
		other Promotes
		n     int32
		nm    Named
	)
	checkErrorsRows(t, []errorsRow{
		{"a nested field, and one in an array", []crd.TypeRules{rules(&p,
			field(&p.Nested.Port, with(crd.Minimum, int32(1))),
			field(&p.List[1].Port, with(crd.Minimum, int32(1))),
		)}, []string{
			`kube: Rules for crd_test.Promotes: fields[0], a Field of int32, names crd_test.Inner.Port, a field of crd_test.Inner, which a struct field holds: constrain it in the Rules for crd_test.Inner`,
			`kube: Rules for crd_test.Promotes: fields[1], a Field of int32, names crd_test.Inner.Port, a field of crd_test.Inner, which a struct field holds: constrain it in the Rules for crd_test.Inner`,
		}},
		{"a pointer into another variable", []crd.TypeRules{rules(&p,
			field(&other.Value, with(crd.Minimum, int32(1))),
			field(&n, with(crd.Minimum, int32(1))),
			field[int32](nil, with(crd.Minimum, int32(1))),
		)}, []string{
			`kube: Rules for crd_test.Promotes: fields[0], a Field of int32, is a rule that names no field: it points outside the crd_test.Promotes handed to Rules`,
			`kube: Rules for crd_test.Promotes: fields[1], a Field of int32, is a rule that names no field: it points outside the crd_test.Promotes handed to Rules`,
			`kube: Rules for crd_test.Promotes: fields[2], a Field of int32, is a rule that names no field: its pointer is nil`,
		}},
		{"fields outside the encoding", []crd.TypeRules{
			rules(&p, field(&p.Hidden, with(crd.MinLength, 1))),
			rules(&nm, field(&nm.Port, with(crd.Minimum, int32(1)))),
		}, []string{
			`kube: Rules for crd_test.Promotes: fields[0], a Field of string, names crd_test.Promotes.Hidden, which isn't in crd_test.Promotes's JSON encoding: Hidden's json tag is "-"`,
			`kube: Rules for crd_test.Named: fields[0], a Field of int32, names crd_test.Named.Port, which isn't in crd_test.Named's JSON encoding: it is in the embedded Inner, which has a json name, so it is a field of crd_test.Inner, which its own Rules constrain`,
		}},
	})
}

// TestRulesMistakes checks each mistake in the Rules themselves: a field
// or a constraint given twice, Rules for a type that isn't a struct, twice
// for one type, or for a type that appears nowhere.
func TestRulesMistakes(t *testing.T) {
	var (
		p    Promotes
		f    float32
		name Name
	)
	checkErrorsRows(t, []errorsRow{
		{"a field named twice, a constraint given twice", []crd.TypeRules{rules(&p,
			field(&p.Value, with(crd.Minimum, int32(1)), with(crd.Minimum, int32(2)), with(crd.ListSet, nil), with(crd.ListMap, []string{"a"})),
			field(&p.Value, with(crd.Maximum, int32(1))),
		)}, []string{
			`kube: Rules for crd_test.Promotes: crd_test.Promotes.Value: Minimum is given twice: give it once`,
			`kube: Rules for crd_test.Promotes: crd_test.Promotes.Value: ListSet or ListMap is given twice: give it once`,
			`kube: Rules for crd_test.Promotes: fields[1] names crd_test.Promotes.Value again: give each field one Field`,
			`kube: crd_test.Promotes.Value (spec.value): ListSet needs a slice or an array, and the field's schema is type: integer`,
			`kube: crd_test.Promotes.Value (spec.value): ListMap["a"] needs a slice or an array, and the field's schema is type: integer`,
		}},
		{"a Field of a type that isn't a struct", []crd.TypeRules{rules(&name, field(&name, with(crd.MinLength, 1)))}, []string{
			`kube: Rules for crd_test.Name: fields[0], a Field of crd_test.Name, is a rule that names no field: crd_test.Name isn't a struct, so it has none`,
			`kube: Rules for crd_test.Name: crd_test.Name appears nowhere in Spec or Status, so its Rules constrain nothing`,
		}},
		{"two Rules for one type, and Rules for a type that appears nowhere", []crd.TypeRules{
			rules(&p),
			{Type: reflect.TypeFor[Promotes](), Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			rules(&f),
			{},
			described(described(rules[Inner](nil), "a"), "b"),
		}, []string{
			`kube: Rules for crd_test.Promotes: two Rules for one type, Resource.Rules[0] and [1]: give one`,
			`kube: Resource.Rules[3] is an empty TypeRules: make it with kube.Rules or kube.Schema`,
			`kube: Rules for crd_test.Inner: Description is given 2 times: give it once`,
			`kube: Rules for crd_test.Inner: v is nil: it must point at a crd_test.Inner for its Fields to point into`,
			`kube: Rules for float32: float32 appears nowhere in Spec or Status, so its Rules constrain nothing`,
		}},
	})
}
