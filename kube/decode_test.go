package kube

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/z5labs/humus/humustest"
)

// A status whose decode fails in a type's own UnmarshalJSON (a condition's
// lastTransitionTime of "yesterday", stored through a looser or older CRD)
// is reconciled from a zero status as a field of the wrong type is, and
// the Reconciler's status mends it (issue 35, point 3: before, the time
// parse error wasn't recognised as the status's, every retry failed, and
// the status apply that would mend the object was never made).
func TestAStatusWhoseTimeCannotBeParsedIsReconciledFromAZeroStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := cacheObject("default", "m", 3)
		m.Object["status"] = map[string]any{"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Up", "message": "", "lastTransitionTime": "yesterday",
		}}}
		f := newFakeCluster(t, listKinds, m)
		tel := humustest.NewTelemetry()
		var calls counter
		var handed []cacheStatus
		var mu sync.Mutex
		rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
			mu.Lock()
			handed = append(handed, m.Status)
			mu.Unlock()
			return readyReplicas(&calls)(ctx, m)
		})
		stop := served(t, observedController(t, f, tel, testSettings(), rec))
		time.Sleep(10 * time.Second)
		synctest.Wait()

		if got := calls.get("m"); got != 1 {
			t.Fatalf("reconciles = %d, want 1", got)
		}
		if len(handed) == 0 || handed[0].Conditions != nil {
			t.Errorf("the status handed to the Reconciler = %+v, want the zero status", handed)
		}
		st, _, _ := unstructured.NestedMap(f.get(t, cachesGVR, "default", "m").Object, "status")
		if st["readyReplicas"] != int64(3) || st["conditions"] != nil {
			t.Errorf("the status the API server holds = %v, want readyReplicas 3 and no conditions, the Reconciler's", st)
		}
		warned := recordsWithBody(tel, "the status can't be decoded: reconciling from a zero status")
		if len(warned) != 1 {
			t.Fatalf("WARN records of the status = %d, want 1", len(warned))
		}
		const want = `kube: decoding Memcached default/m: field status.conditions: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`
		if got := recordAttrs(warned[0])["error"]; got != want {
			t.Errorf("the record's error = %q, want %q", got, want)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// quantityStatus is a status with a resource.Quantity, and a type of its
// own whose UnmarshalJSON refuses what isn't "ok".
type quantityStatus struct {
	Memory resource.Quantity `json:"memory,omitempty"`
	Mood   mood              `json:"mood,omitempty"`
	Ready  int32             `json:"ready,omitempty"`
}

type mood string

func (m *mood) UnmarshalJSON(b []byte) error {
	if string(b) != `"ok"` {
		return errors.New("a mood is ok")
	}
	*m = "ok"
	return nil
}

// Any error decoding the status alone gives the zero status and says why,
// naming the status's member where it failed; an error in the rest of the
// object is the decode's error, whatever the status holds.
func TestAnyErrorDecodingTheStatusAloneGivesAZeroStatus(t *testing.T) {
	typ := resourceType[cacheSpec, quantityStatus]{}
	for _, tc := range []struct {
		name       string
		json       string
		wantErr    string // the decode's error, or "" for none
		wantStatus string // statusErr's
	}{
		{
			name:       "a quantity",
			json:       `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m","namespace":"default"},"status":{"memory":"big","ready":2},"spec":{"size":3}}`,
			wantStatus: "kube: decoding Memcached default/m: field status.memory: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
		},
		{
			name:       "a type's own UnmarshalJSON",
			json:       `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m","namespace":"default"},"spec":{"size":3},"status":{"mood":"grim"}}`,
			wantStatus: "kube: decoding Memcached default/m: field status.mood: a mood is ok",
		},
		{
			name:       "a field of the wrong type",
			json:       `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m","namespace":"default"},"spec":{"size":3},"status":{"ready":"two"}}`,
			wantStatus: "kube: decoding Memcached default/m: field status.ready: a JSON string can't be a Go int32",
		},
		{
			name:    "a spec of the wrong type, and a bad status",
			json:    `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m","namespace":"default"},"status":{"memory":"big"},"spec":{"size":"big"}}`,
			wantErr: wantDecodeError,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := decodeCached([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			d, err := typ.decode(u)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("decode = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode = %v, want the object with a zero status", err)
			}
			obj := d.(*resourceObject[cacheSpec, quantityStatus]).obj
			if obj.Spec.Size != 3 || obj.Name != "m" || obj.Namespace != "default" {
				t.Errorf("the object = %+v, want default/m of size 3", obj)
			}
			if obj.Status.Ready != 0 || obj.Status.Mood != "" || !obj.Status.Memory.IsZero() {
				t.Errorf("the status = %+v, want the zero status", obj.Status)
			}
			if err := d.statusErr(); err == nil || err.Error() != tc.wantStatus {
				t.Errorf("statusErr = %v, want %q", err, tc.wantStatus)
			}
		})
	}
}
