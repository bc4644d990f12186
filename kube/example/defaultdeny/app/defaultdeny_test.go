package app_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/z5labs/humus/kube/example/defaultdeny/app"
)

// A KindReconciler is a function of client-go's own struct: a test builds
// one, and reads what it applied back from client-go's fake clientset.

func namespace(name string) corev1.Namespace {
	return corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "5e0c1f7a-2b3d-4c5e-8f9a-0b1c2d3e4f5a"},
	}
}

func TestReconcileAppliesAPolicyAndANoticeTheNamespaceControls(t *testing.T) {
	kc := kubefake.NewClientset()
	ns := namespace("shop")

	after, err := app.DefaultDeny{Kube: kc}.Reconcile(context.Background(), ns)
	if err != nil || after != 0 {
		t.Fatalf("Reconcile = %v, %v, want 0, nil: a change reconciles it again", after, err)
	}

	policy, err := kc.NetworkingV1().NetworkPolicies("shop").Get(context.Background(), app.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the NetworkPolicy: %v", err)
	}
	if len(policy.Spec.PodSelector.MatchLabels)+len(policy.Spec.PodSelector.MatchExpressions) != 0 || len(policy.Spec.Ingress) != 0 ||
		len(policy.Spec.PolicyTypes) != 1 || policy.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policy = %+v, want every pod selected and no ingress admitted", policy.Spec)
	}
	notice, err := kc.CoreV1().ConfigMaps("shop").Get(context.Background(), app.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap: %v", err)
	}
	if notice.Data["README"] != app.Notice {
		t.Errorf("the ConfigMap's README = %q, want the notice", notice.Data["README"])
	}
	for _, obj := range []metav1.Object{policy, notice} {
		owner := metav1.GetControllerOf(obj)
		if owner == nil || owner.APIVersion != "v1" || owner.Kind != "Namespace" || owner.Name != "shop" || owner.UID != ns.UID {
			t.Errorf("%s's controller owner reference = %+v, want the Namespace's", obj.GetName(), owner)
		}
	}
}

func TestReconcileLeavesKubernetesOwnNamespacesAlone(t *testing.T) {
	kc := kubefake.NewClientset()

	for _, name := range []string{"kube-system", "kube-public", "kube-node-lease"} {
		if _, err := (app.DefaultDeny{Kube: kc}).Reconcile(context.Background(), namespace(name)); err != nil {
			t.Errorf("Reconcile(%s): %v", name, err)
		}
	}

	if n := len(kc.Actions()); n != 0 {
		t.Errorf("%d requests, want none: %v", n, kc.Actions())
	}
}
