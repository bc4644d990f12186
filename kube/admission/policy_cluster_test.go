package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/clustertest"
)

// Gadget is Widget's twin, its policies' own, so that they and the
// webhooks of Widget don't meet.
var Gadget = kube.Resource[WidgetSpec, WidgetStatus]{
	Group: "admission.example.com", Version: "v1", Kind: "Gadget", Plural: "gadgets", Scope: kube.Namespaced,
}

// gadgetPolicy refuses a Gadget of the host reserved.example.com, and
// gives one without an image nginx:policy.
func gadgetPolicy() admission.Policy {
	var g widget
	return admission.PolicyFor(Gadget, &g, admission.PolicySettings{},
		admission.Validation("%s != 'reserved.example.com'", "the host reserved.example.com is the operator's", admission.Field(&g.Spec.Host)),
		// metadata.namespace is a CEL reserved word, escaped: the
		// expression fails, and every write with it, unless the escape is
		// the API server's.
		admission.Validation("%s == request.namespace", "a Gadget is in its request's namespace", admission.Field(&g.Namespace)),
		admission.Default(admission.Field(&g.Spec.Image), "nginx:policy"),
	)
}

// installPolicy creates p's policies and bindings, deleting them at t's end.
func installPolicy(t testing.TB, c *clustertest.Cluster, p admission.Policy) {
	t.Helper()
	objs, err := p.Objects()
	if err != nil {
		t.Fatal(err)
	}
	ar := kubernetes.NewForConfigOrDie(c.AdminConfig()).AdmissionregistrationV1()
	ctx := t.Context()
	for _, o := range objs {
		var err error
		var del func() error
		switch o := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			_, err = ar.ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
			del = func() error {
				return ar.ValidatingAdmissionPolicies().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			_, err = ar.ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
			del = func() error {
				return ar.ValidatingAdmissionPolicyBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			}
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			_, err = ar.MutatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
			del = func() error {
				return ar.MutatingAdmissionPolicies().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			}
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			_, err = ar.MutatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
			del = func() error {
				return ar.MutatingAdmissionPolicyBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			}
		default:
			t.Fatalf("Objects returned a %T", o)
		}
		if err != nil {
			t.Fatalf("creating the %s: %v", o.GetObjectKind().GroupVersionKind().Kind, err)
		}
		t.Cleanup(func() { _ = del() })
	}
}

// TestClusterPolicy runs a Gadget's Policy on the real control plane: a
// write the Validation refuses, refused with its message; a default set
// on a create, and left alone where the field is given; a dry run
// defaulted and not stored.
func TestClusterPolicy(t *testing.T) {
	c := clustertest.Get(t)
	c.Install(t, Gadget)
	installPolicy(t, c, gadgetPolicy())
	ns := c.Namespace(t)
	res := dynamic.NewForConfigOrDie(c.AdminConfig()).Resource(Gadget.GVR()).Namespace(ns)
	ctx := t.Context()

	// Both policies are in effect once a dry run is refused and defaulted.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, refusedErr := res.Create(ctx, objectOf("Gadget", ns, "probe", map[string]any{"host": "reserved.example.com"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		got, err := res.Create(ctx, objectOf("Gadget", ns, "probe", map[string]any{"host": "probe"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && apierrors.IsInvalid(refusedErr) {
			if image, _, _ := unstructuredString(got.Object, "spec", "image"); image == "nginx:policy" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policies weren't in effect within 30s: the dry runs answered %v and %v", refusedErr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Run("a policy's refusal", func(t *testing.T) {
		_, err := res.Create(ctx, objectOf("Gadget", ns, "reserved", map[string]any{"host": "reserved.example.com"}), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "the host reserved.example.com is the operator's") || !strings.Contains(err.Error(), "gadgets.admission.example.com") {
			t.Errorf("the create answered %v, want Invalid with the Validation's message and the policy's name", err)
		}
	})

	t.Run("a default applied on a create", func(t *testing.T) {
		got, err := res.Create(ctx, objectOf("Gadget", ns, "plain", map[string]any{"host": "plain.example.com", "size": int64(2)}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkSpec(t, got, 2, "nginx:policy")
		given, err := res.Create(ctx, objectOf("Gadget", ns, "given", map[string]any{"host": "given.example.com", "image": "nginx:2"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkSpec(t, given, 0, "nginx:2")
	})

	t.Run("a dry run honoured", func(t *testing.T) {
		got, err := res.Create(ctx, objectOf("Gadget", ns, "dry", map[string]any{"host": "dry.example.com"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		checkSpec(t, got, 0, "nginx:policy")
		if _, err := res.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the dry run stored the Gadget: Get = %v", err)
		}
	})
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

var _ runtime.Object = (*admissionregistrationv1.MutatingAdmissionPolicy)(nil)
