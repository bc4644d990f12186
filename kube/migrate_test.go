package kube_test

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus/kube"
)

// A Migrate pass whose continue token expires (a 410 Gone, as etcd's
// compaction makes on a pass longer than its interval) goes on with the
// token the 410 offers for the rest, rewriting each object once, where
// it failed and a rerun started over (issue 44, suspected, proven).
func TestMigrateGoesOnPastAnExpiredContinueToken(t *testing.T) {
	v := memcachedVersions()
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvr := schema.GroupVersionResource{Group: "cache.example.com", Version: "v1beta1", Resource: "memcacheds"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "memcacheds.cache.example.com"},
		"spec": map[string]any{"versions": []any{
			map[string]any{"name": "v1alpha1", "storage": false}, map[string]any{"name": "v1beta1", "storage": true},
		}},
		"status": map[string]any{"storedVersions": []any{"v1alpha1", "v1beta1"}},
	}}
	obj := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cache.example.com/v1beta1", "kind": "Memcached",
			"metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": "1"},
		}}
	}
	d := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crds: "CustomResourceDefinitionList", gvr: "MemcachedList"}, crd, obj("a"), obj("b"), obj("c"))
	// A page of a, then its token expired, offering another for b and c.
	// (client-go's fake drops a list's options but its selectors, so the
	// pages go by the call.)
	var lists int
	d.PrependReactor("list", "memcacheds", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		page := func(next string, names ...string) *unstructured.UnstructuredList {
			l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "cache.example.com/v1beta1", "kind": "MemcachedList"}}
			for _, n := range names {
				l.Items = append(l.Items, *obj(n))
			}
			l.SetContinue(next)
			return l
		}
		switch lists {
		case 1:
			return true, page("1", "a"), nil
		case 2:
			gone := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result.")
			gone.ErrStatus.Continue = "2"
			return true, nil, gone
		case 3:
			return true, page("", "b", "c"), nil
		}
		return true, nil, errors.New("no such page")
	})
	var updates []string
	d.PrependReactor("update", "memcacheds", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		updates = append(updates, u.GetName())
		u.SetResourceVersion("2")
		return true, u, nil
	})
	var last kube.Migration
	if err := v.Migrate(context.Background(), d, func(m kube.Migration) { last = m }); err != nil {
		t.Fatalf("Migrate = %v, want it past the expired token", err)
	}
	if len(updates) != 3 || !last.Done || last.Rewritten != 3 {
		t.Errorf("rewritten %v, last progress %+v; want a, b and c once each, done", updates, last)
	}
	if lists != 3 {
		t.Errorf("lists = %d, want 3: a's page, the expired token's, the rest", lists)
	}
	got, err := d.Resource(crds).Get(context.Background(), "memcacheds.cache.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored, _, _ := unstructured.NestedStringSlice(got.Object, "status", "storedVersions"); len(stored) != 1 || stored[0] != "v1beta1" {
		t.Errorf("storedVersions = %v, want [v1beta1]", stored)
	}
}
