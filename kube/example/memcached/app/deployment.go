package app

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube"
)

// Deployments is the Deployments' Kind as the Reconciler reads them:
// Deployment, of which the controller's cache keeps only what it decodes
// (kube.ReadTrimmed).
var Deployments = kube.Kind[Deployment]{
	GVR: appsv1.SchemeGroupVersion.WithResource("deployments"), Kind: "Deployment", Scope: kube.Namespaced,
}

// Deployment is what the Reconciler reads of a Deployment, and all the
// cache keeps of one: its metadata (its owner references among it), and of
// the rest what upToDate compares and the status reports. Of the 750
// bytes of JSON beside its metadata that the API server serves for one of
// these Deployments (its pod template with the defaults the API server
// fills in, before a Deployment controller adds its status's conditions),
// the cache keeps 320. A field added here is kept from the App's next
// start; one the Reconciler reads must be here, or it doesn't compile.
type Deployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec   DeploymentSpec   `json:"spec"`
	Status DeploymentStatus `json:"status"`
}

// DeploymentSpec is what the Reconciler reads of a Deployment's spec.
type DeploymentSpec struct {
	Replicas *int32                `json:"replicas,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	Template PodTemplate           `json:"template"`
}

// PodTemplate is what the Reconciler reads of a Deployment's pod
// template: its labels and its containers' images.
type PodTemplate struct {
	Metadata struct {
		Labels map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Containers []Container `json:"containers,omitempty"`
	} `json:"spec"`
}

// Container is what the Reconciler reads of a container: which it is, and
// its image.
type Container struct {
	Name  string `json:"name"`
	Image string `json:"image,omitempty"`
}

// DeploymentStatus is what the Reconciler reads of a Deployment's status.
type DeploymentStatus struct {
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// DeploymentReader reads the Deployments the Reconciler applies: Init's
// *kube.Reader[Deployment], from the controller's cache, or a test's.
type DeploymentReader interface {
	Get(ctx context.Context, namespace, name string) (Deployment, error)
}
