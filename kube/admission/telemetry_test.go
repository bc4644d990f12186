package admission_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/admission"
)

// TestAReviewsTelemetry checks a review's span and its duration's
// histogram, by webhook, operation and outcome.
func TestAReviewsTelemetry(t *testing.T) {
	tel := humustest.NewTelemetry()
	h := serve(t, tel, admission.Validating(Widget, admission.Settings{}, validateSize))
	post(t, h, "validate.widgets.admission.example.com", widgetRequest(admissionv1.Create, nil, newWidget(1, "h")))
	post(t, h, "validate.widgets.admission.example.com", widgetRequest(admissionv1.Update, newWidget(1, "h"), newWidget(9, "h")))

	spans := tel.Spans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want one a review", len(spans))
	}
	for i, want := range []string{"allowed", "refused"} {
		s := spans[i]
		attrs := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value.String()
		}
		if s.Name() != "validate Widget" || attrs["humus.kube.admission.outcome"] != want || attrs["humus.kube.admission.webhook"] != "validate.widgets.admission.example.com" || attrs["humus.kube.admission.name"] != "w" {
			t.Errorf("span %d: %s %v, want validate Widget, %s", i, s.Name(), attrs, want)
		}
	}

	rm, err := tel.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "humus.kube.admission.duration" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				op, _ := dp.Attributes.Value("humus.kube.admission.operation")
				o, _ := dp.Attributes.Value("humus.kube.admission.outcome")
				counts[op.AsString()+" "+o.AsString()] += dp.Count
			}
		}
	}
	if counts["CREATE allowed"] != 1 || counts["UPDATE refused"] != 1 || len(counts) != 2 {
		t.Errorf("humus.kube.admission.duration counts %v, want one CREATE allowed and one UPDATE refused", counts)
	}
}
