package kubeconfigtest

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus/kube/clustertest"
)

// sparesCRD is the name of the CRD the existing cluster holds before
// TestClusterKubeconfigInstallUpdates.
const sparesCRD = "spares.kubeconfig.humus.test"

// updated is whether TestClusterKubeconfigInstallUpdates updated it.
var updated bool

// spareCRD is a namespaced Spare of any fields, or, changed, one whose
// spec.size defaults to large.
func spareCRD(changed bool) *apiextensionsv1.CustomResourceDefinition {
	props := &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}
	if changed {
		props = &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"size": {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"large"`)}},
			}},
		}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: sparesCRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kubeconfig.humus.test",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "spares", Kind: "Spare"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: props},
			}},
		},
	}
}

// TestClusterKubeconfigInstallUpdates finds a CRD on the existing cluster
// from before the run, of an earlier schema: Install must bring it to the
// new one, and leave it there at Run's end (TestMain checks), since it
// didn't create it.
func TestClusterKubeconfigInstallUpdates(t *testing.T) {
	c := clustertest.Get(t)
	client, err := apiextensions.NewForConfig(existing.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(t.Context(), spareCRD(false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Install(t, resource{spareCRD(true)})
	updated = true

	got, err := crds.Get(t.Context(), sparesCRD, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	props := got.Spec.Versions[0].Schema.OpenAPIV3Schema
	if size := props.Properties["spec"].Properties["size"]; props.XPreserveUnknownFields != nil || size.Default == nil || string(size.Default.Raw) != `"large"` {
		t.Errorf("the API server holds the schema %+v, want the new one: spec.size defaulting to large", props)
	}
	ns := c.Namespace(t)
	dyn, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "kubeconfig.humus.test", Version: "v1", Resource: "spares"}
	spare, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeconfig.humus.test/v1", "kind": "Spare", "metadata": map[string]any{"name": "one"}, "spec": map[string]any{},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedString(spare.Object, "spec", "size"); size != "large" {
		t.Errorf("a Spare created at once has spec.size %q, want the new schema's default, large", size)
	}
}

// resource is a Resource of crd.
type resource struct {
	crd *apiextensionsv1.CustomResourceDefinition
}

func (r resource) CRD() (*apiextensionsv1.CustomResourceDefinition, error) { return r.crd, nil }
