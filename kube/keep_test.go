package kube

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube/internal/merge"
)

type (
	keepServerV1alpha1 struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
	keepServerV1beta1 struct {
		Name  string `json:"name"`
		Image string `json:"image"`
		Port  int32  `json:"port,omitempty"`
	}
	keepSpecV1alpha1 struct {
		Servers []keepServerV1alpha1 `json:"servers,omitempty"`
	}
	keepSpecV1beta1 struct {
		Servers []keepServerV1beta1 `json:"servers,omitempty"`
	}
	keepStatus struct{}
)

// keepVersions is a resource whose v1beta1, the hub, adds a port to each
// server of v1alpha1's; m, when not nil, is the merge its conversions
// keep v1beta1's fields by.
func keepVersions(m func(cur, kept, lossy any, lists *merge.Lists) any) Versions[keepSpecV1beta1, keepStatus] {
	alpha := Resource[keepSpecV1alpha1, keepStatus]{Group: "keep.example.com", Version: "v1alpha1", Kind: "Pool", Plural: "pools", Scope: Namespaced}
	beta := Resource[keepSpecV1beta1, keepStatus]{Group: "keep.example.com", Version: "v1beta1", Kind: "Pool", Plural: "pools", Scope: Namespaced}
	other := VersionOf(alpha,
		func(in Object[keepSpecV1alpha1, keepStatus]) (Object[keepSpecV1beta1, keepStatus], error) {
			out := Object[keepSpecV1beta1, keepStatus]{ObjectMeta: in.ObjectMeta}
			for _, s := range in.Spec.Servers {
				out.Spec.Servers = append(out.Spec.Servers, keepServerV1beta1{Name: s.Name, Image: s.Image})
			}
			return out, nil
		},
		func(in Object[keepSpecV1beta1, keepStatus]) (Object[keepSpecV1alpha1, keepStatus], error) {
			out := Object[keepSpecV1alpha1, keepStatus]{ObjectMeta: in.ObjectMeta}
			for _, s := range in.Spec.Servers {
				out.Spec.Servers = append(out.Spec.Servers, keepServerV1alpha1{Name: s.Name, Image: s.Image})
			}
			return out, nil
		})
	other.conv.merge = m
	return Versions[keepSpecV1beta1, keepStatus]{
		Hub:     beta,
		Others:  []Version[keepSpecV1beta1, keepStatus]{other},
		Storage: "v1beta1",
		Webhook: ConversionWebhook{URL: "https://keep.example.com/convert"},
	}
}

// wholeLists is the merge conversions kept fields by before lists were
// merged item by item: a list changed at the old version was taken whole.
func wholeLists(cur, kept, lossy any, _ *merge.Lists) any {
	v, _ := wholeLists3(cur, kept, lossy, true, true, true)
	return v
}

func wholeLists3(cur, kept, lossy any, hasCur, hasKept, hasLossy bool) (any, bool) {
	if hasKept == hasLossy && reflect.DeepEqual(kept, lossy) {
		return cur, hasCur
	}
	cm, cok := cur.(map[string]any)
	km, kok := kept.(map[string]any)
	lm, lok := lossy.(map[string]any)
	if cok && kok && (lok || !hasLossy) {
		out := map[string]any{}
		for _, m := range []map[string]any{cm, km, lm} {
			for k := range m {
				c, hc := cm[k]
				kv, hk := km[k]
				l, hl := lm[k]
				if v, ok := wholeLists3(c, kv, l, hc, hk, hl); ok {
					out[k] = v
				}
			}
		}
		return out, true
	}
	if hasCur == hasLossy && reflect.DeepEqual(cur, lossy) {
		return kept, hasKept
	}
	return cur, hasCur
}

// TestRoundTripChangedCatchesAListTakenWhole: RoundTrip changes a leaf at
// the old version, and fails on a merge that loses the hub-only fields of
// a list's other items, naming them; it passes on the module's merge.
func TestRoundTripChangedCatchesAListTakenWhole(t *testing.T) {
	example := Object[keepSpecV1beta1, keepStatus]{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: keepSpecV1beta1{Servers: []keepServerV1beta1{
			{Name: "a", Image: "memcached:1", Port: 11211},
			{Name: "b", Image: "memcached:1", Port: 11212},
		}},
	}
	if err := RoundTrip(keepVersions(nil), example); err != nil {
		t.Errorf("with merge.Values: %v", err)
	}
	err := RoundTrip(keepVersions(wholeLists), example)
	for _, want := range []string{
		`kube: RoundTrip: v1beta1 example 0 (ns/p) at v1alpha1 and back, with spec.servers[0].image changed at v1alpha1: spec.servers[0].port was 11211, came back without it`,
		`spec.servers[1].port was 11212, came back without it`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("with lists merged whole, the error doesn't say %q:\n%v", want, err)
		}
	}
}
