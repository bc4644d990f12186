package kube

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// listedThrough returns what an informer's list through cache.MarkingListed
// brings of objs: each as the informer's store keeps it (transform).
func listedThrough(t *testing.T, list runtime.Object, transform func(any) (any, error)) []any {
	t.Helper()
	lw := cache.MarkingListed(toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) { return list, nil },
	})
	got, err := lw.ListWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items, err := meta.ExtractList(got)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, it := range items {
		obj, err := transform(it)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, obj)
	}
	return out
}

// watchedAndRelisted runs queued, which reports how many of what (keys,
// owners) an update to the version of an own write queued, on that update
// brought by a watch, which queues none, and by a relist (listed), which
// queues one: a version a list brought is no own write.
func watchedAndRelisted(t *testing.T, what string, queued func(t *testing.T, listed bool) int) {
	t.Helper()
	for _, tc := range []struct {
		name   string
		listed bool
		want   int
	}{
		{"from a watch", false, 0},
		{"from a relist", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := queued(t, tc.listed); got != tc.want {
				t.Errorf("%s queued by the update to the write's version = %d, want %d", what, got, tc.want)
			}
		})
	}
}

// After a watch gap, a relist can bring an owned object at the version of
// the reconcile's own write, from a version before another client's
// write that the cache never saw: kube-controller-manager writing a
// Deployment's status twice in one second, to fields it already owned,
// leaves its managedFields entry byte-equal, so nothing in the two
// versions tells its write apart. A version a list brought is no own
// write: the owner is queued (issue 35, point 4; before, it wasn't,
// though the status changed). The same two versions, from a watch, whose
// events come one version at a time, are the reconcile's own write.
func TestARelistsUpdateAtAnOwnWritesVersionQueuesTheOwner(t *testing.T) {
	specFields, statusFields := `{"f:spec":{"f:replicas":{}}}`, `{"f:status":{"f:readyReplicas":{}}}`
	ours := func(sec int64) metav1.ManagedFieldsEntry {
		return managedEntry("memcached", metav1.ManagedFieldsOperationApply, "", sec, specFields)
	}
	kcm := managedEntry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", 200, statusFields)
	watchedAndRelisted(t, "owners", func(t *testing.T, listed bool) int {
		answer := storedDeployment("6", 2, ours(300), kcm)
		c := applyAnswered(t, http.StatusOK, answer)
		q := newCountingQueue(t)
		h := c.OwnerKeys(testWork(q), deploymentsGR)
		md := func(rv string, replicas int, entries ...metav1.ManagedFieldsEntry) *metav1.PartialObjectMetadata {
			d := storedDeployment(rv, replicas, entries...)
			return &metav1.PartialObjectMetadata{TypeMeta: d.TypeMeta, ObjectMeta: d.ObjectMeta}
		}
		old, err := cache.OwnedMetadata(md("4", 1, ours(100), kcm))
		if err != nil {
			t.Fatal(err)
		}
		now, err := cache.OwnedMetadata(md("6", 2, ours(300), kcm))
		if err != nil {
			t.Fatal(err)
		}
		if listed {
			list := &metav1.PartialObjectMetadataList{Items: []metav1.PartialObjectMetadata{*md("6", 2, ours(300), kcm)}}
			now = listedThrough(t, list, cache.OwnedMetadata)[0]
		}
		h.OnUpdate(old, now)
		return len(q.added)
	})
}

// The same on the resource's own side, for a kind without a generation: a
// ConfigMap-like object whose data kubectl wrote twice in a second (its
// entry byte-equal), then the controller's own apply, brought by a relist
// from the version before both, is queued; from a watch, it is the
// controller's own write.
func TestARelistsUpdateAtAnOwnWritesVersionQueuesTheKey(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, subresource string, sec int64, fields string) map[string]any {
		var f map[string]any
		if err := json.Unmarshal([]byte(fields), &f); err != nil {
			t.Fatal(err)
		}
		return map[string]any{"manager": manager, "operation": string(op), "apiVersion": "v1", "subresource": subresource,
			"time": metav1.Unix(sec, 0).UTC().Format("2006-01-02T15:04:05Z"), "fieldsType": "FieldsV1", "fieldsV1": f}
	}
	obj := func(rv string, data string, entries ...map[string]any) *cache.Object {
		raw, err := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": "default", "name": "m", "uid": "u1", "resourceVersion": rv, "managedFields": entries},
			"data":     map[string]any{"k": data},
		})
		if err != nil {
			t.Fatal(err)
		}
		u, err := cache.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	kubectl := entry("kubectl", metav1.ManagedFieldsOperationUpdate, "", 100, `{"f:data":{"f:k":{}}}`)
	own := entry("memcached-controller", metav1.ManagedFieldsOperationApply, "", 300, `{"f:metadata":{"f:finalizers":{}}}`)
	watchedAndRelisted(t, "keys", func(t *testing.T, listed bool) int {
		input := obj("3", "a", kubectl)
		now := obj("5", "b", kubectl, own)
		if listed {
			list := &cache.List{Items: []*cache.Object{obj("5", "b", kubectl, own)}}
			now = listedThrough(t, list, func(o any) (any, error) { return o, nil })[0].(*cache.Object)
		}
		q := newCountingQueue(t)
		c := &control.Controller{Finalizer: "cache.example.com/finalizer", Versions: control.WrittenVersions{Manager: "memcached-controller"}}
		c.Versions.Wrote("default/m", "5", input)
		c.ObjectKeys(testWork(q)).OnUpdate(input, now)
		return len(q.added)
	})
}
