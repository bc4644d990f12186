package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/admission"
)

type BigSpec struct {
	Lines []string `json:"lines"`
}

var Big = kube.Resource[BigSpec, struct{}]{Group: "admission.example.com", Version: "v1", Kind: "Big", Plural: "bigs", Scope: kube.Namespaced}

// largeReview is a review of an update of an object of 3 MiB, the API
// server's request limit, and the object before it, as large: a review
// of 6 MiB; and the webhooks that validate and default it, the default
// changing one line.
func largeReview(t testing.TB) (body []byte, hooks []struct {
	name, path string
	hook       admission.Webhook
}) {
	lines := make([]string, 30000)
	for i := range lines {
		lines[i] = strings.Repeat("x", 100)
	}
	obj, err := json.Marshal(kube.Object[BigSpec, struct{}]{TypeMeta: metav1.TypeMeta{APIVersion: "admission.example.com/v1", Kind: "Big"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "big"}, Spec: BigSpec{Lines: lines}})
	if err != nil {
		t.Fatal(err)
	}
	body = review(&admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Group: "admission.example.com", Version: "v1", Kind: "Big"},
		Namespace: "default", Name: "big", Operation: admissionv1.Update,
		Object: k8sruntime.RawExtension{Raw: obj}, OldObject: k8sruntime.RawExtension{Raw: obj},
	})
	return body, []struct {
		name, path string
		hook       admission.Webhook
	}{
		{"validate", "validate.bigs.admission.example.com", admission.Validating(Big, admission.Settings{}, func(context.Context, admission.Request, *kube.Object[BigSpec, struct{}], *kube.Object[BigSpec, struct{}]) ([]string, error) {
			return nil, nil
		})},
		{"default", "default.bigs.admission.example.com", admission.Defaulting(Big, admission.Settings{}, func(_ context.Context, _ admission.Request, _, o *kube.Object[BigSpec, struct{}]) ([]string, error) {
			o.Spec.Lines[0] = "changed"
			return nil, nil
		})},
	}
}

// allocated serves body to h at path and returns what it allocated,
// garbage included.
func allocated(t testing.TB, h http.Handler, path string, body []byte) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := httptest.NewRequest(http.MethodPost, "/admission/"+path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	runtime.ReadMemStats(&after)
	if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"allowed":true`)) {
		t.Fatalf("%d %.200s", w.Code, w.Body.Bytes())
	}
	return after.TotalAlloc - before.TotalAlloc
}

// TestALargeReviewAllocatesAFewTimesItsBody: a review of 6 MiB allocates
// at most 5 times its body validated, and 8 times defaulted: the patch is
// computed from one decoding of the object, not three.
func TestALargeReviewAllocatesAFewTimesItsBody(t *testing.T) {
	body, hooks := largeReview(t)
	for _, tc := range hooks {
		h, err := admission.Webhooks{Hooks: []admission.Webhook{tc.hook}}.Handler(humus.Telemetry{})
		if err != nil {
			t.Fatal(err)
		}
		allocated(t, h, tc.path, body) // what is made once
		got := float64(allocated(t, h, tc.path, body)) / float64(len(body))
		limit := map[string]float64{"validate": 5, "default": 8}[tc.name]
		t.Logf("%s: %.1f times the review's %d bytes", tc.name, got, len(body))
		if got > limit {
			t.Errorf("%s: a review of %d bytes allocated %.1f times its body, want at most %v", tc.name, len(body), got, limit)
		}
	}
}

// BenchmarkAdmissionReviewLarge is one review of largeReview's, validated
// and defaulted. Its heap metric is the most one review allocated,
// garbage included: what it can hold at once is at most that.
func BenchmarkAdmissionReviewLarge(b *testing.B) {
	body, hooks := largeReview(b)
	for _, tc := range hooks {
		b.Run(tc.name, func(b *testing.B) {
			h, err := admission.Webhooks{Hooks: []admission.Webhook{tc.hook}}.Handler(humus.Telemetry{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var peak uint64
			for b.Loop() {
				peak = max(peak, allocated(b, h, tc.path, body))
			}
			b.ReportMetric(float64(len(body))/(1<<20), "review-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "allocated-MiB")
		})
	}
}
