package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/defaultdeny/app"
	"github.com/z5labs/humus/kube/example/internal/apptest"
)

// The whole App, on humustest's Host and a real control plane, runs as its
// pod would, with exactly the RBAC of deploy/rbac.yaml. The control plane
// runs no network plugin, so the NetworkPolicies are stored and garbage
// collected, but not enforced.

func TestClusterDefaultDeny(t *testing.T) {
	r := startDefaultDeny(t)
	for _, phase := range []struct {
		name  string
		check func(*testing.T)
	}{
		{"gives every namespace its NetworkPolicy and ConfigMap", r.appliesToEveryNamespace},
		{"puts back a deleted ConfigMap and NetworkPolicy", r.putsBackWhatIsDeleted},
		{"takes back a hand-made change", r.takesBackAHandMadeChange},
	} {
		if !t.Run(phase.name, phase.check) {
			return
		}
	}
	t.Run("leaves Kubernetes' own namespaces alone", r.leavesKubeSystemAlone)
	t.Run("exits 0 on its signal, and releases the Lease", r.exitsAndReleasesTheLease)
}

// A defaultDenyRun is TestClusterDefaultDeny's App and the namespace it
// made while the App runs, which each phase finds as the phases before
// it left them.
type defaultDenyRun struct {
	admin  kubernetes.Interface
	home   string // the controller's own namespace, which holds its Lease
	host   *humustest.Host
	p      *humustest.Process
	shop   string // a namespace made while the controller runs
	shopNS *corev1.Namespace
}

// startDefaultDeny starts the App as its pod would run, waits until it is
// ready, and then makes a namespace.
func startDefaultDeny(t *testing.T) *defaultDenyRun {
	c := clustertest.Get(t)
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	home := c.Namespace(t)
	const pod = "default-deny-5c7b9-qx2lm"
	grants := clustertest.RBACGrants(t, "../deploy/rbac.yaml", home)
	host := c.PodHost(t, home, pod, app.Name, grants...)
	// Over the whole run, no request refused, and no right unused.
	c.CheckRights(t, home, app.Name, grants, clustertest.FailUnusedRights())
	probes := host.Env["PROBES_ADDR"]

	p := humustest.Start(t, host.Host(), app.Init)
	clustertest.Eventually(t, time.Minute, func(ctx context.Context) error { return clustertest.Ready(ctx, probes) })

	shop := c.Namespace(t)
	shopNS, err := admin.CoreV1().Namespaces().Get(t.Context(), shop, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &defaultDenyRun{admin: admin, home: home, host: host, p: p, shop: shop, shopNS: shopNS}
}

func (r *defaultDenyRun) appliesToEveryNamespace(t *testing.T) {
	for _, ns := range []string{r.home, r.shop, "default"} {
		clustertest.Eventually(t, 30*time.Second, func(context.Context) error { return applied(t, r.admin, ns) })
	}
	cm, err := r.admin.CoreV1().ConfigMaps(r.shop).Get(t.Context(), app.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.GetControllerOf(cm)
	if owner == nil || owner.Kind != "Namespace" || owner.Name != r.shop || owner.UID != r.shopNS.UID {
		t.Errorf("the ConfigMap's controller owner reference = %+v, want Namespace %s", owner, r.shop)
	}
	if !clustertest.ManagedBy(cm.ManagedFields, app.Name, metav1.ManagedFieldsOperationApply, "") {
		t.Errorf("the ConfigMap's managed fields = %+v, want %s's Apply", cm.ManagedFields, app.Name)
	}
}

func (r *defaultDenyRun) putsBackWhatIsDeleted(t *testing.T) {
	cm, err := r.admin.CoreV1().ConfigMaps(r.shop).Get(t.Context(), app.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.admin.CoreV1().ConfigMaps(r.shop).Delete(t.Context(), app.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.admin.NetworkingV1().NetworkPolicies(r.shop).Delete(t.Context(), app.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	clustertest.Eventually(t, 10*time.Second, func(context.Context) error {
		got, err := r.admin.CoreV1().ConfigMaps(r.shop).Get(t.Context(), app.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.UID == cm.UID {
			return fmt.Errorf("the ConfigMap %s hasn't gone yet", cm.UID)
		}
		return applied(t, r.admin, r.shop)
	})
	t.Logf("put back in %v", time.Since(deleted).Round(time.Millisecond))
}

func (r *defaultDenyRun) takesBackAHandMadeChange(t *testing.T) {
	patch := []byte(`{"data":{"README":"ingress is allowed here"}}`)
	if _, err := r.admin.CoreV1().ConfigMaps(r.shop).Patch(t.Context(), app.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 10*time.Second, func(context.Context) error { return applied(t, r.admin, r.shop) })
}

func (r *defaultDenyRun) leavesKubeSystemAlone(t *testing.T) {
	_, err := r.admin.CoreV1().ConfigMaps("kube-system").Get(t.Context(), app.Name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("kube-system's ConfigMap %s: %v, want not found", app.Name, err)
	}
}

func (r *defaultDenyRun) exitsAndReleasesTheLease(t *testing.T) {
	apptest.Stop(t, r.p, r.host)
	if s := r.host.Stderr(); s != "" {
		t.Errorf("stderr = %q, want nothing", s)
	}
	apptest.LeaseReleased(t, r.admin, r.home, app.Name)
}

// applied is nil once ns holds the controller's NetworkPolicy and its
// ConfigMap with the notice.
func applied(t *testing.T, admin kubernetes.Interface, ns string) error {
	if _, err := admin.NetworkingV1().NetworkPolicies(ns).Get(t.Context(), app.Name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(t.Context(), app.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	if cm.Data["README"] != app.Notice {
		return fmt.Errorf("namespace %s: the ConfigMap's README = %q, want the notice", ns, cm.Data["README"])
	}
	return nil
}
