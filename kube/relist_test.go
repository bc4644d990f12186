package kube

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// listedThrough returns what an informer's list through markingListed
// brings of objs: each as the informer's store keeps it (transform).
func listedThrough(t *testing.T, list runtime.Object, transform func(any) (any, error)) []any {
	t.Helper()
	lw := markingListed(cache.ListWatch{
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
		h := c.ownerKeys(testWork(q), deploymentsGR)
		md := func(rv string, replicas int, entries ...metav1.ManagedFieldsEntry) *metav1.PartialObjectMetadata {
			d := storedDeployment(rv, replicas, entries...)
			return &metav1.PartialObjectMetadata{TypeMeta: d.TypeMeta, ObjectMeta: d.ObjectMeta}
		}
		old, err := ownedMetadata(md("4", 1, ours(100), kcm))
		if err != nil {
			t.Fatal(err)
		}
		now, err := ownedMetadata(md("6", 2, ours(300), kcm))
		if err != nil {
			t.Fatal(err)
		}
		if listed {
			list := &metav1.PartialObjectMetadataList{Items: []metav1.PartialObjectMetadata{*md("6", 2, ours(300), kcm)}}
			now = listedThrough(t, list, ownedMetadata)[0]
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
	obj := func(rv string, data string, entries ...map[string]any) *cachedObject {
		raw, err := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": "default", "name": "m", "uid": "u1", "resourceVersion": rv, "managedFields": entries},
			"data":     map[string]any{"k": data},
		})
		if err != nil {
			t.Fatal(err)
		}
		u, err := decodeCached(raw)
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
			list := &cachedList{Items: []*cachedObject{obj("5", "b", kubectl, own)}}
			now = listedThrough(t, list, func(o any) (any, error) { return o, nil })[0].(*cachedObject)
		}
		q := newCountingQueue(t)
		c := &Controller{finalizer: "cache.example.com/finalizer", versions: writtenVersions{manager: "memcached-controller"}}
		c.versions.wrote("default/m", "5", input)
		c.objectKeys(testWork(q)).OnUpdate(input, now)
		return len(q.added)
	})
}

// A watch that streams a list (sendInitialEvents) brings it as its initial
// events, up to the bookmark that ends them: those are listed, and the
// events after it, and every event of a plain watch, are not.
func TestAStreamedListsInitialEventsAreListed(t *testing.T) {
	md := func(name, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: rv}}
	}
	end := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "3",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	for _, tc := range []struct {
		name    string
		initial bool
		want    []bool
	}{
		{"a streamed list", true, []bool{true, true, false}},
		{"a plain watch", false, []bool{false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := watch.NewFakeWithChanSize(5, false)
			fw.Add(md("a", "1"))
			fw.Add(md("b", "2"))
			fw.Action(watch.Bookmark, end)
			fw.Add(md("c", "4"))
			lw := markingListed(cache.ListWatch{
				WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
			})
			w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{SendInitialEvents: &tc.initial})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var got []bool
			for e := range w.ResultChan() {
				if e.Type == watch.Bookmark {
					continue
				}
				obj, err := ownedMetadata(e.Object)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, obj.(*ownedObject).listed)
				if len(got) == len(tc.want) {
					break
				}
			}
			for i := range tc.want {
				if i >= len(got) || got[i] != tc.want[i] {
					t.Fatalf("listed, for each object = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
