package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/admission"
)

type WidgetSpec struct {
	Size  int32  `json:"size,omitempty"`
	Host  string `json:"host"`
	Image string `json:"image,omitempty"`
}

type WidgetStatus struct {
	Ready bool `json:"ready,omitempty"`
}

var Widget = kube.Resource[WidgetSpec, WidgetStatus]{
	Group: "admission.example.com", Version: "v1", Kind: "Widget", Plural: "widgets", Scope: kube.Namespaced,
}

type widget = kube.Object[WidgetSpec, WidgetStatus]

// serve returns the handler of hooks, failing t on an error.
func humustestTelemetry() humus.Telemetry { return humustest.NewTelemetry().Telemetry() }

func serve(t *testing.T, tel *humustest.Telemetry, hooks ...admission.Webhook) http.Handler {
	t.Helper()
	h, err := admission.Webhooks{Hooks: hooks}.Handler(tel.Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// post sends h a review of req at the webhook name, and returns its
// response, failing t on anything but a 200 with one.
func post(t *testing.T, h http.Handler, name string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	code, body := postRaw(h, name, review(req))
	if code != http.StatusOK {
		t.Fatalf("POST %s: %d %s", name, code, body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil {
		t.Fatalf("POST %s: no response: %s", name, body)
	}
	if out.Response.UID != req.UID {
		t.Errorf("the response's UID is %q, want the request's %q", out.Response.UID, req.UID)
	}
	return out.Response
}

func review(req *admissionv1.AdmissionRequest) []byte {
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		panic(err)
	}
	return b
}

func postRaw(h http.Handler, name string, body []byte) (int, []byte) {
	r := httptest.NewRequest(http.MethodPost, "/admission/"+name, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

// widgetRequest is a review's request of op on the Widgets old and obj,
// either nil.
func widgetRequest(op admissionv1.Operation, old, obj any) *admissionv1.AdmissionRequest {
	raw := func(v any) runtime.RawExtension {
		switch v := v.(type) {
		case nil:
			return runtime.RawExtension{}
		case string:
			return runtime.RawExtension{Raw: []byte(v)}
		}
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return &admissionv1.AdmissionRequest{
		UID:       "7e1c",
		Kind:      metav1.GroupVersionKind{Group: "admission.example.com", Version: "v1", Kind: "Widget"},
		Resource:  metav1.GroupVersionResource{Group: "admission.example.com", Version: "v1", Resource: "widgets"},
		Namespace: "ns",
		Name:      "w",
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}},
		Object:    raw(obj),
		OldObject: raw(old),
	}
}

func newWidget(size int32, host string) widget {
	return widget{TypeMeta: metav1.TypeMeta{APIVersion: "admission.example.com/v1", Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}, Spec: WidgetSpec{Size: size, Host: host}}
}

func validateSize(_ context.Context, _ admission.Request, _, obj *widget) ([]string, error) {
	var errs field.ErrorList
	if obj.Spec.Size > 3 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "size"), obj.Spec.Size, "must be 3 or less"))
	}
	if obj.Spec.Host == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "host"), "a Widget serves a host"))
	}
	return nil, errs.ToAggregate()
}

func TestAValidatorsFieldErrorsRefuseTheWriteAsInvalid(t *testing.T) {
	h := serve(t, humustest.NewTelemetry(), admission.Validating(Widget, admission.Settings{}, validateSize))
	resp := post(t, h, "validate.widgets.admission.example.com", widgetRequest(admissionv1.Create, nil, newWidget(5, "")))
	if resp.Allowed {
		t.Fatal("a Widget of size 5 with no host was allowed")
	}
	s := resp.Result
	if s == nil || s.Code != http.StatusUnprocessableEntity || s.Reason != metav1.StatusReasonInvalid {
		t.Fatalf("the refusal is %+v, want a 422 Invalid", s)
	}
	if s.Details == nil || len(s.Details.Causes) != 2 {
		t.Fatalf("the refusal's details are %+v, want two causes", s.Details)
	}
	if c := s.Details.Causes[0]; c.Field != "spec.size" || c.Type != metav1.CauseTypeFieldValueInvalid || !strings.Contains(c.Message, "must be 3 or less") {
		t.Errorf("the first cause is %+v, want spec.size's", c)
	}
	if c := s.Details.Causes[1]; c.Field != "spec.host" || c.Type != metav1.CauseTypeFieldValueRequired {
		t.Errorf("the second cause is %+v, want spec.host's", c)
	}
	if want := `Widget.admission.example.com "w" is invalid: [spec.size: Invalid value: 5: must be 3 or less, spec.host: Required value: a Widget serves a host]`; s.Message != want {
		t.Errorf("the message is\n%s\nwant\n%s", s.Message, want)
	}
	if s.Details.Group != "admission.example.com" || s.Details.Kind != "Widget" || s.Details.Name != "w" {
		t.Errorf("the details name %s %s %s, want the Widget w", s.Details.Group, s.Details.Kind, s.Details.Name)
	}

	if resp := post(t, h, "validate.widgets.admission.example.com", widgetRequest(admissionv1.Create, nil, newWidget(2, "a.example.com"))); !resp.Allowed {
		t.Errorf("a valid Widget was refused: %+v", resp.Result)
	}
}

func TestAValidatorsOtherErrorsRefuseTheWrite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		code   int32
		reason metav1.StatusReason
		msg    string
	}{
		{"a plain error is Forbidden", errors.New("only ops may resize"), 403, metav1.StatusReasonForbidden, "only ops may resize"},
		{"an API status is as it says", apiConflict(), 409, metav1.StatusReasonConflict, "in use"},
		{"one wrapped field error is Invalid", fmt.Errorf("checking: %w", field.Forbidden(field.NewPath("spec", "image"), "set by the operator")), 422, metav1.StatusReasonInvalid, "spec.image: Forbidden: set by the operator"},
		{"field errors joined with another are Forbidden", errors.Join(field.Forbidden(field.NewPath("spec"), "x"), errors.New("and more")), 403, metav1.StatusReasonForbidden, "and more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := serve(t, humustest.NewTelemetry(), admission.Validating(Widget, admission.Settings{}, func(context.Context, admission.Request, *widget, *widget) ([]string, error) {
				return []string{"checked"}, tc.err
			}))
			resp := post(t, h, "validate.widgets.admission.example.com", widgetRequest(admissionv1.Create, nil, newWidget(1, "h")))
			if resp.Allowed || resp.Result == nil {
				t.Fatalf("allowed: %+v", resp)
			}
			if resp.Result.Code != tc.code || resp.Result.Reason != tc.reason || !strings.Contains(resp.Result.Message, tc.msg) {
				t.Errorf("the refusal is %d %s %q, want %d %s with %q", resp.Result.Code, resp.Result.Reason, resp.Result.Message, tc.code, tc.reason, tc.msg)
			}
			if len(resp.Warnings) != 1 || resp.Warnings[0] != "checked" {
				t.Errorf("the warnings are %q, want the function's", resp.Warnings)
			}
		})
	}
}

func apiConflict() error {
	return &statusErr{metav1.Status{Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict, Message: "the Widget is in use"}}
}

type statusErr struct{ s metav1.Status }

func (e *statusErr) Error() string         { return e.s.Message }
func (e *statusErr) Status() metav1.Status { return e.s }

func TestAValidatorIsHandedTheRequestAndBothObjects(t *testing.T) {
	type call struct {
		req      admission.Request
		old, obj *widget
	}
	var calls []call
	h := serve(t, humustest.NewTelemetry(), admission.Validating(Widget, admission.Settings{Operations: []admission.Operation{admission.Create, admission.Update, admission.Delete}},
		func(_ context.Context, req admission.Request, old, obj *widget) ([]string, error) {
			calls = append(calls, call{req, old, obj})
			return []string{"seen " + string(req.Operation)}, nil
		}))
	dry := true
	create := widgetRequest(admissionv1.Create, nil, newWidget(1, "a"))
	create.DryRun = &dry
	for _, req := range []*admissionv1.AdmissionRequest{
		create,
		widgetRequest(admissionv1.Update, newWidget(1, "a"), newWidget(2, "b")),
		widgetRequest(admissionv1.Delete, newWidget(2, "b"), nil),
	} {
		resp := post(t, h, "validate.widgets.admission.example.com", req)
		if !resp.Allowed || len(resp.Warnings) != 1 || resp.Warnings[0] != "seen "+string(req.Operation) {
			t.Errorf("%s: allowed %v, warnings %q", req.Operation, resp.Allowed, resp.Warnings)
		}
	}
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3", len(calls))
	}
	c := calls[0]
	if c.req.Operation != admission.Create || !c.req.DryRun || c.req.UserInfo.Username != "alice" || c.req.Namespace != "ns" || c.req.Name != "w" || c.req.UID != "7e1c" {
		t.Errorf("the create's request is %+v", c.req)
	}
	if c.old != nil || c.obj == nil || c.obj.Spec.Host != "a" {
		t.Errorf("the create was handed old %v, obj %v", c.old, c.obj)
	}
	if c := calls[1]; c.req.DryRun || c.old == nil || c.old.Spec.Host != "a" || c.obj == nil || c.obj.Spec.Host != "b" {
		t.Errorf("the update was handed %+v", c)
	}
	if c := calls[2]; c.old == nil || c.old.Spec.Host != "b" || c.obj != nil {
		t.Errorf("the delete was handed old %v, obj %v", c.old, c.obj)
	}
}

func TestAPanicRefusesTheWriteAndTheWebhookGoesOn(t *testing.T) {
	tel := humustest.NewTelemetry()
	h := serve(t, tel, admission.Validating(Widget, admission.Settings{}, func(_ context.Context, _ admission.Request, _, obj *widget) ([]string, error) {
		if obj.Spec.Size == 13 {
			var m map[string]int
			m["unlucky"]++ //nolint:staticcheck // a nil map: the panic the test is of
		}
		return nil, nil
	}))
	resp := post(t, h, "validate.widgets.admission.example.com", widgetRequest(admissionv1.Create, nil, newWidget(13, "h")))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != 500 || resp.Result.Reason != metav1.StatusReasonInternalError {
		t.Fatalf("a panic answered %+v, want a 500 refusal", resp)
	}
	if want := "admission: validate.widgets.admission.example.com panicked on Widget ns/w: assignment to entry in nil map"; resp.Result.Message != want {
		t.Errorf("the refusal says %q, want %q", resp.Result.Message, want)
	}
	if resp := post(t, h, "validate.widgets.admission.example.com", widgetRequest(admissionv1.Create, nil, newWidget(1, "h"))); !resp.Allowed {
		t.Errorf("the write after the panic was refused: %+v", resp.Result)
	}
	recs := tel.Records()
	var found bool
	for _, r := range recs {
		attrs := map[string]string{}
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			attrs[string(kv.Key)] = kv.Value.String()
			return true
		})
		if r.Body().AsString() == "admission webhook panicked" && strings.Contains(attrs["exception.stacktrace"], "TestAPanicRefusesTheWrite") {
			found = true
		}
	}
	if !found {
		t.Errorf("no ERROR record of the panic with its stack among %d records", len(recs))
	}
}

func TestAnObjectThatDoesntDecodeIsRefusedNamingTheField(t *testing.T) {
	h := serve(t, humustest.NewTelemetry(), admission.Validating(Widget, admission.Settings{}, validateSize))
	req := widgetRequest(admissionv1.Create, nil, `{"apiVersion":"admission.example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":"big","host":"h"}}`)
	resp := post(t, h, "validate.widgets.admission.example.com", req)
	if resp.Allowed || resp.Result.Code != 400 || !strings.Contains(resp.Result.Message, "field spec.size: a JSON string can't be a Go int32") {
		t.Errorf("an undecodable Widget answered %+v", resp.Result)
	}
}

func TestAReviewOfAnotherKindIsRefused(t *testing.T) {
	h := serve(t, humustest.NewTelemetry(), admission.Validating(Widget, admission.Settings{}, validateSize))
	req := widgetRequest(admissionv1.Create, nil, newWidget(1, "h"))
	req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	resp := post(t, h, "validate.widgets.admission.example.com", req)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "the review is of a /v1, Kind=Pod") {
		t.Errorf("a Pod's review answered %+v", resp.Result)
	}
}

func TestTheHandlersRefusals(t *testing.T) {
	h := serve(t, humustest.NewTelemetry(), admission.Validating(Widget, admission.Settings{}, validateSize))
	if code, body := postRaw(h, "nothing.example.com", review(widgetRequest(admissionv1.Create, nil, newWidget(1, "h")))); code != 404 || !strings.Contains(string(body), "validate.widgets.admission.example.com") {
		t.Errorf("an unknown webhook: %d %s", code, body)
	}
	if code, body := postRaw(h, "validate.widgets.admission.example.com", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)); code != 400 || !strings.Contains(string(body), "no request") {
		t.Errorf("a review without a request: %d %s", code, body)
	}
	if code, body := postRaw(h, "validate.widgets.admission.example.com", []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}`)); code != 400 || !strings.Contains(string(body), "admission.k8s.io/v1beta1") {
		t.Errorf("a v1beta1 review: %d %s", code, body)
	}
	if code, _ := postRaw(h, "validate.widgets.admission.example.com", []byte(`{`)); code != 400 {
		t.Errorf("a broken review: %d", code)
	}
	big := append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"`), bytes.Repeat([]byte("a"), admission.MaxReviewBytes)...)
	big = append(big, `"}}`...)
	r := httptest.NewRequest(http.MethodPost, "/admission/validate.widgets.admission.example.com", struct{ *bytes.Reader }{bytes.NewReader(big)}) // no ContentLength
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = -1
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a review over MaxReviewBytes: %d", w.Code)
	}
	r = httptest.NewRequest(http.MethodGet, "/admission/validate.widgets.admission.example.com", nil)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("a GET: %d", w.Code)
	}
}

func TestADefaultersChangeIsAnsweredAsAJSONPatch(t *testing.T) {
	h := serve(t, humustest.NewTelemetry(), admission.Defaulting(Widget, admission.Settings{}, func(_ context.Context, _ admission.Request, _, obj *widget) ([]string, error) {
		if obj.Spec.Size == 0 {
			obj.Spec.Size = 1
		}
		if obj.Labels == nil {
			obj.Labels = map[string]string{}
		}
		obj.Labels["app.kubernetes.io/name"] = obj.Spec.Host
		return []string{"defaulted"}, nil
	}))
	// A field the Go type doesn't know, spec.extra, is kept by the patch.
	raw := `{"apiVersion":"admission.example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"host":"a.example.com","extra":{"x":[1,2]}}}`
	resp := post(t, h, "default.widgets.admission.example.com", widgetRequest(admissionv1.Create, nil, raw))
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("answered %+v", resp)
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("the patch %s: %v", resp.Patch, err)
	}
	got, err := patch.Apply([]byte(raw))
	if err != nil {
		t.Fatalf("applying the patch %s: %v", resp.Patch, err)
	}
	want := `{"apiVersion":"admission.example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","labels":{"app.kubernetes.io/name":"a.example.com"}},"spec":{"host":"a.example.com","size":1,"extra":{"x":[1,2]}}}`
	if !jsonpatch.Equal(got, []byte(want)) {
		t.Errorf("the patch %s makes\n%s\nwant\n%s", resp.Patch, got, want)
	}

	// Nothing to change: no patch.
	resp = post(t, h, "default.widgets.admission.example.com", widgetRequest(admissionv1.Create, nil, string(got)))
	if !resp.Allowed || resp.Patch != nil || resp.PatchType != nil {
		t.Errorf("a defaulted Widget was answered with the patch %s", resp.Patch)
	}
}

func TestAKindsWebhook(t *testing.T) {
	pods := kube.Kind[corev1.Pod]{GVR: corev1.SchemeGroupVersion.WithResource("pods"), Kind: "Pod", Scope: kube.Namespaced}
	h := serve(t, humustest.NewTelemetry(), admission.Defaulting(pods, admission.Settings{}, func(_ context.Context, _ admission.Request, _, pod *corev1.Pod) ([]string, error) {
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].ImagePullPolicy == "" {
				pod.Spec.Containers[i].ImagePullPolicy = corev1.PullIfNotPresent
			}
		}
		return nil, nil
	}))
	raw := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"a","image":"busybox"}]}}`
	req := &admissionv1.AdmissionRequest{UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: "ns", Name: "p", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(raw)}}
	resp := post(t, h, "default.pods.core", req)
	if want := `[{"op":"add","path":"/spec/containers/0/imagePullPolicy","value":"IfNotPresent"}]`; string(resp.Patch) != want {
		t.Errorf("the patch is %s, want %s", resp.Patch, want)
	}
}
