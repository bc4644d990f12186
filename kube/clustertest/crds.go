package clustertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// crdTimeout is how long AwaitCRD waits for a CRD to be served.
const crdTimeout = time.Minute

// A Resource is what makes the CRD of a custom resource, such as a
// kube.Resource, whose CRD method builds it from the Go types of its
// spec and status.
type Resource interface {
	CRD() (*apiextensionsv1.CustomResourceDefinition, error)
}

// Install installs the CRD of each resource, as whatever deploys a
// controller would, unless a CRD of its name is there already (which is
// kept as it is), and returns once every one is served (see AwaitCRD). A
// resource whose CRD method fails fails t, with every other's error. The
// CRDs are left in place for the test binary's other tests, which may
// share them; on an existing cluster (FromKubeconfig), those Install
// created are deleted when Run's tests end.
func (c *Cluster) Install(t testing.TB, resources ...Resource) {
	t.Helper()
	var crds []*apiextensionsv1.CustomResourceDefinition
	var errs []error
	for _, r := range resources {
		crd, err := r.CRD()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		crds = append(crds, crd)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("clustertest: Install: %v", err)
	}
	for _, crd := range crds {
		c.createCRD(t, crd)
	}
	for _, crd := range crds {
		c.AwaitCRD(t, crd.Name)
	}
}

// InstallCRD creates crd, as whatever deploys a controller would, unless a
// CRD of its name is there already (which is kept as it is), and returns
// it once it is served (see AwaitCRD). It is left in place for the test
// binary's other tests, which may share it.
func (c *Cluster) InstallCRD(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	c.createCRD(t, crd)
	return c.AwaitCRD(t, crd.Name)
}

// createCRD creates crd unless a CRD of its name is there already; on an
// existing cluster it records crd's name for Stop to delete.
func (c *Cluster) createCRD(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	_, err := c.crds(t).Create(ctx, crd, metav1.CreateOptions{})
	switch {
	case err == nil && c.from.kind == fromKubeconfig:
		c.crdMu.Lock()
		c.created = append(c.created, crd.Name)
		c.crdMu.Unlock()
	case err != nil && !apierrors.IsAlreadyExists(err):
		t.Fatalf("clustertest: creating the CRD %s: %v", crd.Name, err)
	}
}

// AwaitCRD waits until the CRD named name is Established, not being
// deleted, and every version it serves answers a list, so that an informer
// or a create finds its resource served; it returns the CRD as it then is,
// and fails t if that takes longer than a minute. It doesn't wait on t's
// context, so a cleanup can call it.
func (c *Cluster) AwaitCRD(t testing.TB, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds := c.crds(t)
	dyn, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	var crd *apiextensionsv1.CustomResourceDefinition
	Eventually(t, crdTimeout, func(ctx context.Context) error {
		got, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("clustertest: the CRD %s: %w", name, err)
		}
		if err := served(ctx, dyn, got); err != nil {
			return fmt.Errorf("clustertest: the CRD %s: %w", name, err)
		}
		crd = got
		return nil
	})
	return crd
}

// served is nil once crd is Established, not being deleted, and each
// version it serves answers a list.
func served(ctx context.Context, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	if crd.DeletionTimestamp != nil {
		return errors.New("it is being deleted")
	}
	established := false
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		return fmt.Errorf("it isn't Established: %+v", crd.Status.Conditions)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
		if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return fmt.Errorf("it is Established, and listing %s: %w", gvr, err)
		}
	}
	return nil
}

// crds is the admin's client of CRDs.
func (c *Cluster) crds(t testing.TB) apiextensionsv1client.CustomResourceDefinitionInterface {
	t.Helper()
	client, err := c.crdClient()
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func (c *Cluster) crdClient() (apiextensionsv1client.CustomResourceDefinitionInterface, error) {
	client, err := apiextensions.NewForConfig(c.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	return client.ApiextensionsV1().CustomResourceDefinitions(), nil
}
