package clustertest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/memcached/app"
)

// A whole App's test in a controller's own module: the Memcached
// operator's package app (its Init, its kube.Resource Memcached, and its
// Name) beside its deploy/rbac.yaml. The package's main_test.go runs its
// tests with a control plane:
//
//	func TestMain(m *testing.M) { os.Exit(clustertest.Run(m)) }
//
// and the test runs the App as its pod would, with exactly the RBAC its
// manifest grants, and checks what the API server holds.
//
// This example is compiled, never run: the test is a closure that is only
// assigned, since it needs a control plane and a TestMain that calls Run.
// In a module of one's own it is a test function, func
// TestClusterMemcached(t *testing.T), in a _test.go file.
func Example() {
	testClusterMemcached := func(t *testing.T) {
		c := clustertest.Get(t)
		c.Install(t, app.Memcached)
		ns := c.Namespace(t)
		h := c.PodHost(t, ns, "memcached-controller-0", app.Name, clustertest.RBACGrants(t, "../deploy/rbac.yaml", ns)...)
		p := humustest.Start(t, h.Host(), app.Init)
		clustertest.Eventually(t, time.Minute, func(ctx context.Context) error {
			return clustertest.Ready(ctx, h.Env["PROBES_ADDR"])
		})

		dyn, err := dynamic.NewForConfig(c.AdminConfig())
		if err != nil {
			t.Fatal(err)
		}
		admin, err := kubernetes.NewForConfig(c.AdminConfig())
		if err != nil {
			t.Fatal(err)
		}
		sessions := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cache.example.com/v1alpha1",
			"kind":       "Memcached",
			"metadata":   map[string]any{"name": "sessions"},
			"spec":       map[string]any{"size": int64(3)},
		}}
		if _, err := dyn.Resource(app.Memcached.GVR()).Namespace(ns).Create(t.Context(), sessions, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
			d, err := admin.AppsV1().Deployments(ns).Get(ctx, "sessions", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
				return fmt.Errorf("the Deployment's replicas = %v, want 3", d.Spec.Replicas)
			}
			return nil
		})

		p.Signal()
		if code := clustertest.AwaitExit(t, p); code != 0 {
			t.Fatalf("exit code %d, want 0; stderr:\n%s", code, h.Stderr())
		}
	}
	_ = testClusterMemcached
}

// A TestMain that fetches the control plane from a company's mirrors of
// the publishers' locations, fails rather than builds where it can't
// (a CI runner that reaches the mirror, and would rather say so than
// spend 15 minutes building), and pins kube-apiserver's SHA-256 for
// linux/amd64 beside the sum the mirror serves. The machine's
// HUMUS_CONTROLPLANE_FETCH, HUMUS_CONTROLPLANE_KUBERNETES_URL and
// HUMUS_CONTROLPLANE_ETCD_URL, when set, override these.
//
// Compiled, never run: it needs a testing.M.
func ExampleFetchFrom() {
	// The SHA-256 of v1.37.2's kube-apiserver for linux/amd64, as the team
	// recorded it when it took the release in.
	var kubeAPIServerSHA256 string
	testMain := func(m *testing.M) int {
		return clustertest.Run(m,
			clustertest.FetchFrom("https://artifacts.example.com/dl.k8s.io/release", "https://artifacts.example.com/etcd-releases"),
			clustertest.Fetch(clustertest.FetchOnly),
			clustertest.PinSHA256("v1.37.2/bin/linux/amd64/kube-apiserver", kubeAPIServerSHA256),
		)
	}
	_ = testMain // func TestMain(m *testing.M) { os.Exit(testMain(m)) }
}
