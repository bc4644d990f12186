package control

import (
	"errors"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAWriteIsMadeUnderTheProofItIsHandedNotItsContexts: the controller's
// own writes take the proof of their term as an argument; a proof in the
// context, which any code the reconcile's context reaches could carry
// along, doesn't make a write without one sendable, and a proof that has
// run out refuses the write before it is sent.
func TestAWriteIsMadeUnderTheProofItIsHandedNotItsContexts(t *testing.T) {
	c := &Controller{} // no clients: a write that got past the proof would panic
	u := &cache.Object{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", ResourceVersion: "7"},
	}
	held := WithProof(t.Context(), func() time.Time { return time.Now().Add(time.Hour) })
	if err := c.ApplyStatus(held, nil, u, "7", []byte(`{}`)); !errors.Is(err, ErrNotLeading) {
		t.Errorf("a status apply handed no proof, in a context carrying one: %v, want ErrNotLeading", err)
	}
	if _, err := c.ApplyFinalizer(held, nil, u, true); !errors.Is(err, ErrNotLeading) {
		t.Errorf("a finalizer apply handed no proof, in a context carrying one: %v, want ErrNotLeading", err)
	}
	ran := NewProof(func() time.Time { return time.Now().Add(-time.Second) })
	if err := c.ApplyStatus(t.Context(), ran, u, "7", []byte(`{}`)); !errors.Is(err, ErrNotLeading) {
		t.Errorf("a status apply under a proof that has run out: %v, want ErrNotLeading", err)
	}
}
