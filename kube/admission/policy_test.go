package admission_test

import (
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/admission/policytest"
)

// gadgetObjects are p's objects, checked by policytest against Gadget's
// CRD, as the API server will.
func gadgetObjects(t *testing.T, p admission.Policy) []runtime.Object {
	t.Helper()
	objs, err := p.Objects()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := Gadget.CRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := policytest.Validate(crd, objs...); err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestThePolicy keeps testdata/policy.yaml in step with gadgetPolicy, and
// checks it as the API server will: go test -run TestThePolicy -update
// rewrites it.
func TestThePolicy(t *testing.T) {
	objs := gadgetObjects(t, gadgetPolicy())
	got, err := admission.Marshal(objs...)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/policy.yaml", got, "TestThePolicy")
}

func TestAFieldIsNamedAsCELSelectsIt(t *testing.T) {
	type Inner struct {
		Port int32 `json:"port"`
	}
	type Spec struct {
		Inner      `json:",inline"`
		Deep       Inner  `json:"deep"`
		Dashed     string `json:"dashed-name"`
		Untagged   string
		Ptr        *Inner `json:"ptr"`
		unexported string
	}
	r := kube.Resource[Spec, struct{}]{Group: "fields.example.com", Version: "v1", Kind: "Thing", Plural: "things", Scope: kube.Cluster}
	var o kube.Object[Spec, struct{}]
	for _, tc := range []struct {
		field admission.Ref
		want  string
	}{
		{admission.Field(&o.Spec.Port), "object.spec.port"},
		{admission.Field(&o.Spec.Inner), "object.spec"},
		{admission.Field(&o.Spec.Deep.Port), "object.spec.deep.port"},
		{admission.Field(&o.Spec.Deep), "object.spec.deep"},
		{admission.Field(&o.Spec.Untagged), "object.spec.Untagged"},
		{admission.Field(&o.Namespace), "object.metadata.namespace"},
		{admission.Field(&o.Labels), "object.metadata.labels"},
		{admission.Field(&o.Spec), "object.spec"},
	} {
		objs, err := admission.PolicyFor(r, &o, admission.PolicySettings{}, admission.Validation("has(%s)", "", tc.field)).Objects()
		if err != nil {
			t.Errorf("%s: %v", tc.want, err)
			continue
		}
		if got := objs[0].(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec.Validations[0].Expression; got != "has("+tc.want+")" {
			t.Errorf("the expression is %s, want has(%s)", got, tc.want)
		}
	}

	var elsewhere Inner
	other := o
	for _, tc := range []struct {
		field admission.Ref
		want  string
	}{
		{admission.Field(&elsewhere.Port), "a Field of a int32 that isn't a field of the kube.Object["},
		{admission.Field(&other.Spec.Port), "isn't a field of the kube.Object"},
		{admission.Field(&o.Spec.unexported), "the field admission_test.Spec.unexported isn't in the object's JSON encoding"},
		{admission.Field(&o.Spec.Dashed), `the property "dashed-name" isn't a CEL identifier: select it by hand, as object.spec["dashed-name"]`},
	} {
		_, err := admission.PolicyFor(r, &o, admission.PolicySettings{}, admission.Validation("has(%s)", "", tc.field)).Objects()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Objects() = %v, want an error saying %q", err, tc.want)
		}
	}
}

func TestEveryMistakeInAPolicyIsOneError(t *testing.T) {
	var g widget
	p := admission.PolicyFor(Gadget, &g, admission.PolicySettings{
		Name:              "Gadgets",
		Operations:        []admission.Operation{"CONNECT"},
		FailurePolicy:     "Sometimes",
		ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny, admissionregistrationv1.Warn, "Shout"},
	},
		admission.Validation("%s > 0 && %s < 4", "", admission.Field(&g.Spec.Size)),
		admission.Validation("", ""),
	)
	_, err := p.Objects()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`admission: Policy Gadgets: Name "Gadgets": a lowercase RFC 1123 subdomain`,
		`admission: Policy Gadgets: PolicySettings.Operations: "CONNECT" is none of CREATE, UPDATE and DELETE`,
		`admission: Policy Gadgets: PolicySettings.FailurePolicy "Sometimes" is neither Fail nor Ignore`,
		`admission: Policy Gadgets: PolicySettings.ValidationActions: "Shout" is none of Deny, Warn and Audit`,
		`admission: Policy Gadgets: PolicySettings.ValidationActions: Deny and Warn don't go together`,
		`admission: Policy Gadgets: rules[0]: the expression "%s > 0 && %s < 4" names 1 fields, and its verbs don't match`,
		`admission: Policy Gadgets: rules[1]: a Validation without an expression`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say\n%s\nit is\n%v", want, err)
		}
	}
	if _, err := admission.PolicyFor(Gadget, &g, admission.PolicySettings{Operations: []admission.Operation{admission.Create, admission.Delete}},
		admission.Default(admission.Field(&g.Spec.Image), "nginx:1")).Objects(); err == nil || !strings.Contains(err.Error(), "PolicySettings.Operations: a Default isn't applied on DELETE") {
		t.Errorf("a Default on DELETE: %v", err)
	}
	if _, err := admission.PolicyFor(Gadget, &g, admission.PolicySettings{}).Objects(); err == nil || !strings.Contains(err.Error(), "no rules") {
		t.Errorf("a Policy without rules: %v", err)
	}
}

func TestAPolicyOfAKind(t *testing.T) {
	cms := kube.Kind[corev1.ConfigMap]{GVR: corev1.SchemeGroupVersion.WithResource("configmaps"), Kind: "ConfigMap", Scope: kube.Namespaced}
	var cm corev1.ConfigMap
	objs, err := admission.PolicyFor(cms, &cm, admission.PolicySettings{},
		admission.Default(admission.Field(&cm.Data), map[string]string{"owner": "unknown"})).Objects()
	if err != nil {
		t.Fatal(err)
	}
	m := objs[0].(*admissionregistrationv1.MutatingAdmissionPolicy)
	if m.Name != "configmaps.core" || m.Spec.MatchConstraints.ResourceRules[0].APIGroups[0] != "" {
		t.Errorf("the policy is %s of groups %q", m.Name, m.Spec.MatchConstraints.ResourceRules[0].APIGroups)
	}
	if got, want := m.Spec.Mutations[0].JSONPatch.Expression, `has(object.data) ? [] : [JSONPatch{op: "add", path: "/data", value: {"owner":"unknown"}}]`; got != want {
		t.Errorf("the mutation is\n%s\nwant\n%s", got, want)
	}
	if err := policytest.Validate(nil, objs...); err != nil {
		t.Error(err)
	}
}

func TestAPolicysVariablesAndMessageExpression(t *testing.T) {
	var g widget
	objs, err := admission.PolicyFor(Gadget, &g, admission.PolicySettings{},
		admission.Variable("host", "%s", admission.Field(&g.Spec.Host)),
		admission.Validation("!variables.host.endsWith('.internal')", "an internal host").
			MessageExpression("'the host ' + variables.host + ' of a Gadget of size ' + string(%s) + ' is internal'", admission.Field(&g.Spec.Size)),
	).Objects()
	if err != nil {
		t.Fatal(err)
	}
	vap := objs[0].(*admissionregistrationv1.ValidatingAdmissionPolicy)
	if want := []admissionregistrationv1.Variable{{Name: "host", Expression: "object.spec.host"}}; !reflect.DeepEqual(vap.Spec.Variables, want) {
		t.Errorf("the variables are %v, want %v", vap.Spec.Variables, want)
	}
	if got, want := vap.Spec.Validations[0].MessageExpression, "'the host ' + variables.host + ' of a Gadget of size ' + string(object.spec.size) + ' is internal'"; got != want {
		t.Errorf("the messageExpression is %s, want %s", got, want)
	}

	_, err = admission.PolicyFor(Gadget, &g, admission.PolicySettings{},
		admission.Variable("a-b", "1"),
		admission.Variable("x", "1"),
		admission.Variable("x", "2"),
		admission.Variable("y", ""),
		admission.Validation("true", "").MessageExpression("%s", admission.Field(&g.Spec.Size), admission.Field(&g.Spec.Host)),
	).Objects()
	for _, want := range []string{
		`rules[0]: the Variable "a-b": its name should be a CEL identifier`,
		`rules[2]: the Variable "x" is declared twice`,
		`rules[3]: the Variable y without an expression`,
		`rules[4]: a Validation's MessageExpression: the expression "%s" names 2 fields, and its verbs don't match`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say\n%s\nit is\n%v", want, err)
		}
	}
	if _, err := admission.PolicyFor(Gadget, &g, admission.PolicySettings{}, admission.Variable("x", "1"), admission.Default(admission.Field(&g.Spec.Image), "nginx:1")).Objects(); err == nil || !strings.Contains(err.Error(), "Variables without a Validation") {
		t.Errorf("Variables without a Validation: %v", err)
	}
}
