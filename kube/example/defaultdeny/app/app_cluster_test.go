package app_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"testing/fstest"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/example/defaultdeny/app"
	"github.com/z5labs/humus/kube/internal/cluster"
)

// The whole App, on humustest's Host and a real control plane, runs as its
// pod would, with exactly the RBAC of deploy/rbac.yaml. The control plane
// runs no network plugin, so the NetworkPolicies are stored and garbage
// collected, but not enforced.

func TestClusterDefaultDeny(t *testing.T) {
	c := cluster.Get(t)
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	home := c.Namespace(t) // the controller's own, which holds its Lease
	const pod = "default-deny-5c7b9-qx2lm"
	host, probes := podHost(t, c, home, pod)

	p := humustest.Start(t, host.Host(), app.Init)
	eventually(t, time.Minute, func() error { return ready(probes) })

	// A namespace made while the controller runs.
	shop := c.Namespace(t)
	shopNS, err := admin.CoreV1().Namespaces().Get(t.Context(), shop, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ok := t.Run("gives every namespace its NetworkPolicy and ConfigMap", func(t *testing.T) {
		for _, ns := range []string{home, shop, "default"} {
			eventually(t, 30*time.Second, func() error { return applied(t, admin, ns) })
		}
		cm, err := admin.CoreV1().ConfigMaps(shop).Get(t.Context(), app.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owner := metav1.GetControllerOf(cm)
		if owner == nil || owner.Kind != "Namespace" || owner.Name != shop || owner.UID != shopNS.UID {
			t.Errorf("the ConfigMap's controller owner reference = %+v, want Namespace %s", owner, shop)
		}
		if !managedBy(cm.ManagedFields, app.Name, metav1.ManagedFieldsOperationApply) {
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
		eventually(t, 10*time.Second, func() error {
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
		eventually(t, 10*time.Second, func() error { return applied(t, admin, shop) })
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
		if code := wait(t, p); code != 0 {
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

// podHost is a Host as the kubelet sets up the controller's pod in ns:
// the API server's address, the service account's CA and token, and the
// downward API's namespace and name. The service account has the rules of
// deploy/rbac.yaml. The probes listen on the address it returns.
func podHost(t *testing.T, c *cluster.Cluster, ns, pod string) (*humustest.Host, string) {
	t.Helper()
	token := c.ServiceAccount(t, ns, app.Name, rbacGrants(t, "../deploy/rbac.yaml", ns)...)
	_, port, err := net.SplitHostPort(c.Server())
	if err != nil {
		t.Fatal(err)
	}
	probes := freeAddr(t)
	h := humustest.NewHost()
	h.Env["KUBERNETES_SERVICE_HOST"] = "127.0.0.1"
	h.Env["KUBERNETES_SERVICE_PORT"] = port
	h.Env["POD_NAMESPACE"] = ns
	h.Env["POD_NAME"] = pod
	h.Env["PROBES_ADDR"] = probes
	h.Files["var/run/secrets/kubernetes.io/serviceaccount/ca.crt"] = &fstest.MapFile{Data: c.CAPEM()}
	h.Files["var/run/secrets/kubernetes.io/serviceaccount/token"] = &fstest.MapFile{Data: []byte(token)}
	return h, probes
}

// rbacGrants are the rules of the ClusterRoles and Roles in the YAML file
// at path, a Role's granted in ns, the controller's namespace.
func rbacGrants(t *testing.T, path, ns string) []cluster.Grant {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var grants []cluster.Grant
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var role struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal(doc, &role); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch role.Kind {
		case "ClusterRole":
			grants = append(grants, cluster.Grant{Rules: role.Rules})
		case "Role":
			grants = append(grants, cluster.Grant{Namespace: ns, Rules: role.Rules})
		}
	}
	if len(grants) == 0 {
		t.Fatalf("%s has no ClusterRole or Role", path)
	}
	return grants
}

func managedBy(fields []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType) bool {
	for _, f := range fields {
		if f.Manager == manager && f.Operation == op {
			return true
		}
	}
	return false
}

// ready is nil once the probes at addr answer /readyz with 200.
func ready(addr string) error {
	res, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != "ok\n" {
		return fmt.Errorf("/readyz: %s %q", res.Status, body)
	}
	return nil
}

// freeAddr is a loopback address with a port no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// wait waits for the App to exit, and returns its exit code.
func wait(t *testing.T, p *humustest.Process) int {
	t.Helper()
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(time.Minute):
		t.Fatal("the App didn't exit within a minute")
		return -1
	}
}

// eventually polls check until it returns nil, and fails t with its last
// error if it doesn't within timeout.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
