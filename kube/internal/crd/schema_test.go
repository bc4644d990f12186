package crd_test

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/z5labs/humus/kube/internal/crd"
)

type schemaRow struct {
	name string
	got  func() (apiextensionsv1.JSONSchemaProps, error)
	want string // the schema as JSON
}

func row[T any](name, want string, rules ...crd.TypeRules) schemaRow {
	return schemaRow{name: name, got: func() (apiextensionsv1.JSONSchemaProps, error) { return specSchema[T](rules...) }, want: want}
}

// checkRows compares each row's schema with its want, both as canonical
// JSON.
func checkRows(t *testing.T, rows []schemaRow) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got, err := r.got()
			if err != nil {
				t.Fatal(err)
			}
			var want apiextensionsv1.JSONSchemaProps
			if err := json.Unmarshal([]byte(r.want), &want); err != nil {
				t.Fatalf("the row's want: %v", err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("schema:\n got %s\nwant %s", g, w)
			}
		})
	}
}

type (
	Bytes   []byte
	Name    string
	Replica int32

	Plain struct {
		Tagged    string `json:"tagged"`
		Untagged  string
		Optional  string `json:"optional,omitempty"`
		Zero      string `json:"zero,omitzero"`
		Skipped   string `json:"-"`
		Dash      string `json:"-,"` //nolint:staticcheck // the name "-", as encoding/json reads it
		unexposed string //nolint:unused // unexported, so not in the schema
	}

	Pointers struct {
		Required  *int32  `json:"required"`
		OmitEmpty *int32  `json:"omitEmpty,omitempty"`
		OmitZero  *int32  `json:"omitZero,omitzero"`
		Double    **bool  `json:"double"`
		Items     []*int8 `json:"items"`
	}

	Quoted struct {
		Count   int     `json:"count,string"`
		Flag    bool    `json:"flag,string"`
		Ratio   float64 `json:"ratio,string"`
		Text    string  `json:"text,string"`
		Pointer *int    `json:"pointer,string"`
		Slice   []int   `json:"slice,string"` //nolint:staticcheck // ",string" applies to scalars only, which is the point
	}

	Base struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	Extra struct {
		Note string `json:"note,omitempty"`
	}
	Embeds struct {
		Base
		*Extra
		Name string `json:"name"`
	}
	NamedEmbed struct {
		Base `json:"base"`
		Name string `json:"name"`
	}

	// Two fields named id at the same depth, neither tagged over the other:
	// encoding/json writes neither, so the schema has neither.
	Left struct {
		ID string `json:"id"`
		L  int    `json:"l"`
	}
	Right struct {
		ID string `json:"id"`
		R  int    `json:"r"`
	}
	// (Embedded by pointer, which encoding/json inlines alike, since vet
	// reports the conflict of two embedded structs.)
	Conflict struct {
		*Left
		*Right
	}
	// A shallower field wins over a deeper one of the same name, and a
	// tagged one over an untagged one at the same depth.
	UntaggedID struct{ ID string }
	Dominant   struct {
		Left
		UntaggedID
		L string `json:"l"`
	}

	Inline struct {
		metav1.TypeMeta `json:",inline"`
		Field           string `json:"field"`
	}

	Template struct {
		metav1.ObjectMeta `json:"metadata,omitempty"`
		Spec              Plain `json:"spec"`
	}

	WellKnown struct {
		Time        metav1.Time          `json:"time"`
		MicroTime   metav1.MicroTime     `json:"microTime"`
		Duration    metav1.Duration      `json:"duration"`
		Quantity    resource.Quantity    `json:"quantity"`
		IntOrString intstr.IntOrString   `json:"intOrString"`
		Raw         runtime.RawExtension `json:"raw"`
		MaybeTime   *metav1.Time         `json:"maybeTime"`
		Addr        netip.Addr           `json:"addr"` // a TextMarshaler: a string
		Conditions  []metav1.Condition   `json:"conditions,omitempty"`
	}
)

func TestSchemaOfEachGoScalar(t *testing.T) {
	checkRows(t, []schemaRow{
		row[bool]("bool", `{"type":"boolean"}`),
		row[int8]("int8", `{"type":"integer","format":"int32"}`),
		row[int16]("int16", `{"type":"integer","format":"int32"}`),
		row[int32]("int32", `{"type":"integer","format":"int32"}`),
		row[uint8]("uint8", `{"type":"integer","format":"int32"}`),
		row[uint16]("uint16", `{"type":"integer","format":"int32"}`),
		row[int]("int", `{"type":"integer","format":"int64"}`),
		row[int64]("int64", `{"type":"integer","format":"int64"}`),
		row[uint]("uint", `{"type":"integer","format":"int64"}`),
		row[uint32]("uint32", `{"type":"integer","format":"int64"}`),
		row[uint64]("uint64", `{"type":"integer","format":"int64"}`),
		row[Replica]("a named integer", `{"type":"integer","format":"int32"}`),
		row[float32]("float32", `{"type":"number"}`),
		row[float64]("float64", `{"type":"number"}`),
		row[string]("string", `{"type":"string"}`),
		row[Name]("a named string", `{"type":"string"}`),
		row[[]byte]("[]byte", `{"type":"string","format":"byte"}`),
		row[Bytes]("a named []byte", `{"type":"string","format":"byte"}`),
	})
}

func TestSchemaOfEachGoCollection(t *testing.T) {
	checkRows(t, []schemaRow{
		row[[]string]("a slice", `{"type":"array","items":{"type":"string"}}`),
		row[[3]float64]("an array", `{"type":"array","items":{"type":"number"}}`),
		row[[4]byte]("an array of bytes is an array, as encoding/json writes it", `{"type":"array","items":{"type":"integer","format":"int32"}}`),
		row[[][]byte]("a slice of []byte", `{"type":"array","items":{"type":"string","format":"byte"}}`),
		row[map[string]int64]("map[string]V", `{"type":"object","additionalProperties":{"type":"integer","format":"int64"}}`),
		row[map[Name][]bool]("a map with named string keys", `{"type":"object","additionalProperties":{"type":"array","items":{"type":"boolean"}}}`),
	})
}

func TestSchemaOfEachGoStruct(t *testing.T) {
	checkRows(t, []schemaRow{
		row[struct{}]("an empty struct", `{"type":"object"}`),
		row[Plain]("a struct, by json tag", `{"type":"object","properties":{
			"tagged":{"type":"string"},"Untagged":{"type":"string"},"optional":{"type":"string"},"zero":{"type":"string"},"-":{"type":"string"}},
			"required":["tagged","Untagged","-"]}`),
		row[Pointers]("pointers", `{"type":"object","properties":{
			"required":{"type":"integer","format":"int32","nullable":true},
			"omitEmpty":{"type":"integer","format":"int32"},
			"omitZero":{"type":"integer","format":"int32"},
			"double":{"type":"boolean","nullable":true},
			"items":{"type":"array","items":{"type":"integer","format":"int32","nullable":true}}},
			"required":["required","double","items"]}`),
		row[Quoted]("json's string option", `{"type":"object","properties":{
			"count":{"type":"string"},"flag":{"type":"string"},"ratio":{"type":"string"},"text":{"type":"string"},
			"pointer":{"type":"string","nullable":true},
			"slice":{"type":"array","items":{"type":"integer","format":"int64"}}},
			"required":["count","flag","ratio","text","pointer","slice"]}`),
		row[Embeds]("embedded structs are inlined; through a pointer, optional", `{"type":"object","properties":{
			"id":{"type":"string"},"kind":{"type":"string"},"note":{"type":"string"},"name":{"type":"string"}},
			"required":["id","kind","name"]}`),
		row[NamedEmbed]("an embedded struct with a json name is a field", `{"type":"object","properties":{
			"base":{"type":"object","properties":{"id":{"type":"string"},"kind":{"type":"string"}},"required":["id","kind"]},
			"name":{"type":"string"}},"required":["base","name"]}`),
		row[Conflict]("names in conflict at one depth are left out", `{"type":"object","properties":{
			"l":{"type":"integer","format":"int64"},"r":{"type":"integer","format":"int64"}}}`),
		row[Dominant]("the shallower field, or the tagged one, wins", `{"type":"object","properties":{
			"id":{"type":"string"},"l":{"type":"string"},"ID":{"type":"string"}},"required":["id","ID","l"]}`),
	})
}

// TestSchemaOfApimachinerysTypes checks the schemas of the types
// apimachinery defines that encode themselves, and of ObjectMeta below the
// root.
func TestSchemaOfApimachinerysTypes(t *testing.T) {
	checkRows(t, []schemaRow{
		row[Inline]("TypeMeta, inline", `{"type":"object","properties":{
			"apiVersion":{"type":"string"},"kind":{"type":"string"},"field":{"type":"string"}},"required":["field"]}`),
		row[Template]("ObjectMeta in a template", `{"type":"object","properties":{
			"metadata":{"type":"object","properties":{
				"name":{"type":"string"},"namespace":{"type":"string"},
				"labels":{"type":"object","additionalProperties":{"type":"string"}},
				"annotations":{"type":"object","additionalProperties":{"type":"string"}},
				"finalizers":{"type":"array","items":{"type":"string"}}}},
			"spec":{"type":"object","properties":{
				"tagged":{"type":"string"},"Untagged":{"type":"string"},"optional":{"type":"string"},"zero":{"type":"string"},"-":{"type":"string"}},
				"required":["tagged","Untagged","-"]}},
			"required":["spec"]}`),
		row[WellKnown]("apimachinery's types", `{"type":"object","properties":{
			"time":{"type":"string","format":"date-time"},
			"microTime":{"type":"string","format":"date-time"},
			"duration":{"type":"string"},
			"quantity":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]},
			"intOrString":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]},
			"raw":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
			"maybeTime":{"type":"string","format":"date-time","nullable":true},
			"addr":{"type":"string"},
			"conditions":{"type":"array","items":{"type":"object","properties":{
				"type":{"type":"string","maxLength":316,
					"pattern":"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"},
				"status":{"type":"string","enum":["True","False","Unknown"]},
				"observedGeneration":{"type":"integer","format":"int64","minimum":0},
				"lastTransitionTime":{"type":"string","format":"date-time"},
				"reason":{"type":"string","minLength":1,"maxLength":1024,"pattern":"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
				"message":{"type":"string","maxLength":32768}},
				"required":["type","status","lastTransitionTime","reason","message"]}}},
			"required":["time","microTime","duration","quantity","intOrString","raw","maybeTime","addr"]}`),
		row[*Plain]("a pointer spec is nullable", `{"type":"object","nullable":true,"properties":{
			"tagged":{"type":"string"},"Untagged":{"type":"string"},"optional":{"type":"string"},"zero":{"type":"string"},"-":{"type":"string"}},
			"required":["tagged","Untagged","-"]}`),
	})
}

// Clock encodes itself, so it has no schema but the one Schema gives.
type Clock struct{ h, m int } //nolint:unused // its fields aren't its encoding

func (c Clock) MarshalJSON() ([]byte, error) { return []byte(`"00:00"`), nil }

type (
	Window struct {
		From Clock  `json:"from"`
		To   *Clock `json:"to"`
	}
	Range struct {
		Min int32 `json:"min"`
		Max int32 `json:"max"`
	}
	Ranges struct {
		CPU    Range            `json:"cpu"`
		Memory *Range           `json:"memory,omitempty"`
		Named  map[string]Range `json:"named,omitempty"`
	}
)

var rng Range

func TestSchemaOfTypeRules(t *testing.T) {
	clock := apiextensionsv1.JSONSchemaProps{Type: "string", Pattern: `^\d\d:\d\d$`}
	checkRows(t, []schemaRow{
		row[Window]("Schema gives a json.Marshaler's schema, wherever it appears", `{"type":"object","properties":{
			"from":{"type":"string","pattern":"^\\d\\d:\\d\\d$","description":"hh:mm"},
			"to":{"type":"string","pattern":"^\\d\\d:\\d\\d$","description":"hh:mm","nullable":true}},
			"required":["from","to"]}`,
			crd.TypeRules{Type: reflect.TypeFor[Clock](), Schema: &clock, Descriptions: []string{"hh:mm"}}),
		row[Ranges]("a type's Rules, Description and Validation apply wherever it appears", `{"type":"object","properties":{
			"cpu":{"type":"object","description":"A range.","properties":{
				"min":{"type":"integer","format":"int32","minimum":0},"max":{"type":"integer","format":"int32"}},
				"required":["min","max"],"x-kubernetes-validations":[{"rule":"self.min <= self.max","message":"min is more than max"}]},
			"memory":{"type":"object","description":"A range.","properties":{
				"min":{"type":"integer","format":"int32","minimum":0},"max":{"type":"integer","format":"int32"}},
				"required":["min","max"],"x-kubernetes-validations":[{"rule":"self.min <= self.max","message":"min is more than max"}]},
			"named":{"type":"object","additionalProperties":{"type":"object","description":"A range.","properties":{
				"min":{"type":"integer","format":"int32","minimum":0},"max":{"type":"integer","format":"int32"}},
				"required":["min","max"],"x-kubernetes-validations":[{"rule":"self.min <= self.max","message":"min is more than max"}]}}},
			"required":["cpu"]}`,
			validated(described(rules(&rng, field(&rng.Min, with(crd.Minimum, int32(0)))), "A range."),
				"self.min <= self.max", "min is more than max")),
		row[Name]("a named scalar's Rules describe it", `{"type":"string","description":"A name.","x-kubernetes-validations":[{"rule":"self != ''"}]}`,
			validated(described(rules(new(Name)), "A name."), "self != ''", "")),
	})
}

type (
	Common struct {
		Port int32 `json:"port"`
	}
	Server struct {
		Common
		Host string `json:"host"`
	}
	Client struct {
		*Common
		Target string `json:"target"`
	}
	Endpoints struct {
		Server Server `json:"server"`
		Client Client `json:"client"`
	}
)

// TestSchemaOfEmbeddedRules checks that an embedded struct's Rules apply
// to its fields where they are inlined, and that the outer struct's Rules
// apply after them to the fields it promotes.
func TestSchemaOfEmbeddedRules(t *testing.T) {
	var (
		common Common
		server Server
	)
	checkRows(t, []schemaRow{
		row[Endpoints]("embedded", `{"type":"object","properties":{
			"server":{"type":"object","properties":{
				"port":{"type":"integer","format":"int32","minimum":1,"maximum":1024,"description":"The server's port."},
				"host":{"type":"string"}},
				"required":["port","host"],
				"x-kubernetes-validations":[{"rule":"self.port != 22","message":"not ssh"}]},
			"client":{"type":"object","properties":{
				"port":{"type":"integer","format":"int32","minimum":1,"maximum":65535,"description":"A port."},
				"target":{"type":"string"}},
				"required":["target"],
				"x-kubernetes-validations":[{"rule":"self.port != 22","message":"not ssh"}]}},
			"required":["server","client"]}`,
			validated(rules(&common,
				field(&common.Port, with(crd.Minimum, int32(1)), with(crd.Maximum, int32(65535)), with(crd.Description, "A port.")),
			), "self.port != 22", "not ssh"),
			rules(&server,
				field(&server.Port, with(crd.Maximum, int32(1024)), with(crd.Description, "The server's port.")),
			)),
	})
}

func TestSchemaErrorsNameTypeAndPath(t *testing.T) {
	type (
		Deep struct {
			Bad map[int]bool `json:"bad"`
		}
		Outer struct {
			Items []Deep          `json:"items"`
			ByKey map[string]Deep `json:"byKey"`
			Cx    complex128      `json:"cx"`
		}
	)
	_, err := specSchema[Outer]()
	want := strings.Join([]string{
		`kube: crd_test.Deep.Bad (spec.items[*].bad): map[int]bool has keys of type int: a map's keys must be strings`,
		`kube: crd_test.Outer.Cx (spec.cx): complex128 has no JSON encoding, so no schema`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant (Deep reported once, where it first appears):\n%s", err, want)
	}

	_, err = specSchema[chan int]()
	if want := `kube: chan int (spec): chan int is a channel, which has no schema`; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}
