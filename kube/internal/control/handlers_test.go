package control

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// An owned object's update queues its owner once, so no worker can take
// the key between two adds and reconcile it twice for one change; a change
// of owner queues the old owner and the new.
func TestAnOwnedObjectsUpdateQueuesItsOwnerOnce(t *testing.T) {
	owned := func(owner string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: owner, Controller: new(true)}}}}
	}
	for _, tc := range []struct {
		name     string
		old, now string
		want     []string
	}{
		{"the same owner", "m", "m", []string{"default/m"}},
		{"another owner", "m", "n", []string{"default/m", "default/n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newCountingQueue(t)
			sh := testWork(q)
			c := &Controller{Kind: "Memcached", Group: "cache.example.com"}
			c.OwnerKeys(sh, schema.GroupResource{Group: "apps", Resource: "deployments"}).OnUpdate(owned(tc.old), owned(tc.now))
			if !slices.Equal(q.added, tc.want) {
				t.Errorf("keys added = %v, want %v", q.added, tc.want)
			}
		})
	}
}

// Each event's priority: low for what a cold start or a resync queues;
// normal for a change of anything the controller reads, an owned object's
// change, and a deletion; and nothing for a relist that found the object
// unchanged.
func TestAnEventsPriority(t *testing.T) {
	base := func() *unstructured.Unstructured {
		u := cacheObject("default", "m", 1)
		u.SetGeneration(1)
		u.SetResourceVersion("5")
		u.SetFinalizers([]string{"cache.example.com/finalizer"})
		return u
	}
	changed := func(f func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := base()
		u.SetResourceVersion("6")
		f(u)
		return u
	}
	for _, tc := range []struct {
		name  string
		event func(h handler)
		want  Priority
	}{
		{"the initial list", func(h handler) { h.OnAdd(base(), true) }, Low},
		{"a create", func(h handler) { h.OnAdd(base(), false) }, Normal},
		{"a resync", func(h handler) { u := base(); h.OnUpdate(u, u) }, Low},
		{"a relist that found it unchanged", func(h handler) { h.OnUpdate(base(), base()) }, none},
		{"a status written by another", func(h handler) {
			h.OnUpdate(base(), changed(func(u *unstructured.Unstructured) { u.Object["status"] = map[string]any{"readyReplicas": 1} }))
		}, Low},
		{"the controller's finalizer added by another replica", func(h handler) {
			h.OnUpdate(changed(func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }), base())
		}, Low},
		{"the spec", func(h handler) {
			h.OnUpdate(base(), changed(func(u *unstructured.Unstructured) { u.SetGeneration(2) }))
		}, Normal},
		{"a label", func(h handler) {
			h.OnUpdate(base(), changed(func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "b"}) }))
		}, Normal},
		{"an annotation", func(h handler) {
			h.OnUpdate(base(), changed(func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"a": "b"}) }))
		}, Normal},
		{"a deletion begun", func(h handler) {
			h.OnUpdate(base(), changed(func(u *unstructured.Unstructured) { u.SetDeletionTimestamp(&metav1.Time{Time: time.Now()}) }))
		}, Normal},
		{"an owner reference", func(h handler) {
			h.OnUpdate(base(), changed(func(u *unstructured.Unstructured) {
				u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u"}})
			}))
		}, Normal},
		{"another's finalizer", func(h handler) {
			h.OnUpdate(base(), changed(func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"cache.example.com/finalizer", "other"}) }))
		}, Normal},
		{"anything, of a kind without generation", func(h handler) {
			h.OnUpdate(changed(func(u *unstructured.Unstructured) { u.SetGeneration(0); u.SetResourceVersion("5") }),
				changed(func(u *unstructured.Unstructured) { u.SetGeneration(0); u.Object["data"] = "x" }))
		}, Normal},
		{"a deletion", func(h handler) { h.OnDelete(base()) }, Normal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &countingQueue{Queue: NewQueue("test", time.Minute, nil)}
			defer q.ShutDown()
			c := &Controller{Finalizer: "cache.example.com/finalizer"}
			tc.event(c.ObjectKeys(testWork(q)))
			if want := queuedAt(tc.want); !slices.Equal(q.priorities, want) {
				t.Errorf("queued at %v, want at %v", q.priorities, want)
			}
		})
	}
}

// none is the priority of an event that queues nothing.
const none Priority = 255

// queuedAt is what a countingQueue holds once an event queued at p.
func queuedAt(p Priority) []Priority {
	if p == none {
		return nil
	}
	return []Priority{p}
}

type handler = interface {
	OnAdd(any, bool)
	OnUpdate(any, any)
	OnDelete(any)
}

func TestAnOwnedObjectsEventsPriority(t *testing.T) {
	owned := func(rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", ResourceVersion: rv,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "m", Controller: new(true)}}}}
	}
	for _, tc := range []struct {
		name  string
		event func(h handler)
		want  Priority
	}{
		{"the initial list", func(h handler) { h.OnAdd(owned("5"), true) }, Low},
		{"a create", func(h handler) { h.OnAdd(owned("5"), false) }, Normal},
		{"a relist that found it unchanged", func(h handler) { h.OnUpdate(owned("5"), owned("5")) }, none},
		{"a change", func(h handler) { h.OnUpdate(owned("5"), owned("6")) }, Normal},
		{"a deletion", func(h handler) { h.OnDelete(owned("5")) }, Normal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &countingQueue{Queue: NewQueue("test", time.Minute, nil)}
			defer q.ShutDown()
			c := &Controller{Kind: "Memcached", Group: "cache.example.com", OwnWrites: NewOwnedWrites([]schema.GroupVersionResource{deployments})}
			tc.event(c.OwnerKeys(testWork(q), deploymentsGR))
			want, keys := queuedAt(tc.want), []string{"default/m"}
			if want == nil {
				keys = nil
			}
			if !slices.Equal(q.priorities, want) || !slices.Equal(q.added, keys) {
				t.Errorf("queued %v at %v, want %v at %v", q.added, q.priorities, keys, want)
			}
		})
	}
}
