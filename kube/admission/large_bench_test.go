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

// BenchmarkAdmissionReviewLarge is one review of an update of an object of
// 3 MiB, the API server's request limit, and the object before it, as
// large: a review of 6 MiB, validated and defaulted. Its heap metric is
// the most one review allocated, garbage included: what it can hold at
// once is at most that.
func BenchmarkAdmissionReviewLarge(b *testing.B) {
	lines := make([]string, 30000)
	for i := range lines {
		lines[i] = strings.Repeat("x", 100)
	}
	obj, err := json.Marshal(kube.Object[BigSpec, struct{}]{TypeMeta: metav1.TypeMeta{APIVersion: "admission.example.com/v1", Kind: "Big"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "big"}, Spec: BigSpec{Lines: lines}})
	if err != nil {
		b.Fatal(err)
	}
	body := review(&admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Group: "admission.example.com", Version: "v1", Kind: "Big"},
		Namespace: "default", Name: "big", Operation: admissionv1.Update,
		Object: k8sruntime.RawExtension{Raw: obj}, OldObject: k8sruntime.RawExtension{Raw: obj},
	})
	for _, tc := range []struct {
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
	} {
		b.Run(tc.name, func(b *testing.B) {
			h, err := admission.Webhooks{Hooks: []admission.Webhook{tc.hook}}.Handler(humus.Telemetry{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var peak uint64
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				r := httptest.NewRequest(http.MethodPost, "/admission/"+tc.path, bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				runtime.ReadMemStats(&after)
				if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"allowed":true`)) {
					b.Fatalf("%d %.200s", w.Code, w.Body.Bytes())
				}
				peak = max(peak, after.TotalAlloc-before.TotalAlloc)
			}
			b.ReportMetric(float64(len(body))/(1<<20), "review-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "allocated-MiB")
		})
	}
}
