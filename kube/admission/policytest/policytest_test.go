package policytest_test

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
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

// objects are the objects of a Policy of Sites of rules.
func objects(t *testing.T, rules ...func(*site) admission.Rule) []runtime.Object {
	t.Helper()
	return policyObjects(t, Site, rules...)
}

// policyObjects are the objects of a Policy of r's objects of rules, each
// handed the value that names the fields.
func policyObjects[T any](t *testing.T, r kube.ResourceOf[T], rules ...func(*T) admission.Rule) []runtime.Object {
	t.Helper()
	var v T
	rs := make([]admission.Rule, len(rules))
	for i, rule := range rules {
		rs[i] = rule(&v)
	}
	objs, err := admission.PolicyFor(r, &v, admission.PolicySettings{}, rs...).Objects()
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

func TestVariablesAndAMessageExpressionAreTyped(t *testing.T) {
	objs := objects(t,
		func(s *site) admission.Rule { return admission.Variable("hosts", "%s", admission.Field(&s.Spec.Hosts)) },
		func(*site) admission.Rule { return admission.Variable("count", "size(variables.hosts)") },
		func(s *site) admission.Rule {
			return admission.Validation("variables.count <= 3 || %s == 1", "at most 3 hosts, unless of one replica", admission.Field(&s.Spec.Replicas)).
				MessageExpression("'at most 3 hosts, not ' + string(variables.count) + ', unless of one replica, not ' + string(%s)", admission.Field(&s.Spec.Replicas))
		},
	)
	vap := objs[0].(*admissionregistrationv1.ValidatingAdmissionPolicy)
	if len(vap.Spec.Variables) != 2 || vap.Spec.Variables[0].Expression != "object.spec.hosts" || !strings.Contains(vap.Spec.Validations[0].MessageExpression, "string(object.spec.replicas)") {
		t.Fatalf("the policy's variables are %v, its validations %v", vap.Spec.Variables, vap.Spec.Validations)
	}
	if err := validate(t, objs...); err != nil {
		t.Error(err)
	}

	// A variable of a field the schema lacks, and a message expression of
	// one, in a policy with variables, as the API server's type checking
	// finds them. (A variable of an object, such as object.spec, is of type
	// dyn to the API server's type checking: its fields aren't checked.)
	objs = objects(t,
		func(*site) admission.Rule { return admission.Variable("replicas", "object.spec.replica") },
		func(*site) admission.Rule { return admission.Validation("variables.replicas <= 3", "at most 3") },
	)
	err := validate(t, objs...)
	if err == nil || !strings.Contains(err.Error(), `spec.variables[0].expression "object.spec.replica": against the schema of sites.policytest.example.com`) || !strings.Contains(err.Error(), "undefined field 'replica'") {
		t.Errorf("Validate = %v", err)
	}
	objs = objects(t,
		func(s *site) admission.Rule { return admission.Variable("spec", "%s", admission.Field(&s.Spec)) },
		func(*site) admission.Rule {
			return admission.Validation("has(variables.spec.image)", "an image").MessageExpression("'no image, ' + object.spec.imag")
		},
	)
	if err := validate(t, objs...); err == nil || !strings.Contains(err.Error(), `spec.validations[0].messageExpression "'no image, ' + object.spec.imag"`) || !strings.Contains(err.Error(), "undefined field 'imag'") {
		t.Errorf("Validate = %v", err)
	}
}

func TestAVariableOverTheCostLimitIsSaidWithItsBounds(t *testing.T) {
	objs := objects(t,
		func(s *site) admission.Rule { return admission.Variable("hosts", "%s", admission.Field(&s.Spec.Hosts)) },
		func(*site) admission.Rule {
			return admission.Variable("prefixed", "variables.hosts.exists(a, variables.hosts.exists(b, a != b && a.startsWith(b)))")
		},
		func(*site) admission.Rule {
			return admission.Validation("!variables.prefixed", "no host is a prefix of another")
		},
	)
	err := validate(t, objs...)
	if err == nil {
		t.Fatal("Validate = nil")
	}
	for _, want := range []string{
		`spec.variables[1].expression "variables.hosts.exists(a, variables.hosts.exists(b, a != b && a.startsWith(b)))": its estimated cost`,
		"exceeds the API server's limit for one expression, 1000000",
		" or less on spec.hosts (MaxItems)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "spec.validations[0]") {
		t.Errorf("the validation reading the variable is said over the limit too:\n%v", err)
	}
}

var deployments = kube.Kind[appsv1.Deployment]{GVR: appsv1.SchemeGroupVersion.WithResource("deployments"), Kind: "Deployment", Scope: kube.Namespaced}

func deploymentPolicy(t *testing.T, rules ...func(*appsv1.Deployment) admission.Rule) []runtime.Object {
	t.Helper()
	return policyObjects(t, deployments, rules...)
}

// TestAPolicyOfAKindIsTypedAndCosted: a policy of Deployments, a kind
// with no CRD, is typed by the schema reflected from appsv1.Deployment,
// and a rule reading every container's env for each of every container's
// env is over the limit, as the API server finds on a large enough
// Deployment (TestClusterPolicyOfAKindOverItsCost).
func TestAPolicyOfAKindIsTypedAndCosted(t *testing.T) {
	objs := deploymentPolicy(t,
		func(d *appsv1.Deployment) admission.Rule {
			return admission.Validation("%s <= 10 && size(%s) <= 5", "at most 10 replicas of 5 containers", admission.Field(&d.Spec.Replicas), admission.Field(&d.Spec.Template.Spec.Containers))
		},
		func(d *appsv1.Deployment) admission.Rule {
			return admission.Validation("!has(%[1]s.rollingUpdate) || has(%[1]s.rollingUpdate.maxSurge)", "a rolling update's maxSurge", admission.Field(&d.Spec.Strategy))
		},
		func(d *appsv1.Deployment) admission.Rule {
			return admission.Validation("!has(%[1]s) || %[1]s > timestamp('2020-01-01T00:00:00Z')", "recent", admission.Field(&d.CreationTimestamp))
		},
	)
	if err := policytest.ValidateKind(deployments, objs...); err != nil {
		t.Error(err)
	}

	objs = deploymentPolicy(t, func(d *appsv1.Deployment) admission.Rule {
		return admission.Validation("%s.all(c, c.imag != '')", "an image", admission.Field(&d.Spec.Template.Spec.Containers))
	})
	if err := policytest.ValidateKind(deployments, objs...); err == nil || !strings.Contains(err.Error(), "against the schema of deployments.apps") || !strings.Contains(err.Error(), "undefined field 'imag'") {
		t.Errorf("ValidateKind = %v", err)
	}

	objs = deploymentPolicy(t, func(d *appsv1.Deployment) admission.Rule {
		return admission.Validation("%[1]s.all(c, c.env.all(e, %[1]s.all(o, o.env.all(f, f.name != e.name || f.value == e.value))))",
			"an env var has one value in every container", admission.Field(&d.Spec.Template.Spec.Containers))
	})
	err := policytest.ValidateKind(deployments, objs...)
	if err == nil {
		t.Fatal("ValidateKind = nil")
	}
	for _, want := range []string{
		`spec.validations[0].expression "object.spec.template.spec.containers.all(c, c.env.all(e, object.spec.template.spec.containers.all(o, o.env.all(f, f.name != e.name || f.value == e.value))))": its estimated cost`,
		"exceeds the API server's limit for one expression, 1000000",
		"the schema of a Kubernetes kind bounds none of what it reads",
		"spec.template.spec.containers[*].env",
		"to bring it under, read each list fewer times",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q:\n%v", want, err)
		}
	}
	t.Log(err)
	// Untyped, as Validate(nil) compiles it, it isn't.
	if err := policytest.Validate(nil, objs...); err != nil {
		t.Errorf("Validate(nil) = %v", err)
	}
}

func TestAnExpressionReadingAVariableOfAnUnknownSizeIsntCosted(t *testing.T) {
	objs := objects(t,
		func(s *site) admission.Rule { return admission.Variable("hosts", "%s", admission.Field(&s.Spec.Hosts)) },
		func(s *site) admission.Rule {
			return admission.Variable("host", "%s.map(h, h + '.')", admission.Field(&s.Spec.Hosts))
		},
		// variables.hosts is a field's, and over the limit; variables.host,
		// a prefix of its name, isn't a field's, its size unknown.
		func(*site) admission.Rule {
			return admission.Validation("variables.hosts.all(a, variables.hosts.all(b, a == b || !a.startsWith(b)))", "no prefix")
		},
		func(*site) admission.Rule {
			return admission.Validation("variables.host.all(a, variables.host.all(b, a == b || !a.startsWith(b)))", "no prefix")
		},
	)
	err := validate(t, objs...)
	if err == nil || !strings.Contains(err.Error(), "spec.validations[0].expression") || strings.Contains(err.Error(), "spec.validations[1]") {
		t.Errorf("Validate = %v, want the first validation over the limit alone", err)
	}
}
