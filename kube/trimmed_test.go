package kube

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// replicasOnly is what a Reconciler reads of a Deployment: its metadata,
// its replicas and its ready replicas.
type replicasOnly struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec struct {
		Replicas *int32 `json:"replicas,omitempty"`
	} `json:"spec"`
	Status struct {
		ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	} `json:"status"`
}

// imagesOnly is another trim of a Deployment: its containers' images.
type imagesOnly struct {
	metav1.ObjectMeta `json:"metadata"`

	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

var (
	replicasKind = Kind[replicasOnly]{GVR: deployments, Kind: "Deployment", Scope: Namespaced}
	imagesKind   = Kind[imagesOnly]{GVR: deployments, Kind: "Deployment", Scope: Namespaced}
)

// siteDeployment is the Deployment default/name that Website name
// controls, of replicas, with a pod template of some size, 2 ready
// replicas, a label, and one managedFields entry.
func siteDeployment(name string, replicas int64) *unstructured.Unstructured {
	u := object("apps/v1", "Deployment", "default", name, map[string]any{
		"replicas": replicas,
		"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
			"name": "web", "image": "nginx:1.27", "args": []any{strings.Repeat("a long argument ", 100)},
		}}}},
	})
	u.Object["status"] = map[string]any{"readyReplicas": int64(2), "conditions": []any{map[string]any{
		"type": "Available", "status": "True", "message": "Deployment has minimum availability.",
	}}}
	u.SetLabels(map[string]string{"app": "web"})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "web.example.com/v1", Kind: "Website", Name: name, UID: types.UID("uid-" + name), Controller: new(true)}})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{managedEntry("site-controller", metav1.ManagedFieldsOperationApply, "", 5, `{"f:spec":{}}`)})
	return u
}

// cachedJSON is the JSON the cache of key keeps of the object at k.
func cachedJSON(t *testing.T, client *Client, key cache.Key, k string) *cache.Object {
	t.Helper()
	obj, ok, err := client.cache.Entry(key, false).Store().GetByKey(k)
	if err != nil || !ok {
		t.Fatalf("the cache of %s holds no %s: %v", key, k, err)
	}
	return obj.(*cache.Object)
}

// A Deployment read through ReadTrimmed is kept as what the Reader's type
// decodes, and its metadata: Get returns those fields, the cache keeps no
// other, and the one informer that Owns shares follows its owner as a
// whole cache does.
func TestATrimmedReaderKeepsOnlyWhatItsTypeDecodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds, siteObject("default", "a", "c1"), siteDeployment("a", 3))
		client := testClient(t, fakeSetup(nil))
		ds := ReadTrimmed(client, replicasKind, Selector{})
		again := ReadTrimmed(client, replicasKind, Selector{}) // the same type: the same cache
		var calls counter
		rec := ReconcilerFunc[siteSpec, siteStatus](func(_ context.Context, w website) (Result[siteStatus], error) {
			calls.Inc(w.Name)
			return Result[siteStatus]{}, nil
		})
		served(t, siteController(t, f, client, nil, testSettings(), rec, Owns(deployments), Reads(ds), Reads(again)))
		settle(10 * time.Second)

		d, err := ds.Get(t.Context(), "default", "a")
		if err != nil {
			t.Fatalf("Get(default, a) = %v", err)
		}
		owner := metav1.GetControllerOf(&d)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 || d.Status.ReadyReplicas != 2 || d.Labels["app"] != "web" ||
			d.Kind != "Deployment" || owner == nil || owner.Name != "a" {
			t.Errorf("Get(default, a) = %+v, want its replicas, ready replicas, labels, kind and owner", d)
		}
		u := cachedJSON(t, client, Selector{}.key(deployments), "default/a")
		if want := `{"kind":"Deployment","apiVersion":"apps/v1","spec":{"replicas":3},"status":{"readyReplicas":2}}`; string(u.Raw) != want {
			t.Errorf("the cache keeps %s, want only what replicasOnly decodes: %s", u.Raw, want)
		}
		if len(cache.Digests(u)) != 1 || u.ManagedFields != nil || u.Name != "a" || u.ResourceVersion == "" {
			t.Errorf("the cache keeps metadata %+v and %d managedFields digests, want its metadata without managedFields, and the digest of its one entry", u.ObjectMeta, len(cache.Digests(u)))
		}

		// Someone else's change reconciles the owner, and is read.
		before := calls.Get("a")
		f.Update(t, deployments, siteDeployment("a", 5))
		settle(time.Second)
		if calls.Get("a") == before {
			t.Error("a change to the Deployment didn't reconcile the Website that owns it")
		}
		if d, err := again.Get(t.Context(), "default", "a"); err != nil || d.Spec.Replicas == nil || *d.Spec.Replicas != 5 {
			t.Errorf("Get after the change = %+v, %v; want 5 replicas", d.Spec, err)
		}

		// One informer of Deployments, Owns' and both Readers', of whole
		// objects, trimmed (the served check lists through the metadata
		// client).
		lists := 0
		for _, a := range f.Dyn.Actions() {
			if a.GetVerb() == "list" && a.GetResource() == deployments {
				lists++
			}
		}
		if lists != 1 {
			t.Errorf("lists of whole Deployments = %d, want 1, by the one informer", lists)
		}
	})
}

// A trimmed cache tells the reconcile's own writes from others' as a
// whole one does: its objects keep their managedFields' digests.
func TestATrimmedCachesOwnWritesQueueNothing(t *testing.T) {
	trimmed := func(t *testing.T, rv string, sec int64) *cache.Object {
		t.Helper()
		d := storedDeployment(rv, 3, managedEntry("memcached", metav1.ManagedFieldsOperationApply, "", sec, `{"f:spec":{}}`))
		data, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		u, err := cache.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := cache.TrimTo[replicasOnly]().Transform(u)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*cache.Object)
	}
	ours := cache.ManagedKey("memcached", metav1.ManagedFieldsOperationApply, "")
	for _, tc := range []struct {
		name   string
		next   string // the version the event brings, at that second
		queued int
	}{
		{"the reconcile's own write", "5", 0},
		{"someone else's change after it", "6", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &countingQueue{Queue: control.NewQueue("test", time.Minute, nil)}
			defer q.ShutDown()
			c := &control.Controller{Kind: "Memcached", Group: "cache.example.com", OwnWrites: control.NewOwnedWrites([]schema.GroupVersionResource{deployments})}
			c.OwnWrites.RecordAnswer(deploymentsGR, "default", "d", control.OwnedAnswer{RV: "5", Entry: ours})
			old, now := trimmed(t, "4", 4), trimmed(t, tc.next, 5)
			if string(now.Raw) != `{"kind":"Deployment","apiVersion":"apps/v1","spec":{"replicas":3},"status":{}}` {
				t.Fatalf("the trimmed object's JSON = %s", now.Raw)
			}
			c.OwnerKeys(testWork(q), deploymentsGR).OnUpdate(old, now)
			if got := len(q.added); got != tc.queued {
				t.Errorf("owners queued = %d, want %d", got, tc.queued)
			}
		})
	}
}

// An object whose JSON doesn't decode into a trimmed Reader's type is
// kept whole (internal/cache's test), so reading it fails naming the field.
func TestAnObjectATrimKeepsWholeFailsItsReadNamingTheField(t *testing.T) {
	bad, err := cache.Decode([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"default"},"spec":{"replicas":"three"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var d replicasOnly
	if err := control.Decode(bad, &d); err == nil || !strings.Contains(err.Error(), "field spec.replicas") {
		t.Errorf("reading it = %v, want an error naming spec.replicas", err)
	}
}

// One resource, namespace and Selector read through two trims of two types
// is refused, naming both; a Read of it too keeps it whole, from which the
// trimmed Reader decodes what it would from its own.
func TestTwoTrimsOfOneCacheAreRefusedAndAWholeReadKeepsItWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds, siteObject("default", "a", "c1"), siteDeployment("a", 3))
		client := testClient(t, fakeSetup(nil))
		nothing := ReconcilerFunc[siteSpec, siteStatus](func(context.Context, website) (Result[siteStatus], error) {
			return Result[siteStatus]{}, nil
		})
		ds := ReadTrimmed(client, replicasKind, Selector{})
		images := ReadTrimmed(client, imagesKind, Selector{})
		_, err := NewController(fakeSetup(nil), client, testSettings(), sites, nothing, Reads(ds), Reads(images))
		want := "kube: ReadTrimmed(apps/v1, Resource=deployments): its cache, of apps/v1, Resource=deployments, is trimmed to what kube.replicasOnly decodes by another Reader"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewController with two trims of one cache = %v, want an error saying %q", err, want)
		}
		if _, err := images.Get(t.Context(), "default", "a"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Get of the refused Reader = %v, want the same error", err)
		}

		// Another namespace is another cache: trimmed its own way.
		if other := ReadTrimmed(client, imagesKind, Selector{Namespace: "default"}); other.Err != nil {
			t.Errorf("ReadTrimmed of another namespace's cache = %v, want no error", other.Err)
		}

		whole := Read(client, Kind[appsv1.Deployment]{GVR: deployments, Kind: "Deployment", Scope: Namespaced}, Selector{})
		served(t, siteController(t, f, client, nil, testSettings(), nothing, Owns(deployments), Reads(ds), Reads(whole)))
		settle(10 * time.Second)
		if u := cachedJSON(t, client, Selector{}.key(deployments), "default/a"); !strings.Contains(string(u.Raw), "a long argument") {
			t.Errorf("the cache read whole too keeps %s, want the whole object", u.Raw)
		}
		if d, err := ds.Get(t.Context(), "default", "a"); err != nil || d.Spec.Replicas == nil || *d.Spec.Replicas != 3 || d.Status.ReadyReplicas != 2 {
			t.Errorf("the trimmed Reader's Get of a whole cache = %+v, %v; want its replicas and ready replicas", d, err)
		}
	})
}
