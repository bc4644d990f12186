package kube

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/control"
)

type cacheSpec struct {
	Size  int32  `json:"size"`
	Image string `json:"image,omitempty"`
}

type cacheStatus struct {
	ReadyReplicas int32              `json:"readyReplicas,omitempty"`
	Conditions    []metav1.Condition `json:"conditions,omitempty"`
}

type memcached = Object[cacheSpec, cacheStatus]

var caches = Resource[cacheSpec, cacheStatus]{
	Group:   "cache.example.com",
	Version: "v1alpha1",
	Kind:    "Memcached",
	Plural:  "memcacheds",
	Scope:   Namespaced,
}

var (
	cachesGVR   = caches.GVR()
	listKinds   = map[schema.GroupVersionResource]string{cachesGVR: "MemcachedList", namespacesGVR: "NamespaceList"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

func cacheObject(ns, name string, size int64) *unstructured.Unstructured {
	return object("cache.example.com/v1alpha1", "Memcached", ns, name, map[string]any{"size": size})
}

// readyReplicas reports the object's size as its ready replicas: a
// Reconciler whose status settles after one apply.
func readyReplicas(calls *counter) ReconcilerFunc[cacheSpec, cacheStatus] {
	return func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
		calls.Inc(m.Name)
		st := m.Status
		st.ReadyReplicas = m.Spec.Size
		return Result[cacheStatus]{Status: &st}, nil
	}
}

func TestDecodingIgnoresUnknownFieldsAndNamesAWrongType(t *testing.T) {
	u := cacheObject("default", "m", 3)
	u.Object["spec"].(map[string]any)["replicasPerZone"] = int64(2) // from a newer CRD
	var m memcached
	if err := control.Decode(cached(t, u), &m); err != nil || m.Spec.Size != 3 || m.Name != "m" {
		t.Errorf("decode = %+v, %v; want size 3 and the unknown field ignored", m.Spec, err)
	}
	u.Object["spec"].(map[string]any)["size"] = "three"
	err := control.Decode(cached(t, u), &m)
	const want = "kube: decoding Memcached default/m: field spec.size: a JSON string can't be a Go int32"
	if err == nil || err.Error() != want {
		t.Errorf("decode = %v, want %q", err, want)
	}
}

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

var namespaces = Kind[corev1.Namespace]{GVR: namespacesGVR, Kind: "Namespace", Scope: Cluster}

func TestKindControllerReconcilesClientGosStruct(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := object("v1", "Namespace", "", "team-a", nil)
		ns.SetLabels(map[string]string{"team": "a"})
		f := newFakeCluster(t, listKinds, ns)
		var calls, finalized counter
		rec := &seenNamespace{calls: &calls}
		fin := Finalize("example.com/default-deny", func(ctx context.Context, ns corev1.Namespace) error {
			finalized.Inc(ns.Name)
			return nil
		})
		stop := served(t, observedKindController(t, f, nil, testSettings(), rec, Owns(configMaps), fin))

		time.Sleep(30 * time.Second)
		synctest.Wait()
		rec.check(t)
		// Once, and once after 20s: the finalizer's own change reconciles
		// nothing.
		if got := calls.Get("team-a"); got != 2 {
			t.Errorf("reconciles in 30s = %d, want 2", got)
		}
		if got := len(f.AppliesTo("status")); got != 0 {
			t.Errorf("status applies = %d, want none for a Kind", got)
		}

		// A change to a ConfigMap it controls reconciles it.
		before := calls.Get("team-a")
		createControlledConfigMap(t, f)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := calls.Get("team-a"); got != before+1 {
			t.Errorf("reconciles after an owned ConfigMap changed = %d, want %d", got, before+1)
		}

		f.BeginDeletion(t, namespacesGVR, "", "team-a")
		time.Sleep(time.Second)
		synctest.Wait()
		if got := finalized.Get("team-a"); got != 1 {
			t.Errorf("f ran %d times, want 1", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// seenNamespace is a KindReconciler that keeps the last Namespace it was
// handed, and reconciles each again after 20s.
type seenNamespace struct {
	calls *counter
	mu    sync.Mutex
	seen  corev1.Namespace
}

func (r *seenNamespace) Reconcile(ctx context.Context, ns corev1.Namespace) (time.Duration, error) {
	r.mu.Lock()
	r.seen = ns
	r.mu.Unlock()
	r.calls.Inc(ns.Name)
	return 20 * time.Second, nil
}

// check fails t unless the last Namespace handed to r is team-a, with its
// labels and its Kind: client-go's struct, filled in.
func (r *seenNamespace) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen.Name != "team-a" || r.seen.Labels["team"] != "a" || r.seen.Kind != "Namespace" {
		t.Errorf("the Reconciler was handed %+v, want the Namespace team-a with its labels", r.seen.ObjectMeta)
	}
}

// createControlledConfigMap creates, in f's metadata client, a ConfigMap
// in team-a whose controller is the Namespace team-a.
func createControlledConfigMap(t *testing.T, f *fakeCluster) {
	t.Helper()
	cm := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "default-deny", Namespace: "team-a", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Namespace", Name: "team-a", UID: "uid-team-a", Controller: new(true),
		}}},
	}
	if _, err := f.Meta.Resource(configMaps).Namespace("team-a").(metadataCreator).CreateFake(cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")

// metadataCreator is the fake metadata client's create, which its
// ResourceInterface lacks.
type metadataCreator interface {
	CreateFake(obj *metav1.PartialObjectMetadata, opts metav1.CreateOptions, subresources ...string) (*metav1.PartialObjectMetadata, error)
}

func TestAKindsFinalizerIsRemovedAndItsDeletionCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, object("v1", "Namespace", "", "team-a", nil))
		var calls, finalized counter
		rec := KindReconcilerFunc[corev1.Namespace](func(ctx context.Context, ns corev1.Namespace) (time.Duration, error) {
			calls.Inc(ns.Name)
			return 0, nil
		})
		fin := Finalize("example.com/default-deny", func(ctx context.Context, ns corev1.Namespace) error {
			finalized.Inc(ns.Name)
			return nil
		})
		stop := served(t, observedKindController(t, f, humustest.NewTelemetry(), testSettings(), rec, fin))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		ns := f.Get(t, namespacesGVR, "", "team-a")
		if got := ns.GetFinalizers(); len(got) != 1 || got[0] != "example.com/default-deny" {
			t.Fatalf("finalizers = %v, want [example.com/default-deny]", got)
		}
		reconciled := calls.Get("team-a")

		now := metav1.Now()
		ns.SetDeletionTimestamp(&now)
		f.Update(t, namespacesGVR, ns)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := finalized.Get("team-a"); got != 1 {
			t.Errorf("f ran %d times, want 1", got)
		}
		applies := f.AppliesTo("")
		if len(applies) != 2 {
			t.Fatalf("finalizer applies = %+v, want two: the finalizer added, then removed", applies)
		}
		removal := applies[1]
		if removal.FieldOwner != "memcached-controller" {
			t.Errorf("the removal's field manager = %q, want memcached-controller", removal.FieldOwner)
		}
		meta, _ := removal.Body["metadata"].(map[string]any)
		if fins, _ := meta["finalizers"].([]any); len(fins) != 0 {
			t.Errorf("the removal applied finalizers %v, want none", fins)
		}
		if _, err := f.Dyn.Tracker().Get(namespacesGVR, "", "team-a"); !apierrors.IsNotFound(err) {
			t.Errorf("the Namespace after its finalizer's removal: %v, want NotFound: its deletion completed", err)
		}
		if got := calls.Get("team-a"); got != reconciled {
			t.Errorf("reconciles once being deleted = %d, want none", got-reconciled)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}
