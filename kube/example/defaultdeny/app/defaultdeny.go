// Package app is a controller of a built-in kind: it gives every
// Namespace a NetworkPolicy, default-deny, that denies ingress to its
// pods, and a ConfigMap of the same name that tells the namespace's users
// so, and puts both back when they're changed or deleted.
//
// The Namespace is reconciled as client-go's own corev1.Namespace, through
// kube.Kind, and has no status of the controller's. The RBAC it needs,
// deploy/rbac.yaml, is derived from what Init declares by a golden test
// (kube.MarshalRBAC), and the whole-App tests grant it, and check from the
// API server's audit log that they need nothing more, and nothing less.
package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/kube"
)

// Name is the controller's name: its Settings.Name, so its Lease's name,
// and the field manager of what the Reconciler applies. It is also the
// name of the NetworkPolicy and the ConfigMap in each namespace.
const Name = "default-deny"

// Namespaces is the kind the controller reconciles. A Namespace is
// cluster-scoped, so the controller watches every one, and its
// Settings.Namespace is "".
var Namespaces = kube.Kind[corev1.Namespace]{
	GVR:   corev1.SchemeGroupVersion.WithResource("namespaces"),
	Kind:  "Namespace",
	Scope: kube.Cluster,
}

// Notice is what the ConfigMap tells a namespace's users.
const Notice = "Ingress to every pod in this namespace is denied by the NetworkPolicy " + Name + ", " +
	"which the " + Name + " controller keeps here. NetworkPolicies add up: " +
	"add one of your own that allows the traffic your pods need.\n"

// DefaultDeny applies the NetworkPolicy and the ConfigMap that each
// Namespace controls.
type DefaultDeny struct{ Kube kubernetes.Interface }

// Reconcile applies ns's NetworkPolicy and ConfigMap. A Namespace being
// deleted never gets here: without a Finalize, the controller leaves it
// alone, and its contents go with it.
//
// Both carry a controller owner reference to ns, so that kube.Owns, which
// matches it, reconciles ns again when either changes or goes. Each apply
// forces, so a hand-made change is taken back.
func (r DefaultDeny) Reconcile(ctx context.Context, ns corev1.Namespace) (time.Duration, error) {
	// Kubernetes reserves the kube- prefix for its own namespaces, such as
	// kube-system, whose pods, DNS among them, must be reachable.
	if strings.HasPrefix(ns.Name, "kube-") {
		return 0, nil
	}
	owner := metav1ac.OwnerReference().
		WithAPIVersion("v1").WithKind("Namespace").WithName(ns.Name).WithUID(ns.UID).
		WithController(true)
	opts := metav1.ApplyOptions{FieldManager: Name, Force: true}

	_, policyErr := r.Kube.NetworkingV1().NetworkPolicies(ns.Name).Apply(ctx,
		networkingv1ac.NetworkPolicy(Name, ns.Name).
			WithOwnerReferences(owner).
			WithSpec(networkingv1ac.NetworkPolicySpec().
				// An empty selector selects every pod in the namespace, and
				// a policy of type Ingress with no rules admits nothing.
				WithPodSelector(metav1ac.LabelSelector()).
				WithPolicyTypes(networkingv1.PolicyTypeIngress)),
		opts,
	)
	if policyErr != nil {
		policyErr = fmt.Errorf("app: applying the NetworkPolicy %s/%s: %w", ns.Name, Name, policyErr)
	}
	_, noticeErr := r.Kube.CoreV1().ConfigMaps(ns.Name).Apply(ctx,
		corev1ac.ConfigMap(Name, ns.Name).
			WithOwnerReferences(owner).
			WithData(map[string]string{"README": Notice}),
		opts,
	)
	if noticeErr != nil {
		noticeErr = fmt.Errorf("app: applying the ConfigMap %s/%s: %w", ns.Name, Name, noticeErr)
	}
	// Either failing retries both, with backoff: applying the other again
	// changes nothing.
	return 0, errors.Join(policyErr, noticeErr)
}
