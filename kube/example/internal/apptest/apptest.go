// Package apptest is the examples' shared test support: a Host set up as
// the kubelet sets up a pod, with or without a control plane behind it,
// the RBAC of a deploy/rbac.yaml, the wait for an App's exit, and who
// manages an object's fields. The control plane's own waits, Eventually
// and InstallCRD, are the clustertest package's. Like podenv, an operator
// author who copies an example's tests copies this package with them.
package apptest

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// The service account's files, as the kubelet mounts them, in the Host's
// FS, whose paths have no leading slash.
const (
	CAFile    = "var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	TokenFile = "var/run/secrets/kubernetes.io/serviceaccount/token"
)

// PodHost is a Host as the kubelet sets up a pod named pod in namespace,
// with no API server behind it, for tests of an App's settings: the
// Service's address, 10.96.0.1:443, a self-signed CA and a token,
// "eyJhbGciOi.payload.sig\n", as the service account's files, and the
// downward API's POD_NAMESPACE and POD_NAME.
func PodHost(t testing.TB, namespace, pod string) *humustest.Host {
	t.Helper()
	h := humustest.NewHost()
	h.Env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
	h.Env["KUBERNETES_SERVICE_PORT"] = "443"
	h.Env["POD_NAMESPACE"] = namespace
	h.Env["POD_NAME"] = pod
	ca, err := clustertest.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	h.Files[CAFile] = &fstest.MapFile{Data: ca.PEM()}
	h.Files[TokenFile] = &fstest.MapFile{Data: []byte("eyJhbGciOi.payload.sig\n")}
	return h
}

// ClusterPodHost is a Host as the kubelet sets up the controller's pod
// named pod in namespace ns of c: the API server's address, c's CA, and
// the token of service account account in ns, which has grants, as the
// service account's files, and the downward API's POD_NAMESPACE and
// POD_NAME. PROBES_ADDR is a free loopback address, which it returns: the
// probes' Service serves /readyz, /livez and /metrics there.
func ClusterPodHost(t testing.TB, c *clustertest.Cluster, ns, pod, account string, grants []clustertest.Grant) (*humustest.Host, string) {
	t.Helper()
	token := c.ServiceAccount(t, ns, account, grants...)
	_, port, err := net.SplitHostPort(c.Server())
	if err != nil {
		t.Fatal(err)
	}
	h := humustest.NewHost()
	probes := freeAddr(t, h)
	h.Env["KUBERNETES_SERVICE_HOST"] = "127.0.0.1"
	h.Env["KUBERNETES_SERVICE_PORT"] = port
	h.Env["POD_NAMESPACE"] = ns
	h.Env["POD_NAME"] = pod
	h.Env["PROBES_ADDR"] = probes
	h.Files[CAFile] = &fstest.MapFile{Data: c.CAPEM()}
	h.Files[TokenFile] = &fstest.MapFile{Data: []byte(token)}
	return h, probes
}

// RBACGrants are the rules of the ClusterRoles and Roles in the YAML file
// at path, a Role's granted in ns, the controller's namespace. It fails t
// if the file has neither.
func RBACGrants(t testing.TB, path, ns string) []clustertest.Grant {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var grants []clustertest.Grant
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
			grants = append(grants, clustertest.Grant{Rules: role.Rules})
		case "Role":
			grants = append(grants, clustertest.Grant{Namespace: ns, Rules: role.Rules})
		}
	}
	if len(grants) == 0 {
		t.Fatalf("%s has no ClusterRole or Role", path)
	}
	return grants
}

// Ready is nil once the probes at addr answer /readyz with 200 and "ok".
func Ready(addr string) error {
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

// Metrics is what the probes' Service at addr serves at /metrics, in
// Prometheus' text format.
func Metrics(addr string) (string, error) {
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/metrics: %s %q", res.Status, body)
	}
	return string(body), nil
}

// Wait waits for the App to exit, and returns its exit code. humus.Run
// returns within the grace period of 20s once the App stops, so Wait
// fails t if it hasn't within a minute.
func Wait(t testing.TB, p *humustest.Process) int {
	t.Helper()
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(time.Minute):
		t.Fatal("the App didn't exit within a minute")
		return -1
	}
}

// ManagedBy reports whether manager owns fields of an object, from its
// managedFields, by op on subresource ("" for the object itself).
func ManagedBy(fields []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType, subresource string) bool {
	for _, f := range fields {
		if f.Manager == manager && f.Operation == op && f.Subresource == subresource {
			return true
		}
	}
	return false
}

// freeAddr is a loopback address with a port no one listens on, found
// through h's Listen.
func freeAddr(t testing.TB, h *humustest.Host) string {
	t.Helper()
	l, err := h.Host().Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
