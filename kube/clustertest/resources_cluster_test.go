package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// widgets is the resource of widgetCRD.
var widgets = schema.GroupVersionResource{Group: "cluster.humus.test", Version: "v1", Resource: "widgets"}

// widgetCRD is a namespaced Widget whose spec.replicas lies in [1, 5]
// and defaults to 1, and whose spec.size is small or large and defaults
// to small.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: widgets.Resource + "." + widgets.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgets.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: widgets.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {
							Type:    "object",
							Default: &apiextensionsv1.JSON{Raw: []byte(`{}`)},
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"replicas": {
									Type: "integer", Format: "int32",
									Minimum: new(1.0), Maximum: new(5.0),
									Default: &apiextensionsv1.JSON{Raw: []byte(`1`)},
								},
								"size": {
									Type:    "string",
									Enum:    []apiextensionsv1.JSON{{Raw: []byte(`"small"`)}, {Raw: []byte(`"large"`)}},
									Default: &apiextensionsv1.JSON{Raw: []byte(`"small"`)},
								},
							},
						},
						"status": {
							Type:       "object",
							Properties: map[string]apiextensionsv1.JSONSchemaProps{"ready": {Type: "boolean"}},
						},
					},
				}},
			}},
		},
	}
}

// widget is a Widget named name in ns with the spec fields given.
func widget(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgets.GroupVersion().String(),
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
}

func dynamicClient(t testing.TB, c *Cluster) dynamic.Interface {
	t.Helper()
	client, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func TestClusterCustomResource(t *testing.T) {
	c := Get(t)
	crd := c.InstallCRD(t, widgetCRD())
	if got := crd.Status.AcceptedNames.Kind; got != "Widget" {
		t.Errorf("accepted kind = %q, want Widget", got)
	}
	ns := c.Namespace(t)
	client := dynamicClient(t, c).Resource(widgets).Namespace(ns)
	apply := func(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return client.Apply(t.Context(), obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "cluster-test"})
	}

	t.Run("server-side apply with defaults", func(t *testing.T) {
		if _, err := apply(widget(ns, "three", map[string]any{"replicas": int64(3)})); err != nil {
			t.Fatal(err)
		}
		if _, err := apply(widget(ns, "empty", map[string]any{})); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]map[string]any{
			"three": {"replicas": int64(3), "size": "small"},
			"empty": {"replicas": int64(1), "size": "small"},
		} {
			got, err := client.Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			spec, _, _ := unstructured.NestedMap(got.Object, "spec")
			if fmt.Sprint(spec) != fmt.Sprint(want) {
				t.Errorf("widget %s holds spec %v, want %v", name, spec, want)
			}
			managers := got.GetManagedFields()
			if len(managers) != 1 || managers[0].Manager != "cluster-test" || managers[0].Operation != metav1.ManagedFieldsOperationApply {
				t.Errorf("widget %s's managed fields = %+v, want one Apply by cluster-test", name, managers)
			}
		}
	})

	t.Run("rules enforced", func(t *testing.T) {
		_, err := apply(widget(ns, "three", map[string]any{"replicas": int64(0), "size": "medium"}))
		if !apierrors.IsInvalid(err) {
			t.Fatalf("applying replicas 0, size medium: %v, want Invalid", err)
		}
		for _, want := range []string{
			"spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
			`spec.size: Unsupported value: "medium": supported values: "small", "large"`,
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		got, err := client.Get(t.Context(), "three", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if replicas, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); replicas != 3 {
			t.Errorf("after the refused apply widget three has %d replicas, want 3", replicas)
		}
	})
}

func TestClusterGarbageCollection(t *testing.T) {
	c := Get(t)
	c.InstallCRD(t, widgetCRD())
	ns := c.Namespace(t)
	widgetsClient := dynamicClient(t, c).Resource(widgets).Namespace(ns)
	client := adminClient(t, c)

	owner, err := widgetsClient.Apply(t.Context(), "owner", widget(ns, "owner", map[string]any{}), metav1.ApplyOptions{FieldManager: "cluster-test"})
	if err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, client, ns, "owned", []metav1.OwnerReference{{
		APIVersion: widgets.GroupVersion().String(), Kind: "Widget", Name: owner.GetName(), UID: owner.GetUID(),
		Controller: new(true), BlockOwnerDeletion: new(true),
	}})
	createConfigMap(t, client, ns, "unowned", nil)

	if err := widgetsClient.Delete(t.Context(), "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The garbage collector learns of a new custom resource at its next
	// discovery sync, every 30s, and backs off while it can't map it.
	Eventually(t, 3*time.Minute, func(context.Context) error {
		_, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), "owned", metav1.GetOptions{})
		return Gone("the ConfigMap owned by the deleted Widget", err)
	})
	if _, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), "unowned", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap with no owner: %v, want it kept", err)
	}
}

func TestClusterNamespaceDeletion(t *testing.T) {
	c := Get(t)
	c.InstallCRD(t, widgetCRD())
	ns := c.Namespace(t)
	client := adminClient(t, c)
	createConfigMap(t, client, ns, "config", nil)
	if _, err := client.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "secret"}, StringData: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dynamicClient(t, c).Resource(widgets).Namespace(ns).Apply(t.Context(), "widget", widget(ns, "widget", map[string]any{}), metav1.ApplyOptions{FieldManager: "cluster-test"}); err != nil {
		t.Fatal(err)
	}

	if err := client.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 2*time.Minute, func(context.Context) error {
		got, err := client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		default:
			return fmt.Errorf("namespace %s is still %s: %+v", ns, got.Status.Phase, got.Status.Conditions)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cms, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(cms.Items) != 0 {
		t.Errorf("ConfigMaps left in deleted namespace %s: %v (%v)", ns, cms, err)
	}
}
