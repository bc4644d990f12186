package clustertest

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// changedCRD is gadgetCRD(plural, "Change") changed as a new release of a
// controller might change it: spec.size defaults to large, spec.color is
// new, a version v2 is served beside v1, and it has a short name and a
// label.
func changedCRD(plural string) *apiextensionsv1.CustomResourceDefinition {
	crd := gadgetCRD(plural, "Change")
	crd.Labels = map[string]string{"release": "2"}
	crd.Spec.Names.ShortNames = []string{"chg"}
	v1 := &crd.Spec.Versions[0]
	spec := v1.Schema.OpenAPIV3Schema.Properties["spec"]
	size := spec.Properties["size"]
	size.Default = &apiextensionsv1.JSON{Raw: []byte(`"large"`)}
	spec.Properties["size"] = size
	spec.Properties["color"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	v1.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	v2 := *v1.DeepCopy()
	v2.Name, v2.Storage = "v2", false
	crd.Spec.Versions = append(crd.Spec.Versions, v2)
	return crd
}

// TestClusterInstallUpdates pins Install's keeping of a stale CRD: given
// a CRD of a name that is there already, with another spec, it used to
// keep the old one, so a test ran against the old schema. The API server
// must hold the new spec once Install returns, and serve it.
func TestClusterInstallUpdates(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	const plural = "changes"
	old := c.InstallCRD(t, gadgetCRD(plural, "Change"))

	want := changedCRD(plural)
	c.Install(t, crdResource{crd: want})
	crds, err := c.crdClient()
	if err != nil {
		t.Fatal(err)
	}
	got, err := crds.Get(t.Context(), want.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != old.UID {
		t.Errorf("the CRD's uid is %s, want %s's: updated, not deleted and created", got.UID, old.UID)
	}
	if len(got.Spec.Versions) != 2 {
		t.Fatalf("the API server holds versions %+v, want v1 and v2", got.Spec.Versions)
	}
	for i, v := range got.Spec.Versions {
		w := want.Spec.Versions[i]
		if v.Name != w.Name || v.Served != w.Served || v.Storage != w.Storage ||
			!equality.Semantic.DeepEqual(v.Schema.OpenAPIV3Schema, w.Schema.OpenAPIV3Schema) {
			t.Errorf("the API server holds version %s (served %t, storage %t) with schema\n%+v\nwant %s (served %t, storage %t) with\n%+v",
				v.Name, v.Served, v.Storage, v.Schema.OpenAPIV3Schema, w.Name, w.Served, w.Storage, w.Schema.OpenAPIV3Schema)
		}
	}
	if got.Labels["release"] != "2" || len(got.Status.AcceptedNames.ShortNames) != 1 || got.Status.AcceptedNames.ShortNames[0] != "chg" {
		t.Errorf("the CRD's labels %v, accepted short names %v; want release=2, [chg]", got.Labels, got.Status.AcceptedNames.ShortNames)
	}

	// Served as it is now held: the new default, and the new version.
	for _, version := range []string{"v1", "v2"} {
		gvr := schema.GroupVersionResource{Group: widgets.Group, Version: version, Resource: plural}
		obj := widget(ns, "one-"+version, map[string]any{"color": "red"})
		obj.SetAPIVersion(gvr.GroupVersion().String())
		obj.SetKind("Change")
		created, err := dynamicClient(t, c).Resource(gvr).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating a Change through %s at once after Install: %v", version, err)
		}
		size, _, _ := unstructured.NestedString(created.Object, "spec", "size")
		color, _, _ := unstructured.NestedString(created.Object, "spec", "color")
		if size != "large" || color != "red" {
			t.Errorf("the Change created through %s has spec.size %q, spec.color %q; want the new default, large, and red kept", version, size, color)
		}
	}

	// The same spec again writes nothing.
	c.Install(t, crdResource{crd: changedCRD(plural)})
	again, err := crds.Get(t.Context(), want.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != got.ResourceVersion || again.Generation != got.Generation {
		t.Errorf("installing the same CRD again moved it from resourceVersion %s, generation %d to %s, %d",
			got.ResourceVersion, got.Generation, again.ResourceVersion, again.Generation)
	}
}
