package kube

import (
	"context"
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// imageApplier applies a Deployment that each Website controls, its image
// named after the Website's contentFrom, and reads it back at once from
// a trimmed cache, with the reconcile's context: each read must see the
// write just made, its image and its owner.
type imageApplier struct {
	kube  kubernetes.Interface
	ds    *Reader[imagesOnly]
	stale chan string // a read that missed its own write, or a field
}

func (a *imageApplier) Reconcile(ctx context.Context, w website) (Result[siteStatus], error) {
	image := "example.com/site:" + w.Spec.ContentFrom
	lbls := map[string]string{"site": w.Name}
	d := appsv1ac.Deployment(w.Name, w.Namespace).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(w.APIVersion).WithKind(w.Kind).WithName(w.Name).WithUID(w.UID).WithController(true)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(lbls)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(lbls).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("web").WithImage(image)))))
	if _, err := a.kube.AppsV1().Deployments(w.Namespace).Apply(ctx, d, metav1.ApplyOptions{FieldManager: "site-controller", Force: true}); err != nil {
		return Result[siteStatus]{}, err
	}
	got, err := a.ds.Get(ctx, w.Namespace, w.Name)
	if err != nil {
		return Result[siteStatus]{}, err
	}
	var read string
	if c := got.Spec.Template.Spec.Containers; len(c) == 1 {
		read = c[0].Image
	}
	if owner := metav1.GetControllerOf(&got); read != image || owner == nil || owner.UID != w.UID {
		a.stale <- fmt.Sprintf("read image %q and owner %+v right after writing %q", read, owner, image)
	}
	st := siteStatus{Content: read}
	return Result[siteStatus]{Status: &st}, nil
}

// A Reader of Deployments trimmed to their images, sharing the informer
// the controller Owns them with, returns the image and the owner of the
// Deployment the reconcile just applied, each time, and its cache keeps
// nothing else of it.
func TestClusterATrimmedReadSeesTheReconcilesOwnWrite(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, sites)
	ns := c.Namespace(t)
	grants := siteRBAC(ns)
	grants[0].Rules = append(grants[0].Rules, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch", "create", "patch"}})
	token := c.ServiceAccount(t, ns, "site-controller", grants...)
	setup, client := clientAs(t, c, humustest.NewTelemetry(), token)
	admin := dynamic.NewForConfigOrDie(c.AdminConfig())

	ds := ReadTrimmed(client, imagesKind, Selector{Namespace: ns})
	rec := &imageApplier{kube: kubernetes.NewForConfigOrDie(client.Config()), ds: ds, stale: make(chan string, 100)}
	ctrl, err := NewController(setup, client, siteSettings(ns, "site-controller"), sites, rec, Owns(deployments), Reads(ds))
	if err != nil {
		t.Fatal(err)
	}
	served(t, ctrl)
	createSite(t, admin, ns, "a", "v0")
	contentIs(t, admin, ns, "a", "example.com/site:v0")
	for i := 1; i <= 10; i++ {
		patch := fmt.Appendf(nil, `{"spec":{"contentFrom":"v%d"}}`, i)
		if _, err := admin.Resource(sitesGVR).Namespace(ns).Patch(t.Context(), "a", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		contentIs(t, admin, ns, "a", fmt.Sprintf("example.com/site:v%d", i))
	}
	close(rec.stale)
	for s := range rec.stale {
		t.Errorf("a reconcile's read of its trimmed Deployment missed its own write: %s", s)
	}
	// The API server defaults a Deployment's strategy, its pod spec's
	// restart and DNS policies, its container's pull policy and more: the
	// cache keeps none of it.
	u := cachedJSON(t, client, Selector{Namespace: ns}.key(deployments), ns+"/a")
	if want := `{"spec":{"template":{"spec":{"containers":[{"image":"example.com/site:v10"}]}}}}`; string(u.Raw) != want {
		t.Errorf("the cache keeps %s, want only what imagesOnly decodes: %s", u.Raw, want)
	}
}
