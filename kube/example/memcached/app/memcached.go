// Package app is the kubebuilder book's Memcached operator, written with
// kube: a Memcached custom resource, reconciled into a Deployment of
// memcached pods that the Memcached controls.
//
// There are no markers and no generated code. The CRD is reflected from
// MemcachedSpec and MemcachedStatus, constrained by Memcached's Rules, and
// checked into deploy/crds by a golden test. The RBAC it needs,
// deploy/rbac.yaml, is derived from what Init declares by a golden test
// (kube.MarshalRBAC), and the whole-App tests grant it, and check from the
// API server's audit log that they need nothing more, and nothing less.
package app

import (
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube"
)

// MemcachedSpec is what a Memcached declares.
type MemcachedSpec struct {
	Size  int32  `json:"size"`
	Image string `json:"image"`
}

// MemcachedStatus is what the controller reports, as the Reconciler
// returns it.
type MemcachedStatus struct {
	ReadyReplicas int32              `json:"readyReplicas,omitempty"`
	Conditions    []metav1.Condition `json:"conditions,omitempty"`
}

// spec and status only name the fields the Rules constrain: kube.Field
// takes a pointer into a value of the type.
var (
	spec   MemcachedSpec
	status MemcachedStatus
)

// Memcached is the custom resource. Its CRD is Memcached.CRD(), which
// deploy/crds/memcacheds.cache.example.com.yaml holds.
var Memcached = kube.Resource[MemcachedSpec, MemcachedStatus]{
	Group:   "cache.example.com",
	Version: "v1alpha1",
	Kind:    "Memcached",
	Plural:  "memcacheds",
	Scope:   kube.Namespaced,

	// kubectl get mc, or kubectl get example for every kind of this
	// example, prints SIZE, READY, AVAILABLE and AGE. Each column's type
	// comes from the field's schema: integer for the sizes, string for the
	// condition's status, and date, printed as an age, for the timestamp.
	ShortNames: []string{"mc"},
	Categories: []string{"example"},
	Columns: []kube.Column{
		{Name: "Size", JSONPath: ".spec.size"},
		{Name: "Ready", JSONPath: ".status.readyReplicas"},
		{Name: "Available", JSONPath: `.status.conditions[?(@.type=="Available")].status`},
		{Name: "Age", JSONPath: ".metadata.creationTimestamp"},
	},
	// kubectl scale memcached/sessions --replicas=3 sets spec.size, within
	// the Rules' 1 to 3; the scale's status reads readyReplicas.
	Scale: &kube.Scale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.readyReplicas"},

	Rules: []kube.TypeRules{
		kube.Rules(&spec,
			kube.Field(&spec.Size).Minimum(1).Maximum(3).Description("How many memcached pods run."),
			kube.Field(&spec.Image).Pattern(regexp.MustCompile(`^memcached:`)).Default("memcached:1.6.26-alpine3.19"),
		),
		// Conditions are keyed by their type, as Kubernetes' own are:
		// server-side apply then merges them by type, rather than treating
		// the whole list as one value.
		kube.Rules(&status,
			kube.Field(&status.Conditions).ListMap("type"),
		),
	},
}
