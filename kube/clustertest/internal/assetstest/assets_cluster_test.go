package assetstest

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/clustertest/internal/fataltest"
)

func TestClusterAssetsServe(t *testing.T) {
	c := clustertest.Get(t)
	admin := adminClient(t, c)
	v, err := admin.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("/version = %s, want the built kube-apiserver's v1.37.2", v.GitVersion)
	}
	ns := c.Namespace(t)
	cm, err := admin.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events := clustertest.Writes(c.Audit(t), "admin")
	found := false
	for _, e := range events {
		if e.Verb == "create" && e.Resource == "configmaps" && e.Namespace == ns && e.Name == cm.Name {
			found = true
		}
	}
	if !found {
		t.Errorf("the audit log's writes by admin lack the create of %s/%s: %+v", ns, cm.Name, events)
	}
}

// TestClusterAssetsRunNoControllers checks what FromAssets's doc warns
// of: no garbage collection, no namespace deletion, and RequireControllers
// failing the test saying so.
func TestClusterAssetsRunNoControllers(t *testing.T) {
	c := clustertest.Get(t)
	admin := adminClient(t, c)

	got := fataltest.Message(t, c.RequireControllers)
	want := "clustertest: " + t.Name() + " needs kube-controller-manager's garbage collector and namespace controller," +
		" and the control plane of envtest's assets in " + assets + " runs no kube-controller-manager:" +
		" an object whose owner is deleted stays, and a deleted namespace never finishes deleting"
	if got != want {
		t.Errorf("RequireControllers failed with\n%q, want\n%q", got, want)
	}

	ns := c.Namespace(t)
	owner, err := admin.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{ref}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().ConfigMaps(ns).Delete(t.Context(), owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	doomed := c.Namespace(t)
	if err := admin.CoreV1().Namespaces().Delete(t.Context(), doomed, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The control plane built from source collects and deletes both
	// within a second or two.
	time.Sleep(5 * time.Second)
	if _, err := admin.CoreV1().ConfigMaps(ns).Get(t.Context(), "owned", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap whose owner was deleted 5s ago: %v, want it still there", err)
	}
	got2, err := admin.CoreV1().Namespaces().Get(t.Context(), doomed, metav1.GetOptions{})
	if err != nil || got2.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("the namespace deleted 5s ago: %v (%v), want it still Terminating", phase(got2), err)
	}
}

func phase(ns *corev1.Namespace) string {
	if ns == nil {
		return "absent"
	}
	return string(ns.Status.Phase)
}

func adminClient(t *testing.T, c *clustertest.Cluster) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return client
}
