package admission_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/admission/policytest"
)

var update = flag.Bool("update", false, "rewrite the golden configurations and policy")

// golden fails t unless got is the file at path; with -update, it writes
// got there first. test is the test that writes it.
func golden(t *testing.T, path string, got []byte, test string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is out of date: go test -run %s -update rewrites it; it should be\n%s", path, test, got)
	}
}

func widgetWebhooks() admission.Webhooks {
	pods := kube.Kind[corev1.Pod]{GVR: corev1.SchemeGroupVersion.WithResource("pods"), Kind: "Pod", Scope: kube.Namespaced}
	return admission.Webhooks{
		Name:     "widget-operator",
		Endpoint: admission.Endpoint{Service: &kube.ServiceReference{Namespace: "widget-system", Name: "webhook", Path: "/admission"}},
		Hooks: []admission.Webhook{
			admission.Validating(Widget, admission.Settings{
				Operations:    []admission.Operation{admission.Create, admission.Update, admission.Delete},
				FailurePolicy: admissionregistrationv1.Ignore,
				Timeout:       5 * time.Second,
				MatchConditions: []admissionregistrationv1.MatchCondition{
					{Name: "not-the-operator", Expression: "request.userInfo.username != 'system:serviceaccount:widget-system:operator'"},
				},
			}, validateSize),
			admission.Defaulting(Widget, admission.Settings{SideEffects: true}, func(context.Context, admission.Request, *widget, *widget) ([]string, error) { return nil, nil }),
			admission.Validating(pods, admission.Settings{
				Name:              "pods.widget.example.com",
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"widgets": "on"}},
			}, func(context.Context, admission.Request, *corev1.Pod, *corev1.Pod) ([]string, error) { return nil, nil }),
		},
	}
}

// TestTheConfigurations keeps testdata/configurations.yaml in step with
// widgetWebhooks: go test -run TestTheConfigurations -update rewrites it.
func TestTheConfigurations(t *testing.T) {
	w := widgetWebhooks()
	v, err := w.Validating()
	if err != nil {
		t.Fatal(err)
	}
	m, err := w.Mutating()
	if err != nil {
		t.Fatal(err)
	}
	if err := policytest.Validate(nil, v, m); err != nil { // their match conditions, as the API server compiles them
		t.Fatal(err)
	}
	got, err := admission.Marshal(v, m)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/configurations.yaml", got, "TestTheConfigurations")
	if len(v.Webhooks) != 2 || len(m.Webhooks) != 1 {
		t.Errorf("%d validating and %d mutating webhooks, want 2 and 1", len(v.Webhooks), len(m.Webhooks))
	}
}

func TestOnlyValidatingWebhooksHaveNoMutatingConfiguration(t *testing.T) {
	w := widgetWebhooks()
	w.Hooks = w.Hooks[:1]
	m, err := w.Mutating()
	if err != nil || m != nil {
		t.Errorf("Mutating() = %v, %v; want nil, nil", m, err)
	}
	if b, err := admission.Marshal(m); err != nil || len(b) != 0 {
		t.Errorf("Marshal(nil) = %q, %v", b, err)
	}
}

func TestEveryMistakeInTheDeclarationIsOneError(t *testing.T) {
	noGroup := Widget
	noGroup.Group = "widgets"
	w := admission.Webhooks{
		Name:     "Widget Operator",
		Endpoint: admission.Endpoint{URL: "http://example.com/admission?x=1", CABundle: []byte("not a certificate")},
		Hooks: []admission.Webhook{
			admission.Validating(Widget, admission.Settings{
				Name:          "validate",
				Operations:    []admission.Operation{"PATCH", admission.Create, admission.Create},
				FailurePolicy: "Retry",
				Timeout:       1500 * time.Millisecond,
				MatchConditions: []admissionregistrationv1.MatchCondition{
					{Name: "a", Expression: ""}, {Name: "a", Expression: "true"},
				},
			}, validateSize),
			admission.Defaulting(Widget, admission.Settings{Operations: []admission.Operation{admission.Delete}}, nil),
			admission.Validating(noGroup, admission.Settings{Name: "validate.widgets.admission.example.com"}, validateSize),
			admission.Validating(Widget, admission.Settings{}, validateSize),
			{},
		},
	}
	_, err := w.Validating()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`admission: Webhooks.Name "Widget Operator": a lowercase RFC 1123 subdomain`,
		`admission: Webhooks.Endpoint: URL "http://example.com/admission?x=1": should be https://host[:port]/path`,
		`admission: Webhooks.Endpoint: CABundle holds no PEM certificate`,
		`admission: Webhooks.Hooks[0] (validate): Settings.Name "validate": should be a domain with at least three segments separated by dots`,
		`admission: Webhooks.Hooks[0] (validate): Settings.Operations: "PATCH" is none of CREATE, UPDATE and DELETE`,
		`admission: Webhooks.Hooks[0] (validate): Settings.Operations: CREATE is given twice`,
		`admission: Webhooks.Hooks[0] (validate): Settings.FailurePolicy "Retry" is neither Fail nor Ignore`,
		`admission: Webhooks.Hooks[0] (validate): Settings.Timeout 1.5s: should be whole seconds, 1s to 30s`,
		`admission: Webhooks.Hooks[0] (validate): Settings.MatchConditions[0] (a): Expression is required`,
		`admission: Webhooks.Hooks[0] (validate): Settings.MatchConditions[1].Name "a" is given twice`,
		`admission: Webhooks.Hooks[1] (default.widgets.admission.example.com): the DefaultFunc is nil`,
		`admission: Webhooks.Hooks[1] (default.widgets.admission.example.com): Settings.Operations: a defaulting webhook isn't called on DELETE`,
		`admission: Webhooks.Hooks[2] (validate.widgets.admission.example.com): kube: Resource[admission_test.WidgetSpec, admission_test.WidgetStatus]: Group "widgets": should be a domain with at least one dot`,
		`admission: Webhooks.Hooks[3] (validate.widgets.admission.example.com): the name is Hooks[2]'s too`,
		`admission: Webhooks.Hooks[4]: a Webhook made without Validating or Defaulting`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say\n%s\nit is\n%v", want, err)
		}
	}
	if _, err := w.Handler(humustestTelemetry()); err == nil || strings.Contains(err.Error(), "Webhooks.Name") {
		t.Errorf("Handler's error %v: want the hooks' mistakes, not the configurations'", err)
	}
}
