package kube_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
)

// installed is a CRD the API server has accepted and serves.
type installed struct {
	crd              *apiextensionsv1.CustomResourceDefinition
	objects          dynamic.ResourceInterface // in namespace, for a namespaced resource
	namespace        string
	apiVersion, kind string
}

// install reflects r's CRD, creates it with fieldValidation=Strict, waits
// until it is served, and deletes it at cleanup.
func install[Spec, Status any](t *testing.T, r kube.Resource[Spec, Status]) installed {
	t.Helper()
	c := clustertest.Get(t)
	crd, err := r.CRD()
	if err != nil {
		t.Fatalf("CRD(): %v", err)
	}
	ctx := t.Context()
	ext, err := apiextensionsclient.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		t.Fatalf("creating the CRD %s: %v", crd.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the CRD %s: %v", crd.Name, err)
		}
	})

	in := installed{apiVersion: r.Group + "/" + r.Version, kind: r.Kind}
	objects := dyn.Resource(r.GVR())
	in.objects = objects
	if r.Scope == kube.Namespaced {
		in.namespace = c.Namespace(t)
		in.objects = objects.Namespace(in.namespace)
	}

	in.crd = c.AwaitCRD(t, crd.Name)
	return in
}

// object is an object of in, named name, with spec.
func (in installed) object(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": in.apiVersion,
		"kind":       in.kind,
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	if in.namespace != "" {
		u.SetNamespace(in.namespace)
	}
	return u
}

func (in installed) create(t *testing.T, name string, spec map[string]any) (*unstructured.Unstructured, error) {
	t.Helper()
	return in.objects.Create(t.Context(), in.object(name, spec), metav1.CreateOptions{FieldValidation: "Strict"})
}

// mustCreate creates an object that the API server must accept.
func (in installed) mustCreate(t *testing.T, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	u, err := in.create(t, name, spec)
	if err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	return u
}

// refused checks the API server refuses the object, with each of want in
// its message.
func (in installed) refused(t *testing.T, name string, spec map[string]any, want ...string) {
	t.Helper()
	_, err := in.create(t, name, spec)
	if err == nil {
		t.Errorf("creating %s with spec %v: accepted, want refused with %q", name, spec, want)
		return
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Errorf("creating %s: %v, want an invalid object", name, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("creating %s: %v\nwant the message to contain %q", name, err, w)
		}
	}
}

// TestClusterMemcachedCRD checks that the proposal's Memcached CRD, as CRD
// reflects it, is accepted with fieldValidation=Strict, becomes
// Established, and that the API server enforces its rules with the messages
// the proposal quotes, and defaults image.
func TestClusterMemcachedCRD(t *testing.T) {
	r := Memcached
	r.Group = "memcached.crd.humus.test"
	in := install(t, r)

	if got := in.crd.Spec.Names; got.Singular != "memcached" || got.ListKind != "MemcachedList" {
		t.Errorf("the API server holds names %+v", got)
	}
	if got, want := in.crd.Status.AcceptedNames.Kind, "Memcached"; got != want {
		t.Errorf("accepted kind %q, want %q", got, want)
	}

	in.refused(t, "too-small", map[string]any{"size": 0, "image": "memcached:1.6"},
		"spec.size in body should be greater than or equal to 1")
	in.refused(t, "too-large", map[string]any{"size": 4, "image": "memcached:1.6"},
		"spec.size in body should be less than or equal to 3")
	in.refused(t, "wrong-image", map[string]any{"size": 1, "image": "nginx:1.27"},
		"spec.image in body should match '^memcached:'")
	in.refused(t, "no-size", map[string]any{"image": "memcached:1.6"},
		"spec.size: Required value")
	in.refused(t, "unknown-field", map[string]any{"size": 1, "replicas": 2},
		`unknown field "spec.replicas"`)

	u := in.mustCreate(t, "defaulted", map[string]any{"size": 2})
	if got, _, _ := unstructured.NestedString(u.Object, "spec", "image"); got != "memcached:1.6.26-alpine3.19" {
		t.Errorf("spec.image = %q, want the default memcached:1.6.26-alpine3.19", got)
	}

	// The status, as the controller applies it: conditions merge by type.
	var m kube.Object[MemcachedSpec, MemcachedStatus]
	decode(t, u, &m)
	if m.Spec != (MemcachedSpec{Size: 2, Image: "memcached:1.6.26-alpine3.19"}) {
		t.Errorf("decoded spec %+v", m.Spec)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	st := MemcachedStatus{ReadyReplicas: 2, Conditions: []metav1.Condition{
		{Type: "Available", Status: metav1.ConditionTrue, Reason: "DeploymentApplied", Message: "", LastTransitionTime: now},
	}}
	applied := applyStatus(t, in, "defaulted", "memcached-controller", st)
	var back kube.Object[MemcachedSpec, MemcachedStatus]
	decode(t, applied, &back)
	if !reflect.DeepEqual(back.Status, st) {
		t.Errorf("status the API server holds: %+v, want %+v", back.Status, st)
	}
}

func decode(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
}

// applyStatus applies status to the status subresource of the object name,
// with server-side apply under manager, without forcing.
func applyStatus(t *testing.T, in installed, name, manager string, status any) *unstructured.Unstructured {
	t.Helper()
	b, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	u := in.object(name, nil)
	delete(u.Object, "spec")
	u.Object["status"] = st
	got, err := in.objects.ApplyStatus(t.Context(), name, u, metav1.ApplyOptions{FieldManager: manager})
	if err != nil {
		t.Fatalf("applying %s's status as %s: %v", name, manager, err)
	}
	return got
}

// TestClusterTypeArrayRejected checks what the proposal says of a schema
// in OpenAPI 3.1's dialect, with a type array, as openapi.SchemaOf writes a
// pointer: the API server can't even decode it.
func TestClusterTypeArrayRejected(t *testing.T) {
	c := clustertest.Get(t)
	ext, err := apiextensionsclient.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	body := `{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind": "CustomResourceDefinition",
		"metadata": {"name": "arrays.typearray.crd.humus.test"},
		"spec": {
			"group": "typearray.crd.humus.test",
			"names": {"plural": "arrays", "kind": "Array"},
			"scope": "Namespaced",
			"versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
				"type": "object",
				"properties": {"spec": {"type": "object", "properties": {
					"name": {"type": ["null", "string"]}
				}}}
			}}}]
		}
	}`
	err = ext.ApiextensionsV1().RESTClient().Post().
		AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").
		Param("fieldValidation", "Strict").
		SetHeader("Content-Type", "application/json").
		Body([]byte(body)).
		Do(t.Context()).Error()
	if err == nil {
		_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), "arrays.typearray.crd.humus.test", metav1.DeleteOptions{})
		t.Fatal("the API server accepted a CRD with a type array")
	}
	for _, want := range []string{"cannot unmarshal array into Go struct field JSONSchemaProps", "of type string"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the API server says %v\nwant it to contain %q", err, want)
		}
	}
}

type (
	Bounds struct {
		Min int32 `json:"min"`
		Max int32 `json:"max"`
	}
	CELSpec struct {
		Bounds Bounds `json:"bounds"`
		Name   string `json:"name"`
	}
)

// TestClusterCELValidation checks that the API server enforces the CEL
// rules of TypeRules.Validation and FieldOf.Validation, with their
// messages, and compiles them when the CRD is created.
func TestClusterCELValidation(t *testing.T) {
	var (
		bounds Bounds
		spec   CELSpec
	)
	r := kube.Resource[CELSpec, struct{}]{
		Group: "cel.crd.humus.test", Version: "v1", Kind: "Ranged", Plural: "rangeds", Scope: kube.Namespaced,
		Rules: []kube.TypeRules{
			kube.Rules(&bounds).Validation("self.min <= self.max", "min must not be more than max"),
			kube.Rules(&spec,
				kube.Field(&spec.Name).Validation("self.startsWith('r-')", "name must start with r-"),
			),
		},
	}
	in := install(t, r)

	in.refused(t, "inverted", map[string]any{"bounds": map[string]any{"min": 5, "max": 1}, "name": "r-a"},
		"spec.bounds: Invalid value", "min must not be more than max")
	in.refused(t, "misnamed", map[string]any{"bounds": map[string]any{"min": 1, "max": 5}, "name": "a"},
		"spec.name: Invalid value", "name must start with r-")
	in.mustCreate(t, "fine", map[string]any{"bounds": map[string]any{"min": 1, "max": 5}, "name": "r-a"})

	// A rule that doesn't compile is the API server's to refuse: CRD
	// doesn't compile CEL.
	bad := kube.Resource[CELSpec, struct{}]{
		Group: "badcel.crd.humus.test", Version: "v1", Kind: "Ranged", Plural: "rangeds", Scope: kube.Namespaced,
		Rules: []kube.TypeRules{kube.Rules(&bounds).Validation("self.minimum <= ", "broken")},
	}
	crd, err := bad.CRD()
	if err != nil {
		t.Fatalf("CRD() = %v; it doesn't compile CEL, so it has no error to find", err)
	}
	ext, err := apiextensionsclient.NewForConfig(clustertest.Get(t).AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{})
	if err == nil {
		_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
		t.Fatal("the API server accepted a CEL rule that doesn't compile")
	}
	if !strings.Contains(err.Error(), "x-kubernetes-validations[0].rule") || !strings.Contains(err.Error(), "compilation failed") {
		t.Errorf("the API server says %v, want a compilation failure of the rule", err)
	}
}

type (
	Entry struct {
		Name  string `json:"name"`
		Value int32  `json:"value"`
	}
	EntriesStatus struct {
		Entries []Entry `json:"entries,omitempty"` // a map, keyed by name
		Atomic  []Entry `json:"atomic,omitempty"`  // a list, replaced whole
	}
)

// TestClusterListMapMerges checks that a ListMap's items merge by key under
// two field managers, through server-side apply to the status subresource,
// where a list without it is replaced whole.
func TestClusterListMapMerges(t *testing.T) {
	var st EntriesStatus
	r := kube.Resource[struct{}, EntriesStatus]{
		Group: "listmap.crd.humus.test", Version: "v1", Kind: "Entries", Plural: "entries", Scope: kube.Namespaced,
		Rules: []kube.TypeRules{kube.Rules(&st, kube.Field(&st.Entries).ListMap("name"))},
	}
	in := install(t, r)
	in.mustCreate(t, "merged", map[string]any{})

	applyStatus(t, in, "merged", "alpha", EntriesStatus{Entries: []Entry{{Name: "a", Value: 1}}})
	got := applyStatus(t, in, "merged", "beta", EntriesStatus{Entries: []Entry{{Name: "b", Value: 2}}})
	var obj kube.Object[struct{}, EntriesStatus]
	decode(t, got, &obj)
	if want := []Entry{{Name: "a", Value: 1}, {Name: "b", Value: 2}}; !slices.Equal(obj.Status.Entries, want) {
		t.Errorf("entries after two managers applied theirs: %+v, want %+v", obj.Status.Entries, want)
	}

	// alpha changes its entry: beta's stays.
	got = applyStatus(t, in, "merged", "alpha", EntriesStatus{Entries: []Entry{{Name: "a", Value: 10}}})
	decode(t, got, &obj)
	if want := []Entry{{Name: "a", Value: 10}, {Name: "b", Value: 2}}; !slices.Equal(obj.Status.Entries, want) {
		t.Errorf("entries after alpha changed its own: %+v, want %+v", obj.Status.Entries, want)
	}

	// Without ListMap, the list is atomic: a second manager conflicts.
	applyStatus(t, in, "merged", "alpha", EntriesStatus{Atomic: []Entry{{Name: "a", Value: 1}}})
	u := in.object("merged", nil)
	delete(u.Object, "spec")
	u.Object["status"] = map[string]any{"atomic": []any{map[string]any{"name": "b", "value": int64(2)}}}
	_, err := in.objects.ApplyStatus(t.Context(), "merged", u, metav1.ApplyOptions{FieldManager: "beta"})
	if !apierrors.IsConflict(err) {
		t.Errorf("beta applying an atomic list alpha owns: %v, want a conflict", err)
	}
}

type KnownSpec struct {
	Port     intstr.IntOrString   `json:"port"`
	Memory   resource.Quantity    `json:"memory"`
	Replicas *int32               `json:"replicas"`
	Paused   *bool                `json:"paused,omitempty"`
	Config   runtime.RawExtension `json:"config"`
	Template PodLikeTemplate      `json:"template"`
	Since    *metav1.Time         `json:"since,omitempty"`
	Timeout  metav1.Duration      `json:"timeout"`
}

type PodLikeTemplate struct {
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MemcachedSpec `json:"spec"`
}

// TestClusterWellKnownTypes checks apimachinery's types and pointers as the
// API server takes them: an int-or-string takes both, a nullable pointer
// takes null, a RawExtension's content survives a round trip, and an
// embedded ObjectMeta template is accepted.
func TestClusterWellKnownTypes(t *testing.T) {
	in := install(t, kube.Resource[KnownSpec, struct{}]{
		Group: "known.crd.humus.test", Version: "v1", Kind: "Known", Plural: "knowns", Scope: kube.Cluster,
	})
	config := map[string]any{"nested": map[string]any{"list": []any{int64(1), "two", true, nil}, "empty": map[string]any{}}}
	spec := func(port any, memory any, replicas any) map[string]any {
		return map[string]any{
			"port": port, "memory": memory, "replicas": replicas, "config": config, "timeout": "1m30s",
			"template": map[string]any{
				"metadata": map[string]any{"name": "child", "labels": map[string]any{"app": "memcached"}},
				"spec":     map[string]any{"size": int64(1), "image": "memcached:1"},
			},
		}
	}

	byInt := in.mustCreate(t, "by-int", spec(int64(8080), int64(1), nil))
	byString := in.mustCreate(t, "by-string", spec("http", "512Mi", int64(3)))
	in.refused(t, "by-bool", spec(true, "1Gi", nil), "spec.port")
	in.refused(t, "bad-duration", map[string]any{
		"port": 1, "memory": 1, "replicas": nil, "config": config, "timeout": 90,
		"template": map[string]any{"spec": map[string]any{"size": 1, "image": "m"}},
	}, "spec.timeout")

	var a, b kube.Object[KnownSpec, struct{}]
	decode(t, byInt, &a)
	decode(t, byString, &b)
	if a.Spec.Port != intstr.FromInt32(8080) || b.Spec.Port != intstr.FromString("http") {
		t.Errorf("ports %v and %v, want 8080 and http", a.Spec.Port, b.Spec.Port)
	}
	if b.Spec.Memory.Cmp(resource.MustParse("512Mi")) != 0 {
		t.Errorf("memory %v, want 512Mi", b.Spec.Memory)
	}
	if v, ok := byInt.Object["spec"].(map[string]any)["replicas"]; !ok || v != nil {
		t.Errorf("spec.replicas = %v (present %v), want null held", v, ok)
	}
	if a.Spec.Replicas != nil || b.Spec.Replicas == nil || *b.Spec.Replicas != 3 {
		t.Errorf("replicas %v and %v, want nil and 3", a.Spec.Replicas, b.Spec.Replicas)
	}
	if a.Spec.Timeout.Duration != 90*time.Second {
		t.Errorf("timeout %v, want 1m30s", a.Spec.Timeout.Duration)
	}

	var gotConfig map[string]any
	if err := json.Unmarshal(a.Spec.Config.Raw, &gotConfig); err != nil {
		t.Fatal(err)
	}
	wantConfig, _ := json.Marshal(config)
	gotJSON, _ := json.Marshal(gotConfig)
	if string(gotJSON) != string(wantConfig) {
		t.Errorf("config after a round trip: %s, want %s", gotJSON, wantConfig)
	}

	if a.Spec.Template.Spec != (MemcachedSpec{Size: 1, Image: "memcached:1"}) {
		t.Errorf("template spec %+v", a.Spec.Template.Spec)
	}
	// A template's metadata keeps the fields a template sets.
	if got := a.Spec.Template.ObjectMeta; got.Name != "child" || !reflect.DeepEqual(got.Labels, map[string]string{"app": "memcached"}) {
		t.Errorf("the template's metadata as the API server holds it: %+v, want its name and labels", got)
	}
	in.refused(t, "template-uid", map[string]any{
		"port": 1, "memory": 1, "replicas": nil, "config": config, "timeout": "1s",
		"template": map[string]any{"metadata": map[string]any{"uid": "x"}, "spec": map[string]any{"size": 1, "image": "m"}},
	}, `unknown field "spec.template.metadata.uid"`)
}
