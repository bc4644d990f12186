package control

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/fakeapi"
)

// uidOf returns the metadata.uid of an apply's body.
func uidOf(a fakeapi.Applied) any {
	meta, _ := a.Body["metadata"].(map[string]any)
	return meta["uid"]
}

// Both of the controller's own writes name the object by its UID and are
// conditioned on the resourceVersion they were computed from.
func TestEveryWriteCarriesTheObjectsUID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		var calls counter
		fin := finalizing(func(ctx context.Context, m memcached) error { return nil })
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls), fin))
		time.Sleep(10 * time.Second)
		synctest.Wait()

		f.BeginDeletion(t, cachesGVR, "default", "m")
		time.Sleep(10 * time.Second)
		synctest.Wait()

		statuses, finalizers := f.AppliesTo("status"), f.AppliesTo("")
		if len(statuses) != 1 || len(finalizers) != 2 {
			t.Fatalf("applies = %d of the status and %d of the finalizer, want 1 and 2 (its add and its removal)", len(statuses), len(finalizers))
		}
		for _, a := range append(statuses, finalizers...) {
			if got := uidOf(a); got != "uid-m" {
				t.Errorf("the %q apply's metadata.uid = %v, want uid-m: %v", a.Subresource, got, a.Body)
			}
			// Fenced: conditioned on the version it was computed from, so
			// the API server refuses it once anyone else has written.
			if meta, _ := a.Body["metadata"].(map[string]any); meta["resourceVersion"] == nil || meta["resourceVersion"] == "" {
				t.Errorf("the %q apply has no metadata.resourceVersion: %v", a.Subresource, a.Body)
			}
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestAWriteRefusedForAStaleObjectIsNotRetried(t *testing.T) {
	gr := cachesGVR.GroupResource()
	gk := schema.GroupKind{Group: cachesGVR.Group, Kind: "Memcached"}
	invalid := func(path *field.Path) error {
		return apierrors.NewInvalid(gk, "m", field.ErrorList{field.Invalid(path, "uid-m", "field is immutable")})
	}
	for _, tc := range []struct {
		name  string
		err   error
		stale bool
	}{
		{"NotFound", apierrors.NewNotFound(gr, "m"), true},
		{"Conflict", apierrors.NewConflict(gr, "m", errors.New("uid mismatch: the object has UID uid-m2")), true},
		{"InvalidUID", invalid(field.NewPath("metadata", "uid")), true},
		{"InvalidOtherField", invalid(field.NewPath("status", "readyReplicas")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
				f.Dyn.PrependReactor("patch", "memcacheds", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if a.GetSubresource() == "status" {
						return true, nil, tc.err
					}
					return false, nil, nil
				})
				tel := humustest.NewTelemetry()
				var calls counter
				stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls), observed(tel)))
				time.Sleep(time.Minute)
				synctest.Wait()

				skipped, failed := recordsWithBody(tel, "reconcile skipped a stale object"), recordsWithBody(tel, "reconcile failed")
				if tc.stale {
					if got := calls.Get("m"); got != 1 {
						t.Errorf("reconciles in a minute = %d, want 1: a write refused for a stale object drops the key", got)
					}
					if len(skipped) != 1 || len(failed) != 0 {
						t.Errorf("records: %d stale, %d failed; want 1 and none", len(skipped), len(failed))
					} else if got := recordAttrs(skipped[0])["error"]; !strings.Contains(got, tc.err.Error()) {
						t.Errorf("the stale record's error = %q, want it to carry %q", got, tc.err)
					}
				} else {
					if got := calls.Get("m"); got < 3 {
						t.Errorf("reconciles in a minute = %d, want the error retried", got)
					}
					if len(skipped) != 0 || len(failed) < 3 {
						t.Errorf("records: %d stale, %d failed; want none and a failure per reconcile", len(skipped), len(failed))
					}
				}
				if err := stop(); err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
			})
		})
	}
}
