package kube_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// TestClusterVersionsMergeListItems: on the real control plane, a Pool
// written at v1beta1 with two servers, each with a port only v1beta1 has,
// updated and applied at v1alpha1, as an old client or kubectl at that
// version would, keeps every server's port: a change to one server, a
// server removed and one added leave the other servers' ports as they
// were, read back from the API server at v1beta1. Its servers are paired
// by their name, which no schema declares, and by a host the schema
// declares their list-map key.
func TestClusterVersionsMergeListItems(t *testing.T) {
	c := clustertest.Get(t)
	d := dynamic.NewForConfigOrDie(c.AdminConfig())
	for _, tc := range []struct {
		name, group, id string
		install         func(t *testing.T, group string)
	}{{
		name: "by name", group: "merge-named.example.com", id: "name",
		install: func(t *testing.T, group string) {
			c.Install(t, serveWebhook(t, humustest.NewTelemetry(), namedPools(group)))
		},
	}, {
		name: "by ListMap keys", group: "merge-keyed.example.com", id: "host",
		install: func(t *testing.T, group string) {
			c.Install(t, serveWebhook(t, humustest.NewTelemetry(), hostPools(group, "host")))
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.install(t, tc.group)
			ns := c.Namespace(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			p := pool{
				beta:  d.Resource(schema.GroupVersionResource{Group: tc.group, Version: "v1beta1", Resource: "pools"}).Namespace(ns),
				alpha: d.Resource(schema.GroupVersionResource{Group: tc.group, Version: "v1alpha1", Resource: "pools"}).Namespace(ns),
				group: tc.group, ns: ns, id: tc.id,
			}
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": tc.group + "/v1beta1", "kind": "Pool",
				"metadata": map[string]any{"name": "p"},
				"spec":     map[string]any{"servers": []any{p.server("a", "memcached:1", 11211), p.server("b", "memcached:1", 11212)}},
			}}
			if _, err := p.beta.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}

			p.edit(ctx, t, func(ss []any) []any { ss[1].(map[string]any)["image"] = "memcached:2"; return ss })
			p.check(ctx, t, "b's image changed at v1alpha1", p.server("a", "memcached:1", 11211), p.server("b", "memcached:2", 11212))

			p.apply(ctx, t, p.server("a", "memcached:3", 0), p.server("b", "memcached:2", 0))
			p.check(ctx, t, "a's image applied at v1alpha1", p.server("a", "memcached:3", 11211), p.server("b", "memcached:2", 11212))

			p.edit(ctx, t, func(ss []any) []any { return ss[1:] })
			p.check(ctx, t, "a removed at v1alpha1", p.server("b", "memcached:2", 11212))

			p.edit(ctx, t, func(ss []any) []any { return append(ss, p.server("c", "memcached:1", 0)) })
			p.check(ctx, t, "c added at v1alpha1", p.server("b", "memcached:2", 11212), p.server("c", "memcached:1", 0))
		})
	}
}

// pool is the Pool p in a namespace, at v1beta1 and at v1alpha1, whose
// servers are told apart by their field id.
type pool struct {
	beta, alpha   dynamic.ResourceInterface
	group, ns, id string
}

// server is a server as the API server returns it; port 0 for none.
func (p pool) server(id, image string, port int64) any {
	s := map[string]any{p.id: id, "image": image}
	if port != 0 {
		s["port"] = port
	}
	return s
}

// check reads p at v1beta1 from the API server, and wants its servers,
// and no annotation.
func (p pool) check(ctx context.Context, t *testing.T, what string, want ...any) {
	t.Helper()
	got, err := p.beta.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have, _, _ := unstructured.NestedSlice(got.Object, "spec", "servers")
	if !reflect.DeepEqual(have, want) {
		t.Errorf("%s, at v1beta1: servers %v, want %v", what, have, want)
	}
	if a := got.GetAnnotations(); len(a) != 0 {
		t.Errorf("%s, at v1beta1: annotations %v, want none", what, a)
	}
}

// edit updates p at v1alpha1, its servers changed by change, as kubectl
// edit would.
func (p pool) edit(ctx context.Context, t *testing.T, change func(servers []any) []any) {
	t.Helper()
	u, err := p.alpha.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ss, _, _ := unstructured.NestedSlice(u.Object, "spec", "servers")
	for _, s := range ss {
		if _, ok := s.(map[string]any)["port"]; ok {
			t.Fatalf("p at v1alpha1 has a port: %v", ss)
		}
	}
	if err := unstructured.SetNestedSlice(u.Object, change(ss), "spec", "servers"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.alpha.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// apply applies p at v1alpha1 with servers, as an old client's field
// manager.
func (p pool) apply(ctx context.Context, t *testing.T, servers ...any) {
	t.Helper()
	applied := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": p.group + "/v1alpha1", "kind": "Pool",
		"metadata": map[string]any{"name": "p", "namespace": p.ns},
		"spec":     map[string]any{"servers": servers},
	}}
	if _, err := p.alpha.Apply(ctx, "p", applied, metav1.ApplyOptions{FieldManager: "old-client", Force: true}); err != nil {
		t.Fatal(err)
	}
}
