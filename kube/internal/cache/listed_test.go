package cache

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

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
			lw := MarkingListed(toolscache.ListWatch{
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
				obj, err := OwnedMetadata(e.Object)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, obj.(*Owned).Listed)
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
