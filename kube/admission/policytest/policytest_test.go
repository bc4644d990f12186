package policytest_test

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/admission/policytest"
)

type SiteSpec struct {
	Hosts    []string `json:"hosts"`
	Replicas int32    `json:"replicas,omitempty"`
	Image    string   `json:"image,omitempty"`
}

type SiteStatus struct{}

var Site = kube.Resource[SiteSpec, SiteStatus]{
	Group: "policytest.example.com", Version: "v1", Kind: "Site", Plural: "sites", Scope: kube.Namespaced,
}

type site = kube.Object[SiteSpec, SiteStatus]

func objects(t *testing.T, rules ...func(*site) admission.Rule) []runtime.Object {
	t.Helper()
	var s site
	rs := make([]admission.Rule, len(rules))
	for i, r := range rules {
		rs[i] = r(&s)
	}
	objs, err := admission.PolicyFor(Site, &s, admission.PolicySettings{}, rs...).Objects()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func validate(t *testing.T, objs ...runtime.Object) error {
	t.Helper()
	crd, err := Site.CRD()
	if err != nil {
		t.Fatal(err)
	}
	return policytest.Validate(crd, objs...)
}

func TestAPolicyTheAPIServerTakes(t *testing.T) {
	objs := objects(t,
		func(s *site) admission.Rule {
			return admission.Validation("%s <= 3", "at most 3 replicas", admission.Field(&s.Spec.Replicas))
		},
		func(s *site) admission.Rule {
			return admission.Validation("%s != 'kube-system' || request.userInfo.username == 'admin'", "only admin writes Sites in kube-system", admission.Field(&s.Namespace))
		},
		func(s *site) admission.Rule { return admission.Default(admission.Field(&s.Spec.Image), "nginx:1") },
	)
	if len(objs) != 4 {
		t.Fatalf("%d objects, want the two policies and their bindings", len(objs))
	}
	if err := validate(t, objs...); err != nil {
		t.Error(err)
	}
}

func TestAnExpressionThatDoesntCompile(t *testing.T) {
	objs := objects(t, func(s *site) admission.Rule {
		return admission.Validation("%s <= ", "at most 3 replicas", admission.Field(&s.Spec.Replicas))
	})
	err := validate(t, objs...)
	if err == nil || !strings.Contains(err.Error(), `policytest: ValidatingAdmissionPolicy sites.policytest.example.com: spec.validations[0].expression "object.spec.replicas <= ": compilation failed: ERROR: <input>:1:25: Syntax error`) {
		t.Errorf("Validate = %v", err)
	}
}

func TestAnExpressionOfAFieldTheSchemaLacks(t *testing.T) {
	objs := objects(t, func(*site) admission.Rule {
		return admission.Validation("object.spec.replica <= 3", "at most 3 replicas")
	})
	err := validate(t, objs...)
	if err == nil || !strings.Contains(err.Error(), `spec.validations[0].expression "object.spec.replica <= 3": against the schema of sites.policytest.example.com`) || !strings.Contains(err.Error(), "undefined field 'replica'") {
		t.Errorf("Validate = %v", err)
	}
	// Untyped, as for a Kind, the API server takes it.
	if err := policytest.Validate(nil, objs...); err != nil {
		t.Errorf("Validate(nil) = %v", err)
	}
}

func TestAnExpressionOverTheCostLimitIsSaidWithItsBounds(t *testing.T) {
	objs := objects(t, func(s *site) admission.Rule {
		return admission.Validation("%[1]s.all(a, %[1]s.all(b, a == b || !a.startsWith(b)))", "no host is a prefix of another", admission.Field(&s.Spec.Hosts), admission.Field(&s.Spec.Hosts))
	})
	err := validate(t, objs...)
	if err == nil {
		t.Fatal("Validate = nil")
	}
	for _, want := range []string{
		`spec.validations[0].expression "object.spec.hosts.all(a, object.spec.hosts.all(b, a == b || !a.startsWith(b)))": its estimated cost`,
		"exceeds the API server's limit for one expression, 1000000",
		"bounds that bring it under the limit alone: maxItems ",
		" or less on spec.hosts (MaxItems)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q:\n%v", want, err)
		}
	}
}

func TestABindingOfNoPolicy(t *testing.T) {
	objs := objects(t, func(s *site) admission.Rule {
		return admission.Validation("%s <= 3", "at most 3 replicas", admission.Field(&s.Spec.Replicas))
	})
	b := objs[1].(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).DeepCopy()
	b.Spec.PolicyName = "other"
	if err := validate(t, objs[0], b); err == nil || !strings.Contains(err.Error(), `spec.policyName "other" names no ValidatingAdmissionPolicy given`) {
		t.Errorf("Validate = %v", err)
	}
}

func TestAWebhooksMatchConditions(t *testing.T) {
	w := admission.Webhooks{
		Name:     "sites",
		Endpoint: admission.Endpoint{URL: "https://sites.example.com/admission"},
		Hooks: []admission.Webhook{admission.Validating(Site, admission.Settings{MatchConditions: []admissionregistrationv1.MatchCondition{
			{Name: "not-the-operator", Expression: "request.userInfo.username != 'operator'"},
			{Name: "broken", Expression: "request.userInfo.username =="},
		}}, func(context.Context, admission.Request, *site, *site) ([]string, error) { return nil, nil })},
	}
	v, err := w.Validating()
	if err != nil {
		t.Fatal(err)
	}
	err = policytest.Validate(nil, v)
	if err == nil || !strings.Contains(err.Error(), `policytest: ValidatingWebhookConfiguration sites: webhooks[0].matchConditions[1].expression "request.userInfo.username ==": compilation failed`) || strings.Contains(err.Error(), "matchConditions[0]") {
		t.Errorf("Validate = %v, want the broken condition's error alone", err)
	}
}
