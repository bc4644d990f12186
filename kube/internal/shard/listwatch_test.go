package shard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// shardKeys returns k of rng's UIDs whose hash r contains, and k whose
// hash it doesn't.
func shardKeys(rng *rand.Rand, r Range, k int) (in, out []string) {
	for len(in) < k || len(out) < k {
		uid := testUID(rng)
		if r.Contains(Hash(uid)) {
			if len(in) < k {
				in = append(in, uid)
			}
		} else if len(out) < k {
			out = append(out, uid)
		}
	}
	return in, out
}

// uidKey is a shard's key by UID, no object's when it has none.
func uidKey(o metav1.Object) (string, bool) { return string(o.GetUID()), o.GetUID() != "" }

// unstructuredList is a dynamic client's list of Memcacheds with uids,
// m0 onwards.
func unstructuredList(uids []string) runtime.Object {
	l := &unstructured.UnstructuredList{}
	for i, uid := range uids {
		u := unstructured.Unstructured{}
		u.SetAPIVersion("example.com/v1")
		u.SetKind("Memcached")
		u.SetName(fmt.Sprint("m", i))
		u.SetUID(types.UID(uid))
		l.Items = append(l.Items, u)
	}
	return l
}

// metadataList is a metadata client's list of objects with uids, m0
// onwards.
func metadataList(uids []string) runtime.Object {
	l := &metav1.PartialObjectMetadataList{}
	for i, uid := range uids {
		l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("m", i), UID: types.UID(uid)}})
	}
	return l
}

// uids is the UIDs of list's items, in order.
func uids(list runtime.Object) []string {
	var got []string
	switch l := list.(type) {
	case *unstructured.UnstructuredList:
		for _, o := range l.Items {
			got = append(got, string(o.GetUID()))
		}
	case *metav1.PartialObjectMetadataList:
		for _, o := range l.Items {
			got = append(got, string(o.UID))
		}
	}
	return got
}

// A shard's list keeps that shard's objects, of the dynamic client's lists
// and of the metadata client's, drops an object no shard's, calls foreign
// for each of another shard's, and asks the API server with the selector.
func TestAShardsListKeepsItsOwnObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	r := NewRange(1, 3)
	in, out := shardKeys(rng, r, 3)
	order := []string{out[0], in[0], in[1], out[1], "", out[2], in[2]}

	for _, tc := range []struct {
		name string
		list func() runtime.Object
	}{
		{"the dynamic client's", func() runtime.Object { return unstructuredList(order) }},
		{"the metadata client's", func() runtime.Object { return metadataList(order) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked metav1.ListOptions
			foreign := 0
			lw := &ListWatch{
				List: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
					asked = o
					return tc.list(), nil
				},
				Filter:   Filter{Range: r, Key: uidKey, Foreign: func() { foreign++ }},
				Selector: r.Selector("uid"),
			}
			got, err := lw.ListWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "42", LabelSelector: "app=memcached", ShardSelector: "something else"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(uids(got), in) {
				t.Errorf("the list keeps %v, want %v", uids(got), in)
			}
			if foreign != len(out) {
				t.Errorf("foreign called %d times, want %d: one for each of another shard's", foreign, len(out))
			}
			if asked.ShardSelector != r.Selector("uid") || asked.ResourceVersion != "42" || asked.LabelSelector != "app=memcached" {
				t.Errorf("listed with %+v, want the shard's selector %q and the caller's options", asked, r.Selector("uid"))
			}
		})
	}

	t.Run("of the shard's objects only", func(t *testing.T) {
		foreign := 0
		lw := &ListWatch{
			List:   func(context.Context, metav1.ListOptions) (runtime.Object, error) { return metadataList(in), nil },
			Filter: Filter{Range: r, Key: uidKey, Foreign: func() { foreign++ }},
		}
		got, err := lw.ListWithContext(t.Context(), metav1.ListOptions{ShardSelector: "something else"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(uids(got), in) || foreign != 0 {
			t.Errorf("the list keeps %v and calls foreign %d times, want %v and 0", uids(got), foreign, in)
		}
	})

	t.Run("of another type", func(t *testing.T) {
		lw := &ListWatch{
			List:   func(context.Context, metav1.ListOptions) (runtime.Object, error) { return &metav1.Status{}, nil },
			Filter: Filter{Range: r, Key: uidKey, Foreign: func() {}},
		}
		if _, err := lw.ListWithContext(t.Context(), metav1.ListOptions{}); err == nil {
			t.Error("a list of a *metav1.Status: no error")
		}
	})
}

// owned is an object named name whose controller owner has the UID owner,
// or that has none when owner is "".
func owned(name, owner string) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if owner != "" {
		o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Memcached", Name: "m", UID: types.UID(owner), Controller: ptr.To(true)}}
	}
	return o
}

// ownerKey is a shard's key by the controller owner's UID.
func ownerKey(o metav1.Object) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil {
		return "", false
	}
	return string(ref.UID), true
}

// event is a watch's event, with its object's name.
type event struct {
	typ  watch.EventType
	name string
	obj  runtime.Object
}

// events is what w sends until it ends, within 10s.
func events(t *testing.T, w watch.Interface) []event {
	t.Helper()
	var got []event
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return got
			}
			name := ""
			if m, ok := e.Object.(metav1.Object); ok {
				name = m.GetName()
			}
			got = append(got, event{e.Type, name, e.Object})
		case <-timeout:
			t.Fatalf("the watch hasn't ended: %v so far", got)
		}
	}
}

// checkEvents checks that got are want's events, with want's objects
// where it names them.
func checkEvents(t *testing.T, got, want []event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the watch sends %v, want %v", got, want)
	}
	for i := range want {
		if got[i].typ != want[i].typ || got[i].name != want[i].name || (want[i].obj != nil && got[i].obj != want[i].obj) {
			t.Errorf("event %d is %s %q (%p), want %s %q (%p)", i, got[i].typ, got[i].name, got[i].obj, want[i].typ, want[i].name, want[i].obj)
		}
	}
}

// A shard's watch passes bookmarks and errors and the shard's events,
// drops other shards', and turns the change of a cached object that leaves
// the shard, an owned object's change of owner, into its deletion.
func TestAShardsWatchKeepsItsOwnEvents(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	r := NewRange(0, 2)
	ours, theirs := shardKeys(rng, r, 2)
	// The cache holds moved and released, owned by this shard's owners.
	cached := map[string]*metav1.PartialObjectMetadata{
		"moved":    owned("moved", ours[0]),
		"released": owned("released", ours[1]),
	}
	known := func(obj any) (any, bool) {
		o, ok := cached[obj.(metav1.Object).GetName()]
		return o, ok
	}

	fake := watch.NewFakeWithChanSize(16, false)
	var asked metav1.ListOptions
	foreign := 0
	lw := &ListWatch{
		Watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			asked = o
			return fake, nil
		},
		Filter: Filter{Range: r, Key: ownerKey, Foreign: func() { foreign++ }},
		Known:  known,
	}
	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "7", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if asked.ShardSelector != "" || asked.ResourceVersion != "7" || !asked.AllowWatchBookmarks {
		t.Errorf("watched with %+v, want no shard selector and the caller's options", asked)
	}

	bookmark := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "8"}}
	status := &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired}
	for _, e := range []watch.Event{
		{Type: watch.Bookmark, Object: bookmark},
		{Type: watch.Added, Object: owned("ours", ours[0])},
		{Type: watch.Added, Object: owned("theirs", theirs[0])},
		{Type: watch.Added, Object: owned("nobodys", "")},
		{Type: watch.Modified, Object: owned("ours", ours[1])},
		{Type: watch.Modified, Object: owned("theirs", theirs[1])},
		{Type: watch.Modified, Object: owned("moved", theirs[0])},
		{Type: watch.Modified, Object: owned("released", "")},
		{Type: watch.Deleted, Object: owned("theirs", theirs[1])},
		{Type: watch.Deleted, Object: owned("ours", ours[1])},
		{Type: watch.Error, Object: status},
	} {
		fake.Action(e.Type, e.Object)
	}
	fake.Stop()

	got, want := events(t, w), []event{
		{watch.Bookmark, "", bookmark},
		{watch.Added, "ours", nil},
		{watch.Modified, "ours", nil},
		{watch.Deleted, "moved", cached["moved"]},
		{watch.Deleted, "released", cached["released"]},
		{watch.Deleted, "ours", nil},
		{watch.Error, "", status},
	}
	checkEvents(t, got, want)
	// The ADDED, MODIFIED and DELETED of other shards' owners', and moved's
	// change to one.
	if foreign != 4 {
		t.Errorf("foreign called %d times, want 4", foreign)
	}
}

// A watch without known, the controller's own resource's, drops a change
// that leaves the shard; with a selector, it watches with it.
func TestAShardsWatchWithoutTheCacheDropsWhatLeaves(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	r := NewRange(2, 4)
	ours, theirs := shardKeys(rng, r, 1)
	fake := watch.NewFakeWithChanSize(4, false)
	var asked metav1.ListOptions
	lw := &ListWatch{
		Watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			asked = o
			return fake, nil
		},
		Filter:   Filter{Range: r, Key: uidKey, Foreign: func() {}},
		Selector: r.Selector("uid"),
	}
	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if asked.ShardSelector != r.Selector("uid") {
		t.Errorf("watched with the shard selector %q, want %q", asked.ShardSelector, r.Selector("uid"))
	}
	fake.Modify(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "theirs", UID: types.UID(theirs[0])}})
	fake.Modify(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "ours", UID: types.UID(ours[0])}})
	fake.Stop()
	var got []string
	for e := range w.ResultChan() {
		got = append(got, string(e.Type)+" "+e.Object.(metav1.Object).GetName())
	}
	if want := []string{"MODIFIED ours"}; !slices.Equal(got, want) {
		t.Errorf("the watch sends %v, want %v", got, want)
	}
}

// A shard's watch that is stopped while an event it kept waits to be
// read leaves no goroutine behind: the reflector stops a watch it no
// longer reads. (apimachinery's watch.Filter leaves one, blocked on the
// send, for every such watch; synctest fails the test on it.)
func TestAStoppedShardWatchLeavesNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		upstream := watch.NewFake()
		w := FilterWatch(upstream, func(e watch.Event) (watch.Event, bool) { return e, true })
		go upstream.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "kept, never read"}})
		synctest.Wait()
		w.Stop()
		synctest.Wait()
		if _, open := <-w.ResultChan(); open {
			t.Error("the stopped watch's channel is open, want it closed")
		}
	})
}
