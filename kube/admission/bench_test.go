package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/clustertest"
)

// benchWidget is a Widget as the API server sends it in a review of an
// update: its metadata with three managedFields entries, as a settled
// object has (its client's, the controller's status, and an apply).
func benchWidget(size int32) []byte {
	mf := func(manager, op, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), APIVersion: "admission.example.com/v1",
			Time: &metav1.Time{Time: time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)}, FieldsType: "FieldsV1", Subresource: sub,
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:host":{},"f:image":{},"f:size":{}}}`)}
	}
	w := widget{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.example.com/v1", Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sessions", UID: "5f0c9e1e-6f1b-4c55-9f39-2f1b9d4f2a11", ResourceVersion: "48213", Generation: 3,
			CreationTimestamp: metav1.Time{Time: time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)},
			Labels:            map[string]string{"app.kubernetes.io/name": "sessions", "app.kubernetes.io/managed-by": "widget-operator"},
			Finalizers:        []string{"admission.example.com/cleanup"},
			ManagedFields:     []metav1.ManagedFieldsEntry{mf("kubectl", "Update", ""), mf("widget-operator", "Apply", "status"), mf("kubectl-client-side-apply", "Update", "")},
		},
		Spec:   WidgetSpec{Size: size, Host: "sessions.example.com", Image: "nginx:1.27"},
		Status: WidgetStatus{Ready: true},
	}
	b, err := json.Marshal(w)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkAdmissionReview is one AdmissionReview of an update of a
// settled Widget through the Handler's ServeHTTP, no-op telemetry, no TLS:
// validating (the ValidateFunc checks the size and the host), and
// defaulting (the DefaultFunc sets a label: a patch of one operation).
func BenchmarkAdmissionReview(b *testing.B) {
	body := review(&admissionv1.AdmissionRequest{
		UID: "7e1c", Kind: metav1.GroupVersionKind{Group: "admission.example.com", Version: "v1", Kind: "Widget"},
		Resource:  metav1.GroupVersionResource{Group: "admission.example.com", Version: "v1", Resource: "widgets"},
		Namespace: "default", Name: "sessions", Operation: admissionv1.Update,
		Object: runtime.RawExtension{Raw: benchWidget(3)}, OldObject: runtime.RawExtension{Raw: benchWidget(2)},
	})
	for _, tc := range []struct {
		name, path string
		hook       admission.Webhook
	}{
		{"validate", "validate.widgets.admission.example.com", admission.Validating(Widget, admission.Settings{}, func(_ context.Context, _ admission.Request, old, obj *widget) ([]string, error) {
			var errs field.ErrorList
			if obj.Spec.Size > 3 {
				errs = append(errs, field.Invalid(field.NewPath("spec", "size"), obj.Spec.Size, "must be 3 or less"))
			}
			if old != nil && old.Spec.Host != obj.Spec.Host {
				errs = append(errs, field.Invalid(field.NewPath("spec", "host"), obj.Spec.Host, "is immutable"))
			}
			return nil, errs.ToAggregate()
		})},
		{"default", "default.widgets.admission.example.com", admission.Defaulting(Widget, admission.Settings{}, func(_ context.Context, _ admission.Request, _, obj *widget) ([]string, error) {
			obj.Labels["admission.example.com/size"] = fmt.Sprint(obj.Spec.Size)
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
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/admission/"+tc.path, bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"allowed":true`)) {
					b.Fatalf("%d %s", w.Code, w.Body.Bytes())
				}
			}
		})
	}
}

// BenchmarkClusterAdmissionWrite creates Widgets one after another on the
// real control plane, of a resource with no admission, with a validating
// webhook (served on webhook.Service over TLS, in this process), and with
// the equivalent ValidatingAdmissionPolicy, and reports each create's
// latency as the API server's audit log has it (request received to
// response complete) and as the client saw it: the median and the p99.
func BenchmarkClusterAdmissionWrite(b *testing.B) {
	c := clustertest.Get(b)
	plain := Widget
	plain.Kind, plain.Plural = "Plain", "plains"
	c.Install(b, Widget, Gadget, plain)
	for _, mode := range []string{"none", "webhook", "policy"} {
		b.Run(mode, func(b *testing.B) {
			r := plain
			switch mode {
			case "webhook":
				r = Widget
				srv := newHookServer(b, faultHooks("bench", "Fail", nil, nil))
				install(b, c, srv.hooks)
			case "policy":
				r = Gadget
				var g widget
				installPolicy(b, c, admission.PolicyFor(Gadget, &g, admission.PolicySettings{},
					admission.Validation("%s <= 3", "must be 3 or less", admission.Field(&g.Spec.Size))))
			}
			ns := c.Namespace(b)
			res := dynamic.NewForConfigOrDie(c.AdminConfig()).Resource(r.GVR()).Namespace(ns)
			awaitRefused(b, res, r.Kind, ns, mode != "none")
			var client []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				if _, err := res.Create(context.Background(), objectOf(r.Kind, ns, fmt.Sprintf("b-%d", i), map[string]any{"size": int64(2), "host": "h"}), metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				client = append(client, time.Since(start))
			}
			b.StopTimer()
			var server []time.Duration
			for _, e := range c.Audit(b) {
				if e.Verb == "create" && e.Namespace == ns && e.Resource == r.Plural && e.Code == http.StatusCreated {
					server = append(server, e.StageTime.Sub(e.RequestReceived))
				}
			}
			p := func(ds []time.Duration, q float64) float64 {
				if len(ds) == 0 {
					return 0
				}
				slices.Sort(ds)
				return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(p(server, 0.5), "server-ms-p50")
			b.ReportMetric(p(server, 0.99), "server-ms-p99")
			b.ReportMetric(p(client, 0.5), "client-ms-p50")
			b.ReportMetric(p(client, 0.99), "client-ms-p99")
		})
	}
}

// awaitRefused waits until a dry run of a Widget of size 5 is refused, when
// refused, for the admission to be in effect.
func awaitRefused(b testing.TB, res dynamic.ResourceInterface, kind, ns string, refused bool) {
	b.Helper()
	if !refused {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := res.Create(context.Background(), objectOf(kind, ns, "probe", map[string]any{"size": int64(5), "host": "probe"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "3 or less") {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the admission wasn't in effect within 30s: the dry run answered %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
