package control

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The event that brings a reconcile's own write to an owned object queues
// nothing, whether the write created it or changed it; any other version's
// event, another resource's, or one once the writes are forgotten, queues
// its owner.
func TestTheEventOfAReconcilesWriteToAnOwnedObjectQueuesNothing(t *testing.T) {
	// Each version has the reconcile's managedFields entry of another time,
	// as though the reconcile had written each.
	owned := func(rv string) *metav1.PartialObjectMetadata {
		sec, _ := strconv.ParseInt(rv, 10, 64)
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", ResourceVersion: rv,
			ManagedFields:   []metav1.ManagedFieldsEntry{managedEntry("memcached", metav1.ManagedFieldsOperationApply, "", sec, `{"f:spec":{}}`)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "m", Controller: new(true)}}}}
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	configMaps := schema.GroupResource{Resource: "configmaps"}
	ours := cache.ManagedKey("memcached", metav1.ManagedFieldsOperationApply, "")
	for _, tc := range []struct {
		name   string
		writes []string
		steps  func(w *OwnedWrites, h func(event, rv string))
		queued int
	}{
		{"created by the reconcile", []string{"5"}, func(_ *OwnedWrites, h func(string, string)) { h("add", "5") }, 0},
		{"changed by the reconcile", []string{"5"}, func(_ *OwnedWrites, h func(string, string)) { h("update", "5") }, 0},
		{"changed twice by the reconcile", []string{"5", "6"}, func(_ *OwnedWrites, h func(string, string)) {
			h("update", "5")
			h("update", "6")
		}, 0},
		{"someone else's change, then the reconcile's", []string{"5"}, func(_ *OwnedWrites, h func(string, string)) {
			h("update", "4")
			h("update", "5")
		}, 1},
		{"the reconcile's change, then someone else's", []string{"5"}, func(_ *OwnedWrites, h func(string, string)) {
			h("update", "5")
			h("update", "6")
		}, 1},
		{"a write to a resource it doesn't own", nil, func(w *OwnedWrites, h func(string, string)) {
			w.RecordAnswer(configMaps, "default", "d", OwnedAnswer{RV: "5", Created: true, Entry: ours})
			h("update", "5")
		}, 1},
		{"its deletion", []string{"5"}, func(_ *OwnedWrites, h func(string, string)) { h("delete", "5") }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &countingQueue{Queue: NewQueue("test", time.Minute, nil)}
			defer q.ShutDown()
			sh := testWork(q)
			c := &Controller{Kind: "Memcached", Group: "cache.example.com", OwnWrites: NewOwnedWrites([]schema.GroupVersionResource{deployments})}
			for _, rv := range tc.writes {
				c.OwnWrites.RecordAnswer(deploymentsGR, "default", "d", OwnedAnswer{RV: rv, Created: true, Entry: ours})
			}
			h := c.OwnerKeys(sh, deploymentsGR)
			tc.steps(c.OwnWrites, func(event, rv string) {
				switch event {
				case "add":
					h.OnAdd(owned(rv), false)
				case "update":
					h.OnUpdate(owned("1"), owned(rv))
				case "delete":
					h.OnDelete(owned(rv))
				}
			})
			if got := len(q.added); got != tc.queued {
				t.Errorf("owners queued = %d, want %d", got, tc.queued)
			}
		})
	}
}

// managedEntry is a managedFields entry of manager's, at second sec.
func managedEntry(manager string, op metav1.ManagedFieldsOperationType, subresource string, sec int64, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "apps/v1", Subresource: subresource,
		Time: new(metav1.NewTime(time.Unix(sec, 0))), FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

// aheadRV is the resourceVersion the API server answers the controller's
// status apply with, far ahead of every one the cache will see: as after
// etcd was restored from a backup, and the API server's resourceVersions
// went backwards.
const aheadRV = "1000000"

func TestReadingYourOwnWritesHoldsAKeyBackNoLongerThanItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		f.AnswerStatusAppliesAt("memcacheds", aheadRV)
		var calls counter
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls)))

		sleepUntil(start, time.Second)
		if got := len(f.AppliesTo("status")); got != 1 {
			t.Fatalf("status applies = %d, want 1", got)
		}
		// The object changes, with a resourceVersion behind the write's.
		resize(t, f, "m", 5)
		sleepUntil(start, rywBound-time.Second)
		if got := calls.Get("m"); got != 1 {
			t.Errorf("reconciles within rywBound of the write = %d, want 1: a cache behind the key's own write holds it back", got)
		}
		sleepUntil(start, rywBound+5*time.Second)
		if got := calls.Get("m"); got != 2 {
			t.Errorf("reconciles by rywBound+5s = %d, want 2: a write the cache never catches up with is forgotten after rywBound", got)
		}
		if n, _, _ := unstructured.NestedInt64(f.Get(t, cachesGVR, "default", "m").Object, "status", "readyReplicas"); n != 5 {
			t.Errorf("status.readyReplicas = %d, want 5: the change was reconciled", n)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestReadingYourOwnWritesHoldsAKeyBackNoLongerThanRywBoundAfterTheWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		f.AnswerStatusAppliesAt("memcacheds", aheadRV)
		var calls counter
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls)))
		sleepUntil(start, rywBound-time.Second)
		resize(t, f, "m", 5)
		sleepUntil(start, rywBound+2*time.Second)
		if got := calls.Get("m"); got != 2 {
			t.Errorf("reconciles by rywBound+2s after the write = %d, want 2", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// A reconcile's own writes, its finalizer and its status, are its outcome:
// their events queue nothing, whether they come before or after a worker
// reconciled the write from the cache. Any other version's event queues
// the key, and so does the event of an own write that brings a change of
// someone else's with it (a relist folds the versions between two lists
// into one event).
func TestTheEventsOfAReconcilesOwnWritesQueueNothing(t *testing.T) {
	input := versionOfM("3")
	for _, tc := range ownWriteEvents(input) {
		t.Run(tc.name, func(t *testing.T) {
			q := newCountingQueue(t)
			sh := testWork(q)
			c := &Controller{Finalizer: testFinalizer, Versions: WrittenVersions{Manager: "memcached-controller"}}
			h := c.ObjectKeys(sh)
			tc.steps(c, func(u *unstructured.Unstructured) { h.OnUpdate(input, u) })
			if got := len(q.added); got != tc.queued {
				t.Errorf("keys queued = %d, want %d", got, tc.queued)
			}
		})
	}
}

// versionOfM is the object default/m at resourceVersion rv, as a
// reconcile read it, with change made to it.
func versionOfM(rv string, change ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetNamespace("default")
	u.SetName("m")
	u.SetUID("u1")
	u.SetGeneration(1)
	u.SetLabels(map[string]string{"app": "m"})
	u.SetResourceVersion(rv)
	for _, f := range change {
		f(u)
	}
	return u
}

// ownWriteEvent is a reconcile's writes, recorded in c, and the update
// events of the object its handler is then handed, from the version a
// reconcile read (input); queued is how many keys they queue.
type ownWriteEvent struct {
	name   string
	steps  func(c *Controller, update func(*unstructured.Unstructured))
	queued int
}

// ownWriteEvents are TestTheEventsOfAReconcilesOwnWritesQueueNothing's
// cases: first those that queue nothing, then those that queue the key.
func ownWriteEvents(input *unstructured.Unstructured) []ownWriteEvent {
	obj := versionOfM
	finalized := func(u *unstructured.Unstructured) { u.SetFinalizers([]string{testFinalizer}) }
	return []ownWriteEvent{
		{"the status's event", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "5", input)
			update(obj("5"))
		}, 0},
		{"the finalizer's and the status's events", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "4", input)
			c.Versions.Wrote("default/m", "5", input)
			update(obj("4", finalized))
			update(obj("5", finalized))
		}, 0},
		{"reconciled from the cache, then its event", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "5", input)
			c.Versions.AheadFor("default/m", "5")
			update(obj("5"))
		}, 0},
		{"only the last write's event, after a relist", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "4", input)
			c.Versions.Wrote("default/m", "5", input)
			update(obj("5", finalized))
		}, 0},
		{"another's version, then the write's", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "5", input)
			update(obj("4", func(u *unstructured.Unstructured) { u.SetGeneration(2) }))
			update(obj("5", func(u *unstructured.Unstructured) { u.SetGeneration(2) }))
		}, 2},
		{"a newer version's event", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "5", input)
			update(obj("5"))
			update(obj("6"))
		}, 1},
		{"the write's event with a new spec folded in", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "5", input)
			update(obj("5", func(u *unstructured.Unstructured) { u.SetGeneration(2) }))
		}, 1},
		{"the write's event with a label folded in", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "5", input)
			update(obj("5", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"app": "n"}) }))
		}, 1},
		{"the write's event with another's finalizer folded in", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "5", input)
			update(obj("5", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{testFinalizer, "other"}) }))
		}, 1},
		{"the write's event with a deletion folded in", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "5", input)
			update(obj("5", func(u *unstructured.Unstructured) { u.SetDeletionTimestamp(new(metav1.Now())) }))
		}, 1},
		{"a write forgotten", func(c *Controller, update func(*unstructured.Unstructured)) {
			c.Versions.Wrote("default/m", "5", input)
			c.Versions.forget("default/m")
			update(obj("5"))
		}, 1},
	}
}

// A relist can fold another's change into the event of the controller's
// own write, and a Kind such as a ConfigMap bumps no generation for it: a
// managedFields entry other than the controller's own two applies that
// changed since the reconcile's object queues the key; the controller's
// own entries changing queue nothing (issue 22, point 11).
func TestTheEventOfAnOwnWriteWithAnotherWritersEntryChangedQueuesTheKey(t *testing.T) {
	obj := func(rv string, entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace("default")
		u.SetName("m")
		u.SetUID("u1")
		u.SetResourceVersion(rv)
		u.SetManagedFields(entries)
		return u
	}
	kubectl := func(sec int64) metav1.ManagedFieldsEntry {
		return managedEntry("kubectl", metav1.ManagedFieldsOperationUpdate, "", sec, `{"f:data":{}}`)
	}
	own := func(subresource string) metav1.ManagedFieldsEntry {
		return managedEntry("memcached-controller", metav1.ManagedFieldsOperationApply, subresource, 300, `{"f:metadata":{}}`)
	}
	input := obj("3", kubectl(100))
	for _, tc := range []struct {
		name   string
		event  *unstructured.Unstructured
		queued int
	}{
		{"another's entry changed", obj("5", kubectl(200)), 1},
		{"the controller's own entries changed", obj("5", kubectl(100), own(""), own("status")), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newCountingQueue(t)
			c := &Controller{Finalizer: "cache.example.com/finalizer", Versions: WrittenVersions{Manager: "memcached-controller"}}
			c.Versions.Wrote("default/m", "5", input)
			c.ObjectKeys(testWork(q)).OnUpdate(input, tc.event)
			if got := len(q.added); got != tc.queued {
				t.Errorf("keys queued = %d, want %d", got, tc.queued)
			}
		})
	}
}
