package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"k8s.io/apimachinery/pkg/types"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
)

// TestConversionFigures checks what BenchmarkClusterConvertedColdStart
// reads of the webhook's process, through histogramOf, from the
// instruments of the Handler webhookApp serves: the reviews, by outcome
// and by the version asked for, and the objects converted, a counter.
// And that the conversions, of settled Memcacheds, keep nothing in an
// annotation, as memcachedSpecV1beta1 says.
func TestConversionFigures(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tel := humus.Telemetry{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	h, err := memcachedVersions(kube.ConversionWebhook{URL: "https://127.0.0.1:9443/convert"}).Handler(tel)
	if err != nil {
		t.Fatal(err)
	}
	convert(t, h, "cache.example.com/v1beta1", "cache.example.com/v1alpha1", 0, 1)
	convert(t, h, "cache.example.com/v1alpha1", "cache.example.com/v1beta1", 2)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	byVersion := histogramOf(rm, "humus.kube.conversion.duration", "humus.kube.conversion.to")
	if want := map[string]uint64{"cache.example.com/v1beta1": 1, "cache.example.com/v1alpha1": 1}; byVersion.Count != 2 || !maps.Equal(byVersion.Counts, want) {
		t.Errorf("the reviews: %d, by the version asked for %v; want 2, %v", byVersion.Count, byVersion.Counts, want)
	}
	if byOutcome := histogramOf(rm, "humus.kube.conversion.duration", "humus.kube.conversion.outcome"); byOutcome.Counts["success"] != 2 {
		t.Errorf("the reviews by outcome: %v, want 2 successes", byOutcome.Counts)
	}
	if objects := histogramOf(rm, "humus.kube.conversion.objects", ""); objects.Count != 3 {
		t.Errorf("the objects converted: %d, want 3", objects.Count)
	}
}

// convert has h convert the Memcacheds m-<i> for each of is, at the
// apiVersion from, to the apiVersion to, and fails t unless it succeeds.
func convert(t *testing.T, h http.Handler, to, from string, is ...int) {
	t.Helper()
	var objects []any
	for _, i := range is {
		m := newMemcached(i)
		m.SetAPIVersion(from)
		m.SetNamespace("bench")
		m.SetUID(types.UID("uid-" + strconv.Itoa(i)))
		if from != "cache.example.com/v1alpha1" {
			m.Object["spec"] = map[string]any{"replicas": int64(i%3 + 1), "image": "memcached:1"}
		} else {
			m.Object["spec"].(map[string]any)["image"] = "memcached:1"
		}
		m.Object["status"] = map[string]any{"readyReplicas": int64(1), "conditions": []any{map[string]any{
			"type": "Available", "status": "True", "reason": "DeploymentApplied", "message": "",
			"observedGeneration": int64(1), "lastTransitionTime": "2026-12-06T08:00:00Z",
		}}}
		objects = append(objects, m.Object)
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
		"request": map[string]any{"uid": "review-" + to, "desiredAPIVersion": to, "objects": objects},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var review struct {
		Response struct {
			ConvertedObjects []struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"convertedObjects"`
			Result struct {
				Status  string `json:"status"`
				Message string `json:"message"`
			} `json:"result"`
		} `json:"response"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil || review.Response.Result.Status != "Success" {
		t.Fatalf("converting to %s: %d %s (%v)", to, rec.Code, rec.Body.Bytes(), err)
	}
	for i, o := range review.Response.ConvertedObjects {
		if len(o.Metadata.Annotations) > 0 {
			t.Errorf("m-%d converted to %s keeps %v: a round trip between the versions loses it", is[i], to, o.Metadata.Annotations)
		}
	}
}
