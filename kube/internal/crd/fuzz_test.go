package crd_test

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/z5labs/humus/kube/internal/crd"
)

type (
	fuzzNode struct {
		Next *fuzzNode `json:"next,omitempty"`
	}
	fuzzMarshaler struct{ v int } //nolint:unused // its fields aren't its encoding
	fuzzBase      struct {
		ID   string `json:"id"`
		Name string `json:"name,omitempty"`
	}
	fuzzOther struct {
		ID   string `json:"id"`
		Port int32  `json:"port"`
	}
)

func (fuzzMarshaler) MarshalJSON() ([]byte, error) { return []byte(`1`), nil }

// leaves are the types a generated type is built of, bad ones included.
var leaves = []reflect.Type{
	reflect.TypeFor[bool](), reflect.TypeFor[int8](), reflect.TypeFor[int16](), reflect.TypeFor[int32](),
	reflect.TypeFor[int64](), reflect.TypeFor[int](), reflect.TypeFor[uint8](), reflect.TypeFor[uint16](),
	reflect.TypeFor[uint32](), reflect.TypeFor[uint64](), reflect.TypeFor[uint](), reflect.TypeFor[uintptr](),
	reflect.TypeFor[float32](), reflect.TypeFor[float64](), reflect.TypeFor[string](), reflect.TypeFor[[]byte](),
	reflect.TypeFor[metav1.Time](), reflect.TypeFor[metav1.MicroTime](), reflect.TypeFor[metav1.Duration](),
	reflect.TypeFor[resource.Quantity](), reflect.TypeFor[intstr.IntOrString](), reflect.TypeFor[runtime.RawExtension](),
	reflect.TypeFor[metav1.ObjectMeta](), reflect.TypeFor[metav1.Condition](), reflect.TypeFor[netip.Addr](),
	reflect.TypeFor[fuzzBase](), reflect.TypeFor[fuzzOther](),
	// Bad ones.
	reflect.TypeFor[any](), reflect.TypeFor[chan int](), reflect.TypeFor[func()](), reflect.TypeFor[complex128](),
	reflect.TypeFor[unsafe.Pointer](), reflect.TypeFor[map[int]string](), reflect.TypeFor[fuzzMarshaler](),
	reflect.TypeFor[fuzzNode](),
}

// gen builds types, and rules for them, from fuzz bytes.
type gen struct {
	b       []byte
	structs []reflect.Type // every struct type generated
	n       int
}

func (g *gen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *gen) typ(depth int) reflect.Type {
	c := g.byte()
	if depth > 3 {
		return leaves[int(c)%len(leaves)]
	}
	switch c % 8 {
	case 0:
		return reflect.SliceOf(g.typ(depth + 1))
	case 1:
		return reflect.ArrayOf(int(g.byte()%3), g.typ(depth+1))
	case 2:
		return reflect.MapOf(reflect.TypeFor[string](), g.typ(depth+1))
	case 3:
		return reflect.PointerTo(g.typ(depth + 1))
	case 4:
		return g.structType(depth + 1)
	default:
		return leaves[int(g.byte())%len(leaves)]
	}
}

var tags = []string{``, `json:"-"`, `json:"a"`, `json:"a,omitempty"`, `json:"b,omitzero"`, `json:",omitempty"`,
	`json:"c,string"`, `json:"dup"`, `json:",inline"`, `json:"-,"`}

func (g *gen) structType(depth int) reflect.Type {
	n := int(g.byte() % 5)
	var fields []reflect.StructField
	for i := range n {
		g.n++
		f := reflect.StructField{
			Name: fmt.Sprintf("F%d", g.n),
			Type: g.typ(depth),
			Tag:  reflect.StructTag(tags[int(g.byte())%len(tags)]),
		}
		switch g.byte() % 6 {
		case 0: // unexported
			f.Name = fmt.Sprintf("f%d", g.n)
			f.PkgPath = "github.com/z5labs/humus/kube/internal/crd_test"
		case 1: // embedded
			if f.Type.Kind() == reflect.Struct && f.Type.NumMethod() == 0 && reflect.PointerTo(f.Type).NumMethod() == 0 {
				f.Anonymous = true
				f.Name = fmt.Sprintf("E%d", g.n)
			}
		}
		_ = i
		fields = append(fields, f)
	}
	t := reflect.StructOf(fields)
	g.structs = append(g.structs, t)
	return t
}

var constraintMakers = []func(v any) crd.Constraint{
	func(any) crd.Constraint { return with(crd.Description, "d") },
	func(v any) crd.Constraint { return with(crd.Default, v) },
	func(v any) crd.Constraint { return with(crd.Enum, []any{v}) },
	func(v any) crd.Constraint { return with(crd.Minimum, v) },
	func(v any) crd.Constraint { return with(crd.Maximum, v) },
	func(any) crd.Constraint { return with(crd.MinLength, 1) },
	func(any) crd.Constraint { return with(crd.MaxLength, -1) },
	func(any) crd.Constraint { return with(crd.Pattern, regexp.MustCompile(`^a`)) },
	func(any) crd.Constraint { return with(crd.Pattern, nil) },
	func(any) crd.Constraint { return with(crd.MinItems, 2) },
	func(any) crd.Constraint { return with(crd.MaxItems, 1) },
	func(any) crd.Constraint { return with(crd.ListSet, nil) },
	func(any) crd.Constraint { return with(crd.ListMap, []string{"id"}) },
	func(any) crd.Constraint { return with(crd.Validation, validation("true", "")) },
	func(any) crd.Constraint { return with(crd.MinProperties, 3) },
	func(any) crd.Constraint { return with(crd.MaxProperties, 2) },
}

// rules makes Rules for some of the generated structs, each constraining
// some of its fields, and now and then naming no field.
func (g *gen) rules() []crd.TypeRules {
	var out []crd.TypeRules
	for _, t := range g.structs {
		if g.byte()%2 == 0 {
			continue
		}
		v := reflect.New(t)
		tr := crd.TypeRules{Type: t, Base: v.UnsafePointer()}
		for i := range t.NumField() {
			c := g.byte()
			if c%3 == 0 {
				continue
			}
			fv := v.Elem().Field(i)
			p := fv.Addr().UnsafePointer()
			if c%7 == 0 {
				p = reflect.New(fv.Type()).UnsafePointer() // names no field
			}
			var zero any
			if fv.CanInterface() {
				zero = fv.Interface()
			}
			f := crd.Field{Ptr: p, Type: fv.Type()}
			for range int(g.byte() % 3) {
				f.Constraints = append(f.Constraints, constraintMakers[int(g.byte())%len(constraintMakers)](zero))
			}
			tr.Fields = append(tr.Fields, func() crd.Field { return f })
			if c%5 == 0 { // its items too, as kube.Each and kube.Values name them
				items := crd.Field{Ptr: p, Type: fv.Type(), Items: true}
				for range int(g.byte() % 3) {
					items.Constraints = append(items.Constraints, constraintMakers[int(g.byte())%len(constraintMakers)](zero))
				}
				tr.Fields = append(tr.Fields, func() crd.Field { return items })
			}
		}
		if g.byte()%4 == 0 {
			tr = validated(tr, "self == self", "")
		}
		out = append(out, tr)
		if g.byte()%8 == 0 {
			out = append(out, tr) // two Rules for one type
		}
	}
	if g.byte()%3 == 0 {
		out = append(out, crd.TypeRules{Type: reflect.TypeFor[fuzzMarshaler](), Schema: &apiextensionsv1.JSONSchemaProps{Type: "integer"}})
	}
	return out
}

// FuzzCRD reflects generated types: Build never panics, a CRD it returns is
// structural, and each error it returns names the type it is about.
func FuzzCRD(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{4, 3, 7, 2, 9, 1, 5, 4, 2, 0, 1, 3, 3, 1, 1, 6, 5})
	f.Add([]byte{4, 4, 0, 2, 1, 4, 2, 8, 3, 1, 12, 1, 1, 1, 2, 1, 3, 4})
	f.Add([]byte{4, 2, 5, 30, 2, 1, 5, 31, 3, 4, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte("a fuzzed custom resource's spec and status"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g := &gen{b: b}
		var spec, status reflect.Type
		func() {
			defer func() {
				if recover() != nil {
					spec = nil // reflect refused the type: not Build's to test
				}
			}()
			spec, status = g.structType(0), g.typ(1)
		}()
		if spec == nil {
			t.Skip("reflect.StructOf refused the generated type")
		}
		rs := g.rules()
		m := crd.Meta{Group: "fuzz.example.com", Version: "v1", Kind: "Fuzz", Plural: "fuzzes", Scope: apiextensionsv1.NamespaceScoped}
		if g.byte()%5 == 0 {
			m = crd.Meta{Kind: "not a kind", Scope: "Everywhere"}
		}

		c, err := crd.Build(m, spec, status, rs)

		if err == nil {
			checkStructural(t, c)
			return
		}
		if c != nil {
			t.Errorf("Build returned a CRD and an error: %v", err)
		}
		names := []string{spec.String(), status.String()}
		for _, s := range g.structs {
			names = append(names, s.String())
		}
		for _, l := range leaves {
			names = append(names, l.String())
		}
		var joined interface{ Unwrap() []error }
		errs := []error{err}
		if errors.As(err, &joined) {
			errs = joined.Unwrap()
		}
		for _, e := range errs {
			msg := e.Error()
			if !strings.HasPrefix(msg, "kube: ") {
				t.Errorf("error %q isn't prefixed kube: ", msg)
			}
			if !containsAny(msg, names) && !strings.HasPrefix(msg, "kube: Resource.Rules[") {
				t.Errorf("error %q names none of the types", msg)
			}
		}
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// checkStructural checks crd's schema with the API server's own check of a
// structural schema.
func checkStructural(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	var internal apiextensions.JSONSchemaProps
	v1 := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, &internal, nil); err != nil {
		t.Fatalf("converting the schema: %v", err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatalf("the schema isn't structural: %v", err)
	}
	if errs := structuralschema.ValidateStructural(nil, s); len(errs) > 0 {
		t.Fatalf("the schema isn't structural: %v", errs.ToAggregate())
	}
}

// TestCRDIsStructural checks the Memcached-like and every-type schemas with
// the API server's structural check, offline.
func TestCRDIsStructural(t *testing.T) {
	type (
		Template struct {
			metav1.ObjectMeta `json:"metadata,omitempty"`
			Labels            map[string]string `json:"labels,omitempty"`
		}
		Every struct {
			Bool       bool                 `json:"bool"`
			Ints       []int8               `json:"ints"`
			Uint       *uint64              `json:"uint"`
			Float      float32              `json:"float"`
			Bytes      []byte               `json:"bytes"`
			Array      [2]string            `json:"array"`
			Map        map[string]fuzzBase  `json:"map"`
			Time       metav1.Time          `json:"time"`
			Duration   metav1.Duration      `json:"duration"`
			Quantity   resource.Quantity    `json:"quantity"`
			IntOrStr   *intstr.IntOrString  `json:"intOrStr"`
			Raw        runtime.RawExtension `json:"raw"`
			Template   Template             `json:"template"`
			Conditions []metav1.Condition   `json:"conditions,omitempty"`
			fuzzBase
		}
	)
	c, err := crd.Build(crd.Meta{Group: "every.example.com", Version: "v1", Kind: "Every", Plural: "everies", Scope: apiextensionsv1.ClusterScoped},
		reflect.TypeFor[Every](), reflect.TypeFor[Every](), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkStructural(t, c)
}
