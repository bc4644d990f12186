package kube

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// newTypedFake is client-go's dynamic fake, whose tracker can't
// server-side apply an unstructured object (it applies with a strategic
// merge patch, which needs a Go type): a reactor applies each apply as a
// JSON merge patch of the object there, which is what a test of a
// TypedClient's Apply needs of it.
func newTypedFake() *dynamicfake.FakeDynamicClient {
	fake := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{cachesGVR: "MemcachedList", configMapsGVR: "ConfigMapList"})
	fake.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa, ok := a.(k8stesting.PatchActionImpl)
		if !ok || pa.PatchType != types.ApplyPatchType {
			return false, nil, nil
		}
		pa.PatchType = types.MergePatchType
		return k8stesting.ObjectReaction(fake.Tracker())(pa)
	})
	return fake
}

func TestTypedClientRoundTripsAResourcesObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		memcacheds := NewTypedClientOn(newTypedFake(), caches)
		ctx := t.Context()

		if _, err := memcacheds.Get(ctx, "ns", "m"); !apierrors.IsNotFound(err) {
			t.Fatalf("Get of no object = %v, want NotFound", err)
		}
		created, err := memcacheds.Create(ctx, memcached{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Labels: map[string]string{"app": "web"}},
			Spec:       cacheSpec{Size: 2, Image: "memcached:1.6"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if created.APIVersion != "cache.example.com/v1alpha1" || created.Kind != "Memcached" || created.Spec.Size != 2 {
			t.Errorf("Create = %+v, want apiVersion cache.example.com/v1alpha1, kind Memcached, size 2", created)
		}
		if _, err := memcacheds.Create(ctx, created); !apierrors.IsAlreadyExists(err) {
			t.Errorf("second Create = %v, want AlreadyExists", err)
		}
		if _, err := memcacheds.Create(ctx, memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "n"}, Spec: cacheSpec{Size: 1}}); err != nil {
			t.Fatal(err)
		}

		got, err := memcacheds.Get(ctx, "ns", "m")
		if err != nil {
			t.Fatal(err)
		}
		got.Spec.Size = 99 // the caller's own copy
		if again, _ := memcacheds.Get(ctx, "ns", "m"); again.Spec.Size != 2 || again.Labels["app"] != "web" {
			t.Errorf("Get = %+v, want size 2 and label app=web", again)
		}

		for _, tc := range []struct {
			ns     string
			labels labels.Selector
			fields fields.Selector
			want   []string
		}{
			{"", nil, nil, []string{"m", "n"}},
			{"ns", nil, nil, []string{"m"}},
			{"", labels.SelectorFromSet(labels.Set{"app": "web"}), nil, []string{"m"}},
			{"", labels.SelectorFromSet(labels.Set{"app": "db"}), nil, nil},
		} {
			l, err := memcacheds.List(ctx, tc.ns, tc.labels, tc.fields)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, m := range l {
				names = append(names, m.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("List(%q, %v) = %v, want %v", tc.ns, tc.labels, names, tc.want)
			}
		}

		if err := memcacheds.Delete(ctx, "ns", "m"); err != nil {
			t.Fatal(err)
		}
		if _, err := memcacheds.Get(ctx, "ns", "m"); !apierrors.IsNotFound(err) {
			t.Errorf("Get after Delete = %v, want NotFound", err)
		}
		if err := memcacheds.Delete(ctx, "ns", "m"); !apierrors.IsNotFound(err) {
			t.Errorf("second Delete = %v, want NotFound", err)
		}
	})
}

// TestTypedClientAppliesTheSpecAndTheStatusApart checks what each apply
// sends: the spec and the declared metadata, never the status or what the
// API server sets; the status alone, to the status subresource.
func TestTypedClientAppliesTheSpecAndTheStatusApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newTypedFake()
		memcacheds := NewTypedClientOn(fake, caches)
		ctx := t.Context()
		m, err := memcacheds.Create(ctx, memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}, Spec: cacheSpec{Size: 1}})
		if err != nil {
			t.Fatal(err)
		}
		m.ResourceVersion, m.UID = "7", "uid"
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "other"}}
		m.Spec.Size = 3
		m.Status.ReadyReplicas = 5 // not applied with the spec
		opts := metav1.ApplyOptions{FieldManager: "tests", Force: true}
		applied, err := memcacheds.Apply(ctx, m, opts)
		if err != nil {
			t.Fatal(err)
		}
		if applied.Spec.Size != 3 || applied.Status.ReadyReplicas != 0 {
			t.Errorf("Apply = size %d, readyReplicas %d; want 3, 0", applied.Spec.Size, applied.Status.ReadyReplicas)
		}
		applied, err = memcacheds.ApplyStatus(ctx, memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Labels: map[string]string{"a": "b"}}, Status: cacheStatus{ReadyReplicas: 3}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if applied.Status.ReadyReplicas != 3 || applied.Spec.Size != 3 {
			t.Errorf("ApplyStatus = size %d, readyReplicas %d; want 3, 3", applied.Spec.Size, applied.Status.ReadyReplicas)
		}

		var bodies []string
		for _, a := range fake.Actions() {
			if p, ok := a.(interface{ GetPatch() []byte }); ok {
				bodies = append(bodies, a.GetSubresource()+" "+strings.TrimSpace(string(p.GetPatch())))
			}
		}
		want := []string{
			` {"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m","namespace":"ns"},"spec":{"size":3}}`,
			`status {"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m","namespace":"ns"},"status":{"readyReplicas":3}}`,
		}
		if strings.Join(bodies, "\n") != strings.Join(want, "\n") {
			t.Errorf("apply bodies:\n%s\nwant:\n%s", strings.Join(bodies, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestTypedClientWatchesTypedEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newTypedFake()
		configMaps := NewTypedClientOn(fake, configMapKind)
		ctx := t.Context()
		go func() {
			synctest.Wait() // the watch is open
			cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}, Data: map[string]string{"k": "v"}}
			if _, err := configMaps.Create(ctx, cm); err != nil {
				t.Error(err)
			}
			if err := configMaps.Delete(ctx, "ns", "b"); err != nil {
				t.Error(err)
			}
		}()
		var got []string
		for e, err := range configMaps.Watch(ctx, "ns", nil, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(e.Type)+" "+e.Object.Name+" "+e.Object.Data["k"])
			if e.Type == watch.Deleted {
				break
			}
		}
		want := "ADDED b v,DELETED b v"
		if strings.Join(got, ",") != want {
			t.Errorf("events = %q, want %q", strings.Join(got, ","), want)
		}
	})
}

func TestTypedClientSaysWhatIsWrongOnEachCall(t *testing.T) {
	bad := NewTypedClientOn(nil, Kind[corev1.ConfigMap]{GVR: configMapsGVR, Scope: "Global"})
	_, err := bad.Get(t.Context(), "ns", "a")
	for _, want := range []string{"kube: NewTypedClient(/v1, Resource=configmaps)", "Kind.Kind is required", `Kind.Scope "Global"`, "the dynamic.Interface is nil"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Get = %v, want an error with %q", err, want)
		}
	}
	for e, err := range bad.Watch(t.Context(), "", nil, nil) {
		if err == nil {
			t.Errorf("Watch yielded %v, want the error", e)
		}
	}
	if _, err := NewTypedClientOn[memcached](newTypedFake(), nil).Get(t.Context(), "ns", "m"); err == nil || !strings.Contains(err.Error(), "the resource is nil") {
		t.Errorf("Get on a nil resource = %v, want it named", err)
	}
	memcacheds, namespaceObjs := NewTypedClientOn(newTypedFake(), caches), NewTypedClientOn(newTypedFake(), namespaces)
	if _, err := memcacheds.Get(t.Context(), "", "m"); err == nil || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "kube: Memcached m: the resource is namespaced") {
		t.Errorf("Get of a namespaced object in no namespace = %v, want it named", err)
	}
	if _, err := memcacheds.Create(t.Context(), memcached{ObjectMeta: metav1.ObjectMeta{Name: "m"}}); err == nil || !strings.Contains(err.Error(), "the resource is namespaced") {
		t.Errorf("Create of a namespaced object in no namespace = %v, want it named", err)
	}
	if err := namespaceObjs.Delete(t.Context(), "ns", "a"); err == nil || !strings.Contains(err.Error(), "kube: Namespace ns/a: the resource is cluster-scoped") {
		t.Errorf("Delete of a cluster-scoped object in a namespace = %v, want it named", err)
	}
	if _, err := NewTypedClient(nil, caches).List(t.Context(), "", nil, nil); err == nil || !strings.Contains(err.Error(), "the Client is nil") {
		t.Errorf("List on a nil Client = %v, want it named", err)
	}
}

// A watch whose context ends hands client-go's stream error on as an
// Error event; the sequence ends there without an error, as Watch's doc
// says, whichever of the two the loop sees first. Before, it yielded
// "context canceled" about half the time (seen under load on the real
// control plane).
func TestTypedClientWatchEndsWithItsContextWithoutAnError(t *testing.T) {
	for range 20 {
		fake := newTypedFake()
		// The stream's error waits in the watch when the context ends.
		fw := watch.NewFakeWithChanSize(1, false)
		fw.Error(&metav1.Status{Status: metav1.StatusFailure, Message: "unable to decode an event from the watch stream: context canceled"})
		fake.PrependWatchReactor("configmaps", k8stesting.DefaultWatchReactor(fw, nil))
		configMaps := NewTypedClientOn(fake, configMapKind)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var err error
		for _, e := range configMaps.Watch(ctx, "ns", nil, nil) {
			err = e
		}
		if err != nil {
			t.Fatalf("Watch's last error = %v, want none: its context ended", err)
		}
	}
}
