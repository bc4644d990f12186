package kube

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

// FuzzDecode decodes objects from the cache, which hold whatever the API
// server sent, into an Object and a Namespace: decode never panics, an
// error it returns is "kube: decoding " and the object's name, and an
// object it decodes has the name, namespace and kind the unstructured one
// has.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"cache","namespace":"default","resourceVersion":"7","uid":"u-1"},"spec":{"size":3,"image":"memcached:1.6"},"status":{"readyReplicas":2,"conditions":[{"type":"Ready","status":"True","reason":"Up","message":"","lastTransitionTime":"2024-01-02T03:04:05Z"}]}}`))
	f.Add([]byte(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"cache","namespace":"default"},"spec":{"size":"three"}}`))
	f.Add([]byte(`{"kind":"Memcached","metadata":{"name":"cache","creationTimestamp":"yesterday"},"spec":{"size":1e40}}`))
	f.Add([]byte(`{"kind":"Memcached","metadata":{"name":7,"labels":["a"]},"status":{"conditions":{"type":"Ready"}}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system"},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}`))
	f.Add([]byte(`{"metadata":{"Name":"upper","name":"lower","NAMESPACE":"x"},"spec":null,"status":{"readyReplicas":-1}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil || m == nil {
			t.Skip("not a JSON object")
		}
		u := &unstructured.Unstructured{Object: m}
		c, err := cache.Compact(u.DeepCopy())
		if err != nil {
			// Metadata the API server never sends, such as a name that
			// isn't a string: the informer's list or watch fails with it.
			if !strings.HasPrefix(err.Error(), "kube: caching ") {
				t.Errorf("compact: error %q doesn't start with %q", err, "kube: caching ")
			}
			return
		}
		o := c.(*cache.Object)
		check := func(into string, err error, name, namespace, kind string) {
			t.Helper()
			if err != nil {
				if prefix := "kube: decoding " + control.Describe(o) + ": "; !strings.HasPrefix(err.Error(), prefix) {
					t.Errorf("decoding into %s: error %q doesn't start with %q", into, err, prefix)
				}
				return
			}
			// encoding/json matches a key to a field whatever its case, so
			// an object without "name" may still decode one from "Name":
			// only the unstructured object's own values are compared.
			for _, c := range []struct{ field, got, want string }{
				{"name", name, u.GetName()},
				{"namespace", namespace, u.GetNamespace()},
				{"kind", kind, u.GetKind()},
			} {
				if c.want != "" && c.got != c.want {
					t.Errorf("decoding into %s: %s = %q, want %q", into, c.field, c.got, c.want)
				}
			}
		}

		var obj Object[cacheSpec, cacheStatus]
		err = control.Decode(o, &obj)
		check("an Object", err, obj.Name, obj.Namespace, obj.Kind)

		var ns corev1.Namespace
		err = control.Decode(o, &ns)
		check("a Namespace", err, ns.Name, ns.Namespace, ns.Kind)
	})
}

// FuzzOwnerKey maps owned objects, whose owner references anyone who can
// write them sets, to their owner's key: the key is the owner's only when
// the object's controller reference, the first one with controller: true,
// names the controller's kind in its group, and then it is the object's
// namespace and the owner's name (the name alone for a cluster-scoped
// owner). A tombstone of the object maps to the same key.
func FuzzOwnerKey(f *testing.F) {
	f.Add("default", "cache.example.com/v1alpha1", "Memcached", "cache", uint8(2), uint8(0))
	f.Add("default", "cache.example.com/v1alpha1", "Memcached", "cache", uint8(1), uint8(1))
	f.Add("default", "cache.example.com/v1alpha1", "Memcached", "cache", uint8(2), uint8(2))
	f.Add("default", "cache.example.com", "Memcached", "cache", uint8(2), uint8(0))
	f.Add("default", "cache.example.com/v1/beta", "Memcached", "cache", uint8(2), uint8(0))
	f.Add("", "other.example.com/v1", "Memcached", "cache", uint8(2), uint8(0))
	f.Add("ns", "cache.example.com/", "memcached", "", uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, namespace, apiVersion, kind, name string, controller, before uint8) {
		yes, no := true, false
		ref := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name}
		switch controller % 3 {
		case 1:
			ref.Controller = &no
		case 2:
			ref.Controller = &yes
		}
		var refs []metav1.OwnerReference
		switch before % 3 {
		case 1: // an owner of the controller's kind, but not the controller
			refs = append(refs, metav1.OwnerReference{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "decoy"})
		case 2: // another controller, first
			refs = append(refs, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "decoy", Controller: &yes})
		}
		refs = append(refs, ref)
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "child", OwnerReferences: refs}}

		// The controller reference is the first with controller: true.
		var ctrl *metav1.OwnerReference
		for i := range refs {
			if c := refs[i].Controller; c != nil && *c {
				ctrl = &refs[i]
				break
			}
		}
		group, version, hasSlash := strings.Cut(apiVersion, "/")
		wantOK := ctrl == &refs[len(refs)-1] && kind == "Memcached" &&
			hasSlash && group == "cache.example.com" && !strings.Contains(version, "/")

		for _, scope := range []Scope{Namespaced, Cluster} {
			c := &control.Controller{Kind: "Memcached", Group: "cache.example.com", Scope: control.Scope(scope)}
			wantKey := namespace + "/" + name
			if scope == Cluster {
				wantKey = name
			}
			for _, o := range []any{obj, toolscache.DeletedFinalStateUnknown{Key: "k", Obj: obj}} {
				key, ok := c.OwnerKey(o)
				if ok != wantOK {
					t.Fatalf("%s ownerKey(%T with owners %+v) ok = %v, want %v", scope, o, refs, ok, wantOK)
				}
				if ok && key != wantKey {
					t.Errorf("%s ownerKey(%T with owners %+v) = %q, want %q", scope, o, refs, key, wantKey)
				}
			}
		}
	})
}

// FuzzResourceVersion compares resourceVersions, which the API server
// sends and a cache holds: writtenVersions never panics; a cache that holds
// the write's own resourceVersion isn't behind it; and of two decimal
// resourceVersions a < b, a cache at a is behind a write at b, and a cache
// at b isn't behind a write at a.
func FuzzResourceVersion(f *testing.F) {
	f.Add("default/cache", "7", "8")
	f.Add("default/cache", "9", "10")
	f.Add("default/cache", "99999999999999999999", "100000000000000000000")
	f.Add("k", "0", "1")
	f.Add("k", "007", "7")
	f.Add("k", "", "12")
	f.Add("", "-3", "abc")
	f.Add("k", "18446744073709551615", "18446744073709551616")
	f.Fuzz(func(t *testing.T, key, rv1, rv2 string) {
		for _, rv := range []string{rv1, rv2} {
			var w control.WrittenVersions
			w.Wrote(key, rv, nil)
			if isAhead(&w, key, rv) {
				t.Errorf("after wrote(%q, %q), ahead(%q, %q) = true, want false", key, rv, key, rv)
			}
		}

		a, aOK := decimalRV(rv1)
		b, bOK := decimalRV(rv2)
		if !aOK || !bOK || a.Cmp(b) == 0 {
			return
		}
		lo, hi := rv1, rv2
		if a.Cmp(b) > 0 {
			lo, hi = rv2, rv1
		}
		var w control.WrittenVersions
		w.Wrote(key, hi, nil)
		if !isAhead(&w, key, lo) {
			t.Errorf("after wrote(%q, %q), ahead(%q, %q) = false, want true", key, hi, key, lo)
		}
		var w2 control.WrittenVersions
		w2.Wrote(key, lo, nil)
		if isAhead(&w2, key, hi) {
			t.Errorf("after wrote(%q, %q), ahead(%q, %q) = true, want false", key, lo, key, hi)
		}
	})
}

// decimalRV parses a resourceVersion as the API server writes one: a
// positive decimal integer, of any length, without leading zeros.
func decimalRV(s string) (*big.Int, bool) {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Sign() <= 0 || n.String() != s {
		return nil, false
	}
	return n, true
}

// isAhead is aheadFor's verdict alone.
func isAhead(w *control.WrittenVersions, key, cached string) bool {
	_, ahead := w.AheadFor(key, cached)
	return ahead
}
