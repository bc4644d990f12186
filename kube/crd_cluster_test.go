package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

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

type (
	ScaledSpec struct {
		Size int32 `json:"size"`
	}
	ScaledStatus struct {
		ReadyReplicas int32              `json:"readyReplicas,omitempty"`
		Selector      string             `json:"selector,omitempty"`
		Conditions    []metav1.Condition `json:"conditions,omitempty"`
	}
)

// TestClusterCRDDetails checks what the API server does with a CRD's
// printer columns, short name, category and scale subresource, as CRD
// writes them: the Table it answers lists the columns with the object's
// values, discovery lists the short name and the category, and a patch of
// /scale sets the spec's field, validated by the schema, while a GET of
// /scale reports the status's replicas and selector.
func TestClusterCRDDetails(t *testing.T) {
	var (
		spec   ScaledSpec
		status ScaledStatus
	)
	r := kube.Resource[ScaledSpec, ScaledStatus]{
		Group: "details.crd.humus.test", Version: "v1", Kind: "Scaled", Plural: "scaleds", Scope: kube.Namespaced,
		ShortNames: []string{"sc"},
		Categories: []string{"humus-test"},
		Columns: []kube.Column{
			{Name: "Size", JSONPath: ".spec.size"},
			{Name: "Ready", JSONPath: ".status.readyReplicas"},
			{Name: "Available", JSONPath: `.status.conditions[?(@.type=="Available")].status`},
			{Name: "Selector", JSONPath: ".status.selector", Priority: 1, Description: "The pods' selector."},
			{Name: "Age", JSONPath: ".metadata.creationTimestamp"},
		},
		Scale: &kube.Scale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.readyReplicas", LabelSelectorPath: ".status.selector"},
		Rules: []kube.TypeRules{
			kube.Rules(&spec, kube.Field(&spec.Size).Maximum(3)),
			kube.Rules(&status, kube.Field(&status.Conditions).ListMap("type")),
		},
	}
	in := install(t, r)
	in.mustCreate(t, "cache", map[string]any{"size": 2})
	applyStatus(t, in, "cache", "details-test", ScaledStatus{
		ReadyReplicas: 1,
		Selector:      "app=cache",
		Conditions: []metav1.Condition{{
			Type: "Available", Status: metav1.ConditionTrue, Reason: "Ready", Message: "",
			LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
		}},
	})

	t.Run("table", func(t *testing.T) { checkTable(t, in, r.Plural) })
	t.Run("discovery", func(t *testing.T) { checkDiscovery(t, r.Group+"/"+r.Version, r.Plural) })
	t.Run("scale", func(t *testing.T) { checkScale(t, in) })
}

// checkTable asks the API server for in's objects as a Table, as kubectl
// get does, and checks its columns and the object's row.
func checkTable(t *testing.T, in installed, plural string) {
	c := clustertest.Get(t)
	table, body := getTable(t, c.AdminConfig(), in.apiVersion, in.namespace, plural)
	type col struct {
		name, typ, description string
		priority               int32
	}
	var cols []col
	for _, d := range table.ColumnDefinitions {
		cols = append(cols, col{d.Name, d.Type, d.Description, d.Priority})
	}
	if len(cols) == 0 {
		t.Fatalf("the Table has no columns: %s", body)
	}
	wantCols := []col{
		{"Name", "string", cols[0].description, 0},
		{"Size", "integer", "Custom resource definition column (in JSONPath format): .spec.size", 0},
		{"Ready", "integer", "Custom resource definition column (in JSONPath format): .status.readyReplicas", 0},
		{"Available", "string", `Custom resource definition column (in JSONPath format): .status.conditions[?(@.type=="Available")].status`, 0},
		{"Selector", "string", "The pods' selector.", 1},
		{"Age", "date", "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp", 0},
	}
	if !slices.Equal(cols, wantCols) {
		t.Errorf("the Table's columns:\n%+v\nwant:\n%+v", cols, wantCols)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("the Table has %d rows, want 1: %s", len(table.Rows), body)
	}
	cells := table.Rows[0].Cells
	if len(cells) != 6 {
		t.Fatalf("the row has %d cells, want 6: %v", len(cells), cells)
	}
	if want := []any{"cache", float64(2), float64(1), "True", "app=cache"}; !reflect.DeepEqual(cells[:5], want) {
		t.Errorf("the row's cells %#v, want %#v and an age", cells[:5], want)
	}
	if age, ok := cells[5].(string); !ok || !strings.HasSuffix(age, "s") {
		t.Errorf("the row's age %#v, want an age in seconds, such as 2s", cells[5])
	}
}

// checkDiscovery checks that discovery lists the resource with its short
// name and its category, which kubectl get sc and kubectl get humus-test
// read.
func checkDiscovery(t *testing.T, groupVersion, plural string) {
	c := clustertest.Get(t)
	dc, err := discovery.NewDiscoveryClientForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		list, err := dc.ServerResourcesForGroupVersion(groupVersion)
		if err != nil {
			return err
		}
		for _, res := range list.APIResources {
			if res.Name != plural {
				continue
			}
			if !slices.Equal(res.ShortNames, []string{"sc"}) || !slices.Equal(res.Categories, []string{"humus-test"}) {
				return fmt.Errorf("discovery lists %s with short names %v and categories %v, want [sc] and [humus-test]", plural, res.ShortNames, res.Categories)
			}
			return nil
		}
		return fmt.Errorf("discovery doesn't list %s in %s", plural, groupVersion)
	})
}

// checkScale patches the object's /scale, as kubectl scale does, and reads
// it back.
func checkScale(t *testing.T, in installed) {
	ctx := t.Context()
	patch := func(replicas int) (*unstructured.Unstructured, error) {
		body := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
		return in.objects.Patch(ctx, "cache", types.MergePatchType, body, metav1.PatchOptions{}, "scale")
	}
	if _, err := patch(3); err != nil {
		t.Fatalf("patching /scale to 3 replicas: %v", err)
	}
	u, err := in.objects.Get(ctx, "cache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size"); size != 3 {
		t.Errorf("after the scale to 3, spec.size is %d", size)
	}

	// The schema's rules validate a scale as any write: Maximum(3).
	if _, err := patch(4); err == nil || !strings.Contains(err.Error(), "spec.size in body should be less than or equal to 3") {
		t.Errorf("patching /scale to 4 replicas: %v, want the schema's maximum refusing it", err)
	}

	scale, err := in.objects.Get(ctx, "cache", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if scale.GetKind() != "Scale" || scale.GetAPIVersion() != "autoscaling/v1" {
		t.Errorf("/scale is a %s %s, want an autoscaling/v1 Scale", scale.GetAPIVersion(), scale.GetKind())
	}
	specReplicas, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	statusReplicas, _, _ := unstructured.NestedInt64(scale.Object, "status", "replicas")
	selector, _, _ := unstructured.NestedString(scale.Object, "status", "selector")
	if specReplicas != 3 || statusReplicas != 1 || selector != "app=cache" {
		t.Errorf("/scale has spec.replicas %d, status.replicas %d, status.selector %q; want 3, 1 (readyReplicas) and app=cache",
			specReplicas, statusReplicas, selector)
	}
}

type ItemsSpec struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
	Ports   []int32           `json:"ports,omitempty"`
}

// TestClusterItemConstraints checks that the API server enforces the
// constraints Each and Values put on a slice's items and a map's values,
// beside the field's own, and a CEL rule over the bounded items.
func TestClusterItemConstraints(t *testing.T) {
	var spec ItemsSpec
	r := kube.Resource[ItemsSpec, struct{}]{
		Group: "items.crd.humus.test", Version: "v1", Kind: "Mirror", Plural: "mirrors", Scope: kube.Namespaced,
		Rules: []kube.TypeRules{kube.Rules(&spec,
			kube.Field(&spec.Targets).MaxItems(3),
			kube.Each(&spec.Targets).Pattern(regexp.MustCompile(`^[a-z0-9-]+$`)).MaxLength(12).
				Validation("self != 'kube-system'", "not kube-system"),
			kube.Field(&spec.Labels).MaxProperties(2),
			kube.Values(&spec.Labels).Enum("on", "off"),
			kube.Each(&spec.Ports).Minimum(1).Maximum(65535),
		).Validation("self.targets.all(t, !t.startsWith('x-'))", "no x- targets")},
	}
	in := install(t, r)

	in.mustCreate(t, "fine", map[string]any{"targets": []any{"a", "b-2"}, "labels": map[string]any{"x": "on"}, "ports": []any{80}})
	in.refused(t, "pattern", map[string]any{"targets": []any{"a", "B_2"}}, "spec.targets[1]: Invalid value", "should match '^[a-z0-9-]+$'")
	in.refused(t, "long", map[string]any{"targets": []any{"abcdefghijklm"}}, "spec.targets[0]: Too long", "may not be more than 12")
	in.refused(t, "item-rule", map[string]any{"targets": []any{"a", "kube-system"}}, "spec.targets[1]: Invalid value", "not kube-system")
	in.refused(t, "many", map[string]any{"targets": []any{"a", "b", "c", "d"}}, "spec.targets: Too many")
	in.refused(t, "value", map[string]any{"targets": []any{"a"}, "labels": map[string]any{"x": "maybe"}},
		"spec.labels.x: Unsupported value: \"maybe\"")
	in.refused(t, "keys", map[string]any{"targets": []any{"a"}, "labels": map[string]any{"x": "on", "y": "on", "z": "on"}},
		"spec.labels: Too many")
	in.refused(t, "port", map[string]any{"targets": []any{"a"}, "ports": []any{0}}, "spec.ports[0]: Invalid value", "should be greater than or equal to 1")
	in.refused(t, "type-rule", map[string]any{"targets": []any{"x-a"}}, "no x- targets")
}

// getTable asks the API server for the objects of plural at apiVersion in
// ns as a Table, as kubectl get does, and returns it with the response's
// body, for messages.
func getTable(t *testing.T, cfg *rest.Config, apiVersion, ns, plural string) (metav1.Table, []byte) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := cfg.Host + "/apis/" + apiVersion + "/namespaces/" + ns + "/" + plural
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s as a Table: %s %v: %s", url, resp.Status, err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decoding the Table: %v\n%s", err, body)
	}
	return table, body
}
