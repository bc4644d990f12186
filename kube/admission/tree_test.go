package admission

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"github.com/z5labs/humus/kube"
)

// What encoding/json's rules make of a struct, each one a way jsonValue
// could differ from encoding and decoding.
type (
	treeInner struct {
		A string `json:"a,omitempty"`
		B int    `json:"b"`
	}
	treeHidden struct {
		Hidden string `json:"hidden"`
	}
	treeZeroer struct{ N int }
	treeQuoted struct {
		N int `json:"n,string"`
	}
	treeText int
	treePtr  struct{ N int }
	treeEdge struct {
		treeInner                                             // inlined
		*treeHidden                                           // through a pointer: left out when nil
		Tagged      treeInner                                 `json:"tagged"`
		Quoted      treeQuoted                                `json:"quoted"` // encoded whole
		Zero        time.Time                                 `json:"zero,omitzero"`
		ZeroPtr     *metav1.Time                              `json:"zeroPtr,omitzero"`
		Zeroer      treeZeroer                                `json:"zeroer,omitzero"`
		Empty       []string                                  `json:"empty,omitempty"`
		Nil         []string                                  `json:"nil"`
		Bytes       []byte                                    `json:"bytes"`
		Array       [2]byte                                   `json:"array"`
		Float       float64                                   `json:"float"`
		Number      json.Number                               `json:"number"`
		Raw         json.RawMessage                           `json:"raw"`
		Invalid     string                                    `json:"invalid"`
		Any         any                                       `json:"any"`
		IntKeys     map[int]string                            `json:"intKeys"`
		Texts       map[string]treeText                       `json:"texts"`
		Quantities  map[corev1.ResourceName]resource.Quantity `json:"quantities"`
		Ptr         treePtr                                   `json:"ptr"`
		Big         uint64                                    `json:"big"`
		Skipped     string                                    `json:"-"`
		unexported  string
	}
)

func (z treeZeroer) IsZero() bool { return z.N < 0 }

func (p *treePtr) MarshalJSON() ([]byte, error) { return fmt.Appendf(nil, `"p%d"`, p.N), nil }

func (t treeText) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "t%d", int(t)), nil }

// filler fills Kubernetes' kinds at random, each value of a type that
// encodes itself one it encodes.
func filler() *randfill.Filler {
	return randfill.NewWithSeed(1).NilChance(0.2).NumElements(0, 3).MaxDepth(12).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
		},
		func(tm *metav1.Time, c randfill.Continue) {
			*tm = metav1.NewTime(time.Unix(c.Int63n(1<<33), 0))
		},
		func(tm *metav1.MicroTime, c randfill.Continue) {
			*tm = metav1.NewMicroTime(time.Unix(c.Int63n(1<<33), c.Int63n(1e9)))
		},
		func(x *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*x = intstr.FromInt32(c.Int31())
			} else {
				*x = intstr.FromString(c.String(8))
			}
		},
		func(r *runtime.RawExtension, c randfill.Continue) {
			r.Raw = fmt.Appendf(nil, `{"n":%d}`, c.Int63())
		},
		func(fv *metav1.FieldsV1, c randfill.Continue) {
			*fv = *metav1.NewFieldsV1(`{"f:spec":{}}`)
		},
	)
}

// TestJSONValueIsTheEncodingDecoded: jsonValue gives what encoding a value
// with encoding/json and decoding it with UseNumber gives, for Kubernetes'
// own kinds filled at random, a kube.Object, and each of encoding/json's
// rules; the defaulting webhook's patch is computed from it in place of
// those two.
func TestJSONValueIsTheEncodingDecoded(t *testing.T) {
	f := filler()
	same := func(t *testing.T, v any) {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := decodeJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := jsonOf(v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			t.Errorf("jsonValue of the %T isn't its encoding decoded:\n got %s\nwant %s", v, g, b)
		}
	}
	for i := range 200 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var pod corev1.Pod
			f.Fill(&pod)
			same(t, &pod)
			var d appsv1.Deployment
			f.Fill(&d)
			same(t, &d)
			var o kube.Object[treeInner, treeInner]
			f.Fill(&o)
			same(t, &o)
		})
	}
	r := rand.New(rand.NewSource(1))
	for _, e := range []treeEdge{
		{},
		{
			treeInner: treeInner{A: "a", B: 1}, treeHidden: &treeHidden{Hidden: "h"},
			Quoted: treeQuoted{N: 3}, Zero: time.Unix(5, 0).UTC(), ZeroPtr: &metav1.Time{}, Zeroer: treeZeroer{N: -1},
			Empty: []string{}, Bytes: []byte("bytes"), Array: [2]byte{1, 2}, Float: 1e21 + r.Float64(),
			Number: "12.50", Raw: json.RawMessage(`{"x": [1, 2.0]}`), Invalid: "a\xffb",
			Any: map[string]any{"n": 1.5, "s": []any{"x", nil, true}}, IntKeys: map[int]string{2: "b", 1: "a"},
			Texts: map[string]treeText{"k": 4}, Quantities: corev1.ResourceList{"cpu": resource.MustParse("1500m")},
			Big: 1<<64 - 1, Skipped: "skipped", unexported: "unexported",
		},
	} {
		same(t, &e)
		same(t, e) // not addressable: the pointer's methods don't count
	}
}
