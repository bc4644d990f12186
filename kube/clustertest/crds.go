package clustertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
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
// controller would, and returns once every one is served (see AwaitCRD).
// A CRD of the same name that is there already is brought to the given
// spec: its spec replaced, and the given labels and annotations set, so a
// test never runs against an earlier schema (one left on an existing
// cluster, or installed by another test under the same name). One that is
// being deleted is waited for, and created again. A resource whose CRD
// method fails fails t, with every other's error; so does a change the
// API server refuses, such as of the scope, or dropping a version that
// objects are stored in.
//
// The CRDs are left in place for the test binary's other tests, which may
// share them: tests that install different CRDs under one name mustn't
// run in parallel. On an existing cluster (FromKubeconfig), the CRDs
// Install created are deleted when Run's tests end; those it updated are
// left as it made them.
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
		c.installCRD(t, crd)
	}
	for _, crd := range crds {
		c.AwaitCRD(t, crd.Name)
	}
}

// InstallCRD installs crd as Install does, and returns it once it is
// served (see AwaitCRD).
func (c *Cluster) InstallCRD(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	c.installCRD(t, crd)
	return c.AwaitCRD(t, crd.Name)
}

// installCRD creates crd, or brings the CRD of its name to crd's spec;
// on an existing cluster it records a CRD it created for Stop to delete.
func (c *Cluster) installCRD(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	client := c.crds(t)
	Eventually(t, crdTimeout, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := client.Create(ctx, crd, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.createdCRD(crd.Name)
			return nil
		case !apierrors.IsAlreadyExists(err):
			t.Fatalf("clustertest: creating the CRD %s: %v", crd.Name, err)
		}
		err = updateCRD(ctx, client, crd)
		if errors.Is(err, errDeleting) || apierrors.IsNotFound(err) {
			return fmt.Errorf("clustertest: the CRD %s: %w", crd.Name, err) // created again at the next try
		}
		if err != nil {
			t.Fatalf("clustertest: updating the CRD %s to the spec given: %v", crd.Name, err)
		}
		return nil
	})
}

// createdCRD records, on an existing cluster, that Install created the
// CRD name, for Stop to delete.
func (c *Cluster) createdCRD(name string) {
	if c.from.kind != fromKubeconfig {
		return
	}
	c.crdMu.Lock()
	defer c.crdMu.Unlock()
	c.created = append(c.created, name)
}

// errDeleting says a CRD is being deleted.
var errDeleting = errors.New("it is being deleted")

// updateCRD replaces the spec of the CRD of crd's name with crd's, and
// sets crd's labels and annotations on it, unless it is being deleted.
func updateCRD(ctx context.Context, client apiextensionsv1client.CustomResourceDefinitionInterface, crd *apiextensionsv1.CustomResourceDefinition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := client.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.DeletionTimestamp != nil {
			return errDeleting
		}
		updated := got.DeepCopy()
		crd.Spec.DeepCopyInto(&updated.Spec)
		updated.Labels = merged(updated.Labels, crd.Labels)
		updated.Annotations = merged(updated.Annotations, crd.Annotations)
		if equality.Semantic.DeepEqual(updated, got) {
			return nil
		}
		_, err = client.Update(ctx, updated, metav1.UpdateOptions{})
		return err
	})
}

// merged is to with from's entries set.
func merged(to, from map[string]string) map[string]string {
	if len(from) == 0 {
		return to
	}
	if to == nil {
		to = map[string]string{}
	}
	maps.Copy(to, from)
	return to
}

// AwaitCRD waits until the CRD named name is Established, not being
// deleted, its names (kind, short names, ...) accepted as its spec has
// them, and every version it serves answers a list, so that an informer
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

// served is nil once crd is Established, not being deleted, its names
// accepted as its spec has them, and each version it serves answers a
// list.
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
	if names := crd.Status.AcceptedNames; !equality.Semantic.DeepEqual(names, crd.Spec.Names) {
		return fmt.Errorf("its accepted names are %+v, not yet its spec's %+v: %+v", names, crd.Spec.Names, crd.Status.Conditions)
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
