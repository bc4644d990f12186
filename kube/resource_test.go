package kube_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/z5labs/humus/kube"
)

var update = flag.Bool("update", false, "rewrite the golden CRDs in testdata")

// TestMemcachedCRD is the golden test the proposal shows an end user
// writing: the proposal's Memcached, reflected, is the YAML in testdata.
func TestMemcachedCRD(t *testing.T) {
	crd, err := Memcached.CRD()
	if err != nil {
		t.Fatal(err)
	}
	got, err := kube.MarshalCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "memcacheds.cache.example.com.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(got) {
		t.Errorf("the CRD differs from %s (go test -run TestMemcachedCRD -update rewrites it):\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
}

func TestResourceGVR(t *testing.T) {
	want := schema.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"}
	if got := Memcached.GVR(); got != want {
		t.Errorf("GVR() = %v, want %v", got, want)
	}
}

func TestResourceCRDShape(t *testing.T) {
	for _, scope := range []kube.Scope{kube.Namespaced, kube.Cluster} {
		t.Run(string(scope), func(t *testing.T) {
			r := Memcached
			r.Scope = scope
			crd, err := r.CRD()
			if err != nil {
				t.Fatal(err)
			}
			if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
				t.Errorf("TypeMeta = %+v", crd.TypeMeta)
			}
			if crd.Name != "memcacheds.cache.example.com" {
				t.Errorf("Name = %q, want <Plural>.<Group>", crd.Name)
			}
			if crd.Spec.Scope != apiextensionsv1.ResourceScope(scope) {
				t.Errorf("Scope = %q, want %q", crd.Spec.Scope, scope)
			}
			wantNames := apiextensionsv1.CustomResourceDefinitionNames{Plural: "memcacheds", Singular: "memcached", Kind: "Memcached", ListKind: "MemcachedList",
				ShortNames: []string{"mc"}, Categories: []string{"example"}}
			if !namesEqual(crd.Spec.Names, wantNames) {
				t.Errorf("Names = %+v, want %+v", crd.Spec.Names, wantNames)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != "v1alpha1" || !v.Served || !v.Storage {
				t.Errorf("version %q served %v storage %v, want v1alpha1 served and stored", v.Name, v.Served, v.Storage)
			}
			wantScale := &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.readyReplicas"}
			if v.Subresources == nil || v.Subresources.Status == nil || !reflect.DeepEqual(v.Subresources.Scale, wantScale) {
				t.Errorf("Subresources = %+v, want the status subresource and the scale %+v", v.Subresources, wantScale)
			}
			wantColumns := []apiextensionsv1.CustomResourceColumnDefinition{
				{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
				{Name: "Ready", Type: "integer", JSONPath: ".status.readyReplicas"},
				{Name: "Available", Type: "string", JSONPath: `.status.conditions[?(@.type=="Available")].status`},
				{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
			}
			if !reflect.DeepEqual(v.AdditionalPrinterColumns, wantColumns) {
				t.Errorf("AdditionalPrinterColumns = %+v, want %+v", v.AdditionalPrinterColumns, wantColumns)
			}
			root := v.Schema.OpenAPIV3Schema
			if root.Type != "object" || !slices.Equal(root.Required, []string{"spec"}) {
				t.Errorf("root is %q requiring %v, want an object requiring spec", root.Type, root.Required)
			}
			for name, typ := range map[string]string{"apiVersion": "string", "kind": "string", "metadata": "object", "spec": "object", "status": "object"} {
				p, ok := root.Properties[name]
				if !ok || p.Type != typ {
					t.Errorf("root property %s = %+v, want type %s", name, p, typ)
				}
			}
			if len(root.Properties) != 5 {
				t.Errorf("root has %d properties, want 5", len(root.Properties))
			}
			if m := root.Properties["metadata"]; len(m.Properties) != 0 {
				t.Errorf("metadata has properties %v, want none: the API server validates it", m.Properties)
			}
		})
	}
}

func namesEqual(a, b apiextensionsv1.CustomResourceDefinitionNames) bool {
	return a.Plural == b.Plural && a.Singular == b.Singular && a.Kind == b.Kind && a.ListKind == b.ListKind &&
		slices.Equal(a.ShortNames, b.ShortNames) && slices.Equal(a.Categories, b.Categories)
}

// A Resource with no ShortNames, Categories, Columns or Scale has none in
// its CRD: the API server's defaults (NAME and AGE) stand.
func TestResourceCRDWithoutDetails(t *testing.T) {
	r := Memcached
	r.ShortNames, r.Categories, r.Columns, r.Scale = nil, nil, nil, nil
	crd, err := r.CRD()
	if err != nil {
		t.Fatal(err)
	}
	n, v := crd.Spec.Names, crd.Spec.Versions[0]
	if n.ShortNames != nil || n.Categories != nil || v.AdditionalPrinterColumns != nil || v.Subresources.Scale != nil {
		t.Errorf("names %+v, columns %+v, scale %+v: want none", n, v.AdditionalPrinterColumns, v.Subresources.Scale)
	}
}

type (
	Leaf struct {
		N int `json:"n"`
	}
	BadSpec struct {
		Labels   map[int]string `json:"labels"`
		Any      any            `json:"any"`
		Ch       chan int       `json:"ch"`
		Fn       func()         `json:"fn"`
		Clock    marshalsItself `json:"clock"`
		Leaf     Leaf           `json:"leaf"`
		Name     string         `json:"name"`
		Replicas int32          `json:"replicas"`
		Hidden   string         `json:"-"`
	}
	BadStatus struct {
		Node node `json:"node"`
	}
)

// badResource is a Resource with a mistake of each kind: in its names, its
// Rules, and its types.
func badResource() kube.Resource[BadSpec, BadStatus] {
	var (
		bad   BadSpec
		leaf  Leaf
		other int32
	)
	return kube.Resource[BadSpec, BadStatus]{
		Scope: "Namespace",
		Rules: []kube.TypeRules{
			kube.Rules(&bad,
				kube.Field(&bad.Name).Minimum("a"),
				kube.Field(&bad.Replicas).Pattern(nil),
				kube.Field(&bad.Leaf.N).Minimum(1),
				kube.Field(&other).Minimum(1),
				kube.Field(&bad.Hidden).MinLength(1),
			),
			kube.Rules(&leaf),
			kube.Rules(&leaf),
		},
	}
}

// TestResourceCRDErrors checks that CRD names every mistake at once, each in
// an error of its own.
func TestResourceCRDErrors(t *testing.T) {
	_, err := badResource().CRD()
	if err == nil {
		t.Fatal("CRD() returned no error")
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("CRD()'s error isn't a joined error: %v", err)
	}
	want := []string{
		`kube: Resource[kube_test.BadSpec, kube_test.BadStatus]: missing Group`,
		`kube: Resource[kube_test.BadSpec, kube_test.BadStatus]: missing Version`,
		`kube: Resource[kube_test.BadSpec, kube_test.BadStatus]: missing Kind`,
		`kube: Resource[kube_test.BadSpec, kube_test.BadStatus]: missing Plural`,
		`kube: Resource[kube_test.BadSpec, kube_test.BadStatus]: Scope "Namespace" is neither Namespaced nor Cluster`,
		`kube: Rules for kube_test.BadSpec: fields[2], a Field of int, names kube_test.Leaf.N, a field of kube_test.Leaf, which a struct field holds: constrain it in the Rules for kube_test.Leaf`,
		`kube: Rules for kube_test.BadSpec: fields[3], a Field of int32, is a rule that names no field: it points outside the kube_test.BadSpec handed to Rules`,
		`kube: Rules for kube_test.BadSpec: fields[4], a Field of string, names kube_test.BadSpec.Hidden, which isn't in kube_test.BadSpec's JSON encoding: Hidden's json tag is "-"`,
		`kube: Rules for kube_test.Leaf: two Rules for one type, Resource.Rules[1] and [2]: give one`,
		`kube: kube_test.BadSpec.Labels (spec.labels): map[int]string has keys of type int: a map's keys must be strings`,
		`kube: kube_test.BadSpec.Any (spec.any): interface {} is an interface, which has no schema: use a concrete type, or runtime.RawExtension for any object`,
		`kube: kube_test.BadSpec.Ch (spec.ch): chan int is a channel, which has no schema`,
		`kube: kube_test.BadSpec.Fn (spec.fn): func() is a function, which has no schema`,
		`kube: kube_test.BadSpec.Clock (spec.clock): kube_test.marshalsItself implements json.Marshaler, so its fields aren't its encoding: give its schema with kube.Schema[kube_test.marshalsItself]`,
		`kube: kube_test.BadSpec.Name (spec.name): Minimum needs a number, and the field's schema is type: string`,
		`kube: kube_test.BadSpec.Replicas (spec.replicas): Pattern needs a string, and the field's schema is type: integer`,
		`kube: kube_test.node.Next (status.node.next): kube_test.node contains itself, which a schema without $ref can't express`,
	}
	var got []string
	for _, e := range joined.Unwrap() {
		got = append(got, e.Error())
	}
	if !slices.Equal(got, want) {
		t.Errorf("CRD() errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type marshalsItself struct{ v int } //nolint:unused // its fields aren't its encoding

func (m marshalsItself) MarshalJSON() ([]byte, error) { return []byte("1"), nil }

type node struct {
	Value string `json:"value"`
	Next  *node  `json:"next,omitempty"`
}

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

type (
	Namespaces []string

	Mirror struct {
		Targets Namespaces         `json:"targets"`
		Ports   []int32            `json:"ports,omitempty"`
		Peers   []Listed           `json:"peers,omitempty"`
		Labels  map[string]string  `json:"labels,omitempty"`
		Weights map[string]float64 `json:"weights,omitempty"`
		Raw     []byte             `json:"raw,omitempty"`
	}
)

// TestEachAndValuesConstrainTheItems checks that Each's constraints land
// in a slice's items and Values' in a map's values, beside the field's
// own, each typed by the item's type.
func TestEachAndValuesConstrainTheItems(t *testing.T) {
	var m Mirror
	s, err := specSchema[Mirror](kube.Rules(&m,
		kube.Field(&m.Targets).MinItems(1).MaxItems(16).ListSet(),
		kube.Each(&m.Targets).Pattern(regexp.MustCompile(`^[a-z0-9-]+$`)).MinLength(1).MaxLength(63).
			Validation("self != 'kube-system'", "not kube-system"),
		kube.Each(&m.Ports).Minimum(1).Maximum(65535),
		kube.Each(&m.Peers).Description("A peer."),
		kube.Field(&m.Labels).MinProperties(1).MaxProperties(8),
		kube.Values(&m.Labels).Enum("a", "b"),
		kube.Values(&m.Weights).Maximum(1.5),
	))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{
		"targets":{"type":"array","minItems":1,"maxItems":16,"x-kubernetes-list-type":"set",
			"items":{"type":"string","pattern":"^[a-z0-9-]+$","minLength":1,"maxLength":63,
				"x-kubernetes-validations":[{"rule":"self != 'kube-system'","message":"not kube-system"}]}},
		"ports":{"type":"array","items":{"type":"integer","format":"int32","minimum":1,"maximum":65535}},
		"peers":{"type":"array","items":{"type":"object","description":"A peer.","properties":{
			"name":{"type":"string"},"port":{"type":"integer","format":"int32"}},"required":["name","port"]}},
		"labels":{"type":"object","minProperties":1,"maxProperties":8,
			"additionalProperties":{"type":"string","enum":["a","b"]}},
		"weights":{"type":"object","additionalProperties":{"type":"number","maximum":1.5}},
		"raw":{"type":"string","format":"byte"}},
		"required":["targets"]}`
	if got, want := canonical(t, s), canonical(t, want); got != want {
		t.Errorf("schema:\n got %s\nwant %s", got, want)
	}
}

// TestEachMistakes checks the mistakes in the items' constraints that
// compile: each is an error from CRD, naming the items.
func TestEachMistakes(t *testing.T) {
	var m Mirror
	_, err := specSchema[Mirror](kube.Rules(&m,
		kube.Each(&m.Targets).Default("default").Minimum("1"),
		kube.Each(&m.Targets).MaxLength(63), // twice for the items
		kube.Each(&m.Raw).Maximum(7),        // a []byte is a string
		kube.Field(&m.Ports).MaxProperties(3),
		kube.Each(&m.Peers).MaxProperties(3),
		kube.Field(&m.Weights).MinProperties(5).MaxProperties(2),
	))
	want := []string{
		`kube: Rules for kube_test.Mirror: fields[1] names kube_test.Mirror.Targets[*] again: give each field one Field`,
		`kube: kube_test.Mirror.Targets[*] (spec.targets[*]): Default sets nothing on the items of a slice or the values of a map: an item is never missing`,
		`kube: kube_test.Mirror.Targets[*] (spec.targets[*]): Minimum needs a number, and the field's schema is type: string`,
		`kube: kube_test.Mirror.Ports (spec.ports): MaxProperties needs a map, and the field's schema is type: array`,
		`kube: kube_test.Mirror.Peers[*] (spec.peers[*]): MaxProperties needs a map, and the field's schema is a struct's, type: object with properties`,
		`kube: kube_test.Mirror.Weights (spec.weights): MinProperties 5 is more than MaxProperties 2`,
		`kube: kube_test.Mirror.Raw[*] (spec.raw): has no items: it needs a slice or a map, and the field's schema is type: string`,
	}
	if got := errorLines(err); !slices.Equal(got, want) {
		t.Errorf("CRD() errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// errorLines returns the errors err joins, each as its text.
func errorLines(err error) []string {
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		if err == nil {
			return nil
		}
		return []string{err.Error()}
	}
	var out []string
	for _, e := range joined.Unwrap() {
		out = append(out, e.Error())
	}
	return out
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
