package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// A Note's status echoes its spec's note, both omitted when empty.
type noteSpec struct {
	Note string `json:"note,omitempty"`
}

type noteStatus struct {
	Echo string `json:"echo,omitempty"`
}

var notes = Resource[noteSpec, noteStatus]{
	Group: "notes.example.com", Version: "v1", Kind: "Note", Plural: "notes", Scope: Namespaced,
}

// A status whose every field is omitted, applied over one that had some,
// is taken: the apply releases every field the controller owned, which
// leaves the API server a null status, which the CRD's schema allows.
// Before, the API server refused it ("status: Invalid value: "null": in
// body must be of type object"), and the key was retried forever.
func TestClusterAStatusEmptiedIsApplied(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, notes)
	ns := c.Namespace(t)
	tel := humustest.NewTelemetry()
	setup, client := clientAs(t, c, tel, c.AdminToken())
	s := siteSettings(ns, "note-controller")
	var calls counter
	ctrl, err := NewController(setup, client, s, notes, ReconcilerFunc[noteSpec, noteStatus](
		func(ctx context.Context, n Object[noteSpec, noteStatus]) (Result[noteStatus], error) {
			calls.Inc(n.Name)
			st := noteStatus{Echo: n.Spec.Note}
			return Result[noteStatus]{Status: &st}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	served(t, ctrl)
	admin := dynamic.NewForConfigOrDie(c.AdminConfig()).Resource(notes.GVR()).Namespace(ns)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "notes.example.com/v1", "kind": "Note",
		"metadata": map[string]any{"name": "n"}, "spec": map[string]any{"note": "hello"},
	}}
	if _, err := admin.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	echo := func(want string) {
		t.Helper()
		clustertest.Eventually(t, 20*time.Second, func(ctx context.Context) error {
			got, err := admin.Get(ctx, "n", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if e, _, _ := unstructured.NestedString(got.Object, "status", "echo"); e != want {
				return fmt.Errorf("status.echo = %q, want %q", e, want)
			}
			return nil
		})
	}
	echo("hello")
	if _, err := admin.Patch(t.Context(), "n", types.MergePatchType, []byte(`{"spec":{"note":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	echo("")
	time.Sleep(2 * time.Second) // a failed apply would be retried, and recorded
	for _, r := range tel.Records() {
		if r.Body().AsString() == "reconcile failed" {
			t.Errorf("a reconcile failed: %v", recordAttrs(r))
		}
	}
}
