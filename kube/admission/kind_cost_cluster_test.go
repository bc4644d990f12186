package admission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/admission/policytest"
	"github.com/z5labs/humus/kube/clustertest"
)

var deployments = kube.Kind[appsv1.Deployment]{GVR: appsv1.SchemeGroupVersion.WithResource("deployments"), Kind: "Deployment", Scope: kube.Namespaced}

// deployment is a Deployment of the label kind-cost, whose containers
// have env vars of the names and values given, one list a container.
func deployment(ns, name string, envs ...[]corev1.EnvVar) *appsv1.Deployment {
	labels := map[string]string{"app": name, "humus-test": "kind-cost"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}},
		},
	}
	for i, env := range envs {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: fmt.Sprint("c", i), Image: "nginx:1", Env: env})
	}
	return d
}

// envVars are n env vars of one value.
func envVars(n int, value string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, n)
	for i := range out {
		out[i] = corev1.EnvVar{Name: fmt.Sprintf("V%04d", i), Value: value}
	}
	return out
}

// saysOffline checks that policytest.ValidateKind says want of p, a
// policy of Deployments, and that Validate(nil), the untyped compile the
// API server runs on a create, takes it.
func saysOffline(t *testing.T, p admission.Policy, want string) {
	t.Helper()
	objs, err := p.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if err := policytest.ValidateKind(deployments, objs...); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("policytest.ValidateKind = %v, want it to say %q", err, want)
	}
	if err := policytest.Validate(nil, objs...); err != nil {
		t.Fatalf("policytest.Validate(nil) = %v: the API server creates it", err)
	}
}

// TestClusterPolicyOfAKindOverItsCost checks what policytest.ValidateKind
// says of a policy of Deployments, a kind with no CRD, against the API
// server: an expression of a misspelled field is refused by ValidateKind,
// and fails every write the API server runs it on; an expression ValidateKind says is over the cost
// limit, as the API server's schema of Deployments bounds no list, is
// created, stops no small Deployment, and stops a Deployment of one
// container of 1,000 env vars at the limit, refusing the write.
func TestClusterPolicyOfAKindOverItsCost(t *testing.T) {
	var d appsv1.Deployment
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"humus-test": "kind-cost"}}
	over := admission.PolicyFor(deployments, &d, admission.PolicySettings{Name: "env-agrees.example.com", ObjectSelector: sel},
		admission.Validation("%[1]s.all(c, c.env.all(e, %[1]s.all(o, o.env.all(f, f.name != e.name || f.value == e.value))))",
			"an env var has one value in every container", admission.Field(&d.Spec.Template.Spec.Containers)))
	misspelled := admission.PolicyFor(deployments, &d, admission.PolicySettings{Name: "images.example.com", ObjectSelector: sel},
		admission.Validation("%s.all(c, c.imag != '')", "an image", admission.Field(&d.Spec.Template.Spec.Containers)))
	saysOffline(t, over, "exceeds the API server's limit for one expression")
	saysOffline(t, misspelled, "undefined field 'imag'")

	c := clustertest.Get(t)
	installPolicy(t, c, over)
	installPolicy(t, c, misspelled)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(c.AdminConfig())

	ns := c.Namespace(t)
	res := cs.AppsV1().Deployments(ns)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	// The misspelled field fails the expression on every Deployment it
	// matches, refusing the write (failurePolicy Fail). (The API server's
	// type checking would warn of it in the policy's status too; the
	// tests' control plane runs no validatingadmissionpolicy-status
	// controller.)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := res.Create(ctx, deployment(ns, "probe", envVars(1, "a")), dry)
		if err != nil && strings.Contains(err.Error(), "imag") {
			t.Logf("the misspelled field: %v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the misspelled policy wasn't in effect within 30s: the dry run answered %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ar := kubernetes.NewForConfigOrDie(c.AdminConfig()).AdmissionregistrationV1()
	if err := ar.ValidatingAdmissionPolicyBindings().Delete(ctx, "images.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err) // its expression fails on every Deployment, which the next writes don't need
	}

	// In effect once a Deployment whose containers disagree is refused,
	// and the misspelled policy's binding gone once one that agrees isn't.
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err := res.Create(ctx, deployment(ns, "probe", envVars(1, "a"), envVars(1, "b")), dry)
		_, agrees := res.Create(ctx, deployment(ns, "probe", envVars(1, "a"), envVars(1, "a")), dry)
		if agrees == nil && apierrors.IsInvalid(err) && strings.Contains(err.Error(), "an env var has one value in every container") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy wasn't in effect within 30s: the dry run answered %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := res.Create(ctx, deployment(ns, "small", envVars(3, "a"), envVars(3, "a")), metav1.CreateOptions{}); err != nil {
		t.Errorf("a Deployment of two containers of 3 env vars answered %v, want it stored", err)
	}
	_, err := res.Create(ctx, deployment(ns, "large", envVars(1000, "a")), metav1.CreateOptions{})
	t.Logf("a Deployment of one container of 1,000 env vars answered %v", err)
	if err == nil || !strings.Contains(err.Error(), "cost") {
		t.Errorf("a Deployment of one container of 1,000 env vars answered %v, want its expression stopped at the cost limit", err)
	}
}

// TestClusterPolicyMessageExpression runs a Policy whose Validation's
// message is computed by a messageExpression reading a Variable: a write
// it refuses is refused with that message, the variable's value in it.
func TestClusterPolicyMessageExpression(t *testing.T) {
	var g widget
	p := admission.PolicyFor(Gadget, &g, admission.PolicySettings{Name: "gadget-hosts.admission.example.com"},
		admission.Variable("host", "%s", admission.Field(&g.Spec.Host)),
		admission.Variable("internal", "variables.host.endsWith('.internal')"),
		admission.Validation("!variables.internal || %s == 0", "an internal host", admission.Field(&g.Spec.Size)).
			MessageExpression("'the host ' + variables.host + ' is internal: a Gadget serving outside of it is of size 0'"))
	gadgetObjects(t, p)
	c := clustertest.Get(t)
	c.Install(t, Gadget)
	installPolicy(t, c, p)
	ns := c.Namespace(t)
	res := dynamic.NewForConfigOrDie(c.AdminConfig()).Resource(Gadget.GVR()).Namespace(ns)
	const want = "the host db.internal is internal: a Gadget serving outside of it is of size 0"
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := res.Create(context.Background(), objectOf("Gadget", ns, "db", map[string]any{"host": "db.internal", "size": int64(2)}), metav1.CreateOptions{})
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), want) {
			t.Logf("refused: %v", err)
			break
		}
		if err == nil {
			_ = res.Delete(context.Background(), "db", metav1.DeleteOptions{})
		}
		if time.Now().After(deadline) {
			t.Fatalf("a Gadget of host db.internal answered %v within 30s, want it refused with %q", err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := res.Create(context.Background(), objectOf("Gadget", ns, "web", map[string]any{"host": "web.example.com", "size": int64(2)}), metav1.CreateOptions{}); err != nil {
		t.Errorf("a Gadget of host web.example.com answered %v, want it stored", err)
	}
}
