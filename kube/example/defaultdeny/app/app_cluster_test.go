package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/defaultdeny/app"
)

// The whole App, on humustest's Host and a real control plane, runs as its
// pod would, with exactly the RBAC of deploy/rbac.yaml. The control plane
// runs no network plugin, so the NetworkPolicies are stored and garbage
// collected, but not enforced.

func TestClusterDefaultDeny(t *testing.T) {
	c := clustertest.Get(t)
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	home := c.Namespace(t) // the controller's own, which holds its Lease
	const pod = "default-deny-5c7b9-qx2lm"
	host := c.PodHost(t, home, pod, app.Name, clustertest.RBACGrants(t, "../deploy/rbac.yaml", home)...)
	probes := host.Env["PROBES_ADDR"]

	p := humustest.Start(t, host.Host(), app.Init)
	clustertest.Eventually(t, time.Minute, func(ctx context.Context) error { return clustertest.Ready(ctx, probes) })

	// A namespace made while the controller runs.
	shop := c.Namespace(t)
	shopNS, err := admin.CoreV1().Namespaces().Get(t.Context(), shop, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ok := t.Run("gives every namespace its NetworkPolicy and ConfigMap", func(t *testing.T) {
		for _, ns := range []string{home, shop, "default"} {
			clustertest.Eventually(t, 30*time.Second, func(context.Context) error { return applied(t, admin, ns) })
		}
		cm, err := admin.CoreV1().ConfigMaps(shop).Get(t.Context(), app.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owner := metav1.GetControllerOf(cm)
		if owner == nil || owner.Kind != "Namespace" || owner.Name != shop || owner.UID != shopNS.UID {
			t.Errorf("the ConfigMap's controller owner reference = %+v, want Namespace %s", owner, shop)
		}
		if !clustertest.ManagedBy(cm.ManagedFields, app.Name, metav1.ManagedFieldsOperationApply, "") {
			t.Errorf("the ConfigMap's managed fields = %+v, want %s's Apply", cm.ManagedFields, app.Name)
		}
	})
	if !ok {
		return
	}

	ok = t.Run("puts back a deleted ConfigMap and NetworkPolicy", func(t *testing.T) {
		cm, err := admin.CoreV1().ConfigMaps(shop).Get(t.Context(), app.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.CoreV1().ConfigMaps(shop).Delete(t.Context(), app.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := admin.NetworkingV1().NetworkPolicies(shop).Delete(t.Context(), app.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		clustertest.Eventually(t, 10*time.Second, func(context.Context) error {
			got, err := admin.CoreV1().ConfigMaps(shop).Get(t.Context(), app.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.UID == cm.UID {
				return fmt.Errorf("the ConfigMap %s hasn't gone yet", cm.UID)
			}
			return applied(t, admin, shop)
		})
		t.Logf("put back in %v", time.Since(deleted).Round(time.Millisecond))
	})
	if !ok {
		return
	}

	ok = t.Run("takes back a hand-made change", func(t *testing.T) {
		patch := []byte(`{"data":{"README":"ingress is allowed here"}}`)
		if _, err := admin.CoreV1().ConfigMaps(shop).Patch(t.Context(), app.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		clustertest.Eventually(t, 10*time.Second, func(context.Context) error { return applied(t, admin, shop) })
	})
	if !ok {
		return
	}

	t.Run("leaves Kubernetes' own namespaces alone", func(t *testing.T) {
		_, err := admin.CoreV1().ConfigMaps("kube-system").Get(t.Context(), app.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("kube-system's ConfigMap %s: %v, want not found", app.Name, err)
		}
	})

	t.Run("exits 0 on its signal, and releases the Lease", func(t *testing.T) {
		p.Signal()
		if code := clustertest.AwaitExit(t, p); code != 0 {
			t.Fatalf("exit code %d, want 0; stderr:\n%s", code, host.Stderr())
		}
		if s := host.Stderr(); s != "" {
			t.Errorf("stderr = %q, want nothing", s)
		}
		l, err := admin.CoordinationV1().Leases(home).Get(t.Context(), app.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Lease: %v", err)
		}
		if h := l.Spec.HolderIdentity; h != nil && *h != "" {
			t.Errorf("the Lease's holder = %q after exit, want none", *h)
		}
	})
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
