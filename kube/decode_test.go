package kube

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/z5labs/humus/humustest"
)

// reconciledOnce serves a controller of f's Memcached m, recording into
// tel, with readyReplicas as its Reconciler, for 10s, and fails t unless m
// was reconciled once: it returns the status each reconcile was handed, and
// served's stop.
func reconciledOnce(t *testing.T, f *fakeCluster, tel *humustest.Telemetry) (handed []cacheStatus, stop func() error) {
	t.Helper()
	var calls counter
	var mu sync.Mutex
	rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
		mu.Lock()
		handed = append(handed, m.Status)
		mu.Unlock()
		return readyReplicas(&calls)(ctx, m)
	})
	stop = served(t, observedController(t, f, tel, testSettings(), rec))
	time.Sleep(10 * time.Second)
	synctest.Wait()
	if got := calls.Get("m"); got != 1 {
		t.Fatalf("reconciles = %d, want 1", got)
	}
	return handed, stop
}

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
		handed, stop := reconciledOnce(t, f, tel)
		if len(handed) == 0 || handed[0].Conditions != nil {
			t.Errorf("the status handed to the Reconciler = %+v, want the zero status", handed)
		}
		st, _, _ := unstructured.NestedMap(f.Get(t, cachesGVR, "default", "m").Object, "status")
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
			u, err := cache.Decode([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			d, err := typ.Decode(u)
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
			if err := d.StatusErr(); err == nil || err.Error() != tc.wantStatus {
				t.Errorf("statusErr = %v, want %q", err, tc.wantStatus)
			}
		})
	}
}

// undecodable is an object whose spec.size is a string, where the Go type
// has an int32.
func undecodable(name string) *unstructured.Unstructured {
	return object("cache.example.com/v1alpha1", "Memcached", "default", name, map[string]any{"size": "big"})
}

const wantDecodeError = "kube: decoding Memcached default/m: field spec.size: a JSON string can't be a Go int32"

func TestAnObjectThatCannotBeDecodedGetsNoFinalizer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, undecodable("m"))
		tel := humustest.NewTelemetry()
		var calls, finalized counter
		fin := Finalize("cache.example.com/finalizer", func(ctx context.Context, m memcached) error {
			finalized.Inc(m.Name)
			return nil
		})
		stop := served(t, observedController(t, f, tel, testSettings(), readyReplicas(&calls), fin))
		time.Sleep(10 * time.Second)
		synctest.Wait()

		if adds := f.AppliesTo(""); len(adds) != 0 {
			t.Errorf("finalizer applies = %d (%v), want none: the decode fails before the finalizer", len(adds), adds[0].Body)
		}
		if got := f.Get(t, cachesGVR, "default", "m").GetFinalizers(); len(got) != 0 {
			t.Errorf("finalizers = %v, want none", got)
		}
		if calls.Get("m") != 0 || finalized.Get("m") != 0 {
			t.Errorf("the Reconciler ran %d times and f %d, want neither", calls.Get("m"), finalized.Get("m"))
		}
		failed := recordsWithBody(tel, "reconcile failed")
		if len(failed) == 0 {
			t.Fatal("no reconcile failed record")
		}
		attrs := recordAttrs(failed[0])
		if got := attrs["error"]; got != wantDecodeError {
			t.Errorf("the record's error = %q, want %q", got, wantDecodeError)
		}
		if attrs[control.AttrObjectName] != "m" || attrs[control.AttrNamespace] != "default" {
			t.Errorf("the record's attributes = %v, want the object default/m", attrs)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// A status that can't be decoded (a field of the wrong type, written by an
// older version of the type) is the controller's own output, which only it
// can mend: the reconcile is handed the object with a zero status, with a
// WARN record naming the field, and the status it returns is applied, so
// the next decode succeeds (issue 22, point 10: before, the decode failed
// every time, and the controller could never write the status that would
// mend it). A spec that can't be decoded is an error still.
func TestAStatusThatCannotBeDecodedIsReconciledFromAZeroStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := cacheObject("default", "m", 3)
		m.Object["status"] = map[string]any{"readyReplicas": "three", "conditions": []any{}}
		f := newFakeCluster(t, listKinds, m)
		tel := humustest.NewTelemetry()
		handed, stop := reconciledOnce(t, f, tel)
		if len(handed) == 0 || handed[0].ReadyReplicas != 0 || handed[0].Conditions != nil {
			t.Errorf("the status handed to the Reconciler = %+v, want the zero status", handed)
		}
		st, _, _ := unstructured.NestedMap(f.Get(t, cachesGVR, "default", "m").Object, "status")
		if st["readyReplicas"] != int64(3) {
			t.Errorf("the status the API server holds = %v, want readyReplicas 3, the Reconciler's", st)
		}
		warned := recordsWithBody(tel, "the status can't be decoded: reconciling from a zero status")
		if len(warned) != 1 {
			t.Fatalf("WARN records of the status = %d, want 1", len(warned))
		}
		const want = "kube: decoding Memcached default/m: field status.readyReplicas: a JSON string can't be a Go int32"
		if got := recordAttrs(warned[0])["error"]; got != want {
			t.Errorf("the record's error = %q, want %q", got, want)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestADeletingObjectThatCannotBeDecodedIsRetriedWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, deleting(undecodable("m"), "cache.example.com/finalizer"))
		tel := humustest.NewTelemetry()
		var calls, finalized counter
		fin := Finalize("cache.example.com/finalizer", func(ctx context.Context, m memcached) error {
			finalized.Inc(m.Name)
			return nil
		})
		s := testSettings()
		s.RetryBaseDelay, s.RetryMaxDelay = time.Second, 8*time.Second
		stop := served(t, observedController(t, f, tel, s, readyReplicas(&calls), fin))
		sleepUntil(start, time.Minute)

		if got := finalized.Get("m"); got != 0 {
			t.Errorf("f ran %d times, want never: the object can't be decoded", got)
		}
		if got := f.Get(t, cachesGVR, "default", "m").GetFinalizers(); len(got) != 1 {
			t.Errorf("finalizers = %v, want the finalizer kept", got)
		}
		if got := len(f.AppliesTo("")); got != 0 {
			t.Errorf("finalizer applies = %d, want none", got)
		}
		for i, r := range recordsWithBody(tel, "reconcile failed") {
			if got := recordAttrs(r)["error"]; got != wantDecodeError {
				t.Errorf("record %d's error = %q, want %q", i, got, wantDecodeError)
			}
		}
		// Every failed reconcile is a span; its records are fewer (see
		// failureLog).
		failed := reconcileSpansOf(tel, "Memcached", "m")
		var gaps []time.Duration
		for i, s := range failed {
			if got := s.Status().Description; got != wantDecodeError {
				t.Errorf("reconcile %d's status = %q, want %q", i, got, wantDecodeError)
			}
			if i > 0 {
				gaps = append(gaps, s.StartTime().Sub(failed[i-1].StartTime()))
			}
		}
		// At 0, 1, 3, 7, 15, 23, 31, 39, 47 and 55s.
		want := []time.Duration{1, 2, 4, 8, 8, 8, 8, 8, 8}
		if len(gaps) != len(want) {
			t.Fatalf("failed reconciles in a minute = %d with gaps %v, want %d: one per backoff, doubling from 1s to 8s", len(failed), gaps, len(want)+1)
		}
		for i, w := range want {
			if gaps[i] != w*time.Second {
				t.Errorf("retry %d came after %v, want %v (gaps %v)", i+1, gaps[i], w*time.Second, gaps)
			}
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}
