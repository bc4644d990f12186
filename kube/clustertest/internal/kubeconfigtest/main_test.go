// Package kubeconfigtest tests clustertest.FromKubeconfig: its TestMain
// starts a control plane of its own with clustertest.Start, as a running
// cluster, and runs its tests on it through its kubeconfig, as a test
// binary would run on a cluster it didn't start.
package kubeconfigtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube/clustertest"
)

// existing is the running cluster the tests are given by its kubeconfig.
var existing *clustertest.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() { // every test here needs the control plane, and skips
		os.Exit(clustertest.Run(m))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kubeconfigtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	existing, err = clustertest.Start(context.Background(), dir, clustertest.Fetch(clustertest.BuildOnly)) // these tests fetch nothing
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := clustertest.Run(m, clustertest.FromKubeconfig(existing.KubeconfigPath()))
	if err := errors.Join(installedDeleted(), updatedKept()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := existing.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// installedDeleted is nil when the CRD TestClusterKubeconfigInstall
// installed is gone or being deleted, as Run's end deletes the CRDs
// Install created on an existing cluster.
func installedDeleted() error {
	if !installed {
		return nil
	}
	client, err := apiextensions.NewForConfig(existing.AdminConfig())
	if err != nil {
		return err
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), gadgetsCRD, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case crd.DeletionTimestamp == nil:
		return errors.New("kubeconfigtest: the CRD that Install created on the existing cluster is still there after Run")
	}
	return nil
}

// updatedKept is nil when the CRD TestClusterKubeconfigInstallUpdates
// found on the cluster, and updated, is still there after Run, not being
// deleted: Run's end deletes only the CRDs Install created.
func updatedKept() error {
	if !updated {
		return nil
	}
	client, err := apiextensions.NewForConfig(existing.AdminConfig())
	if err != nil {
		return err
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), sparesCRD, metav1.GetOptions{})
	switch {
	case err != nil:
		return fmt.Errorf("kubeconfigtest: the CRD that Install updated on the existing cluster: %w", err)
	case crd.DeletionTimestamp != nil:
		return errors.New("kubeconfigtest: the CRD that Install updated on the existing cluster, which it didn't create, is being deleted after Run")
	}
	return nil
}
