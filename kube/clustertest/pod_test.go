package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest/internal/fataltest"
)

const rbacManifest = `# A controller's RBAC.
apiVersion: v1
kind: ServiceAccount
metadata:
  name: shop-controller
  namespace: shop-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: shop-controller
rules:
- apiGroups: [shop.example.com]
  resources: [carts, carts/status]
  verbs: [list, watch, patch]
--- # the Lease
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: shop-controller
  namespace: shop-system
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: shop-controller
  namespace: shop-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: shop-controller
subjects:
- kind: ServiceAccount
  name: shop-controller
  namespace: shop-system
`

func TestRBACGrants(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(path, []byte(rbacManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	got := RBACGrants(t, path, "test-ns")
	want := []Grant{
		{Rules: []rbacv1.PolicyRule{{APIGroups: []string{"shop.example.com"}, Resources: []string{"carts", "carts/status"}, Verbs: []string{"list", "watch", "patch"}}}},
		{Namespace: "test-ns", Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RBACGrants = %+v, want %+v", got, want)
	}
}

func TestRBACGrantsFails(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "absent.yaml"), "clustertest: RBACGrants: open " + filepath.Join(dir, "absent.yaml") + ": no such file or directory"},
		{"no roles", write("sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: x\n"), "clustertest: RBACGrants: " + filepath.Join(dir, "sa.yaml") + ": no ClusterRole or Role"},
		{"bad rules", write("bad.yaml", "kind: Role\n---\nkind: ClusterRole\nrules: 3\n"), "clustertest: RBACGrants: " + filepath.Join(dir, "bad.yaml") + ": document 2: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal number into Go struct field .rules of type []v1.PolicyRule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fataltest.Message(t, func(tb testing.TB) { RBACGrants(tb, tc.path, "ns") })
			if got != tc.want {
				t.Errorf("RBACGrants failed with\n%q, want\n%q", got, tc.want)
			}
		})
	}
}

func TestOfflinePodHost(t *testing.T) {
	h := OfflinePodHost(t, "shop-system", "shop-controller-7d9f-x2k4q")
	wantEnv := map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.96.0.1",
		"KUBERNETES_SERVICE_PORT": "443",
		"POD_NAMESPACE":           "shop-system",
		"POD_NAME":                "shop-controller-7d9f-x2k4q",
	}
	if !reflect.DeepEqual(h.Env, wantEnv) {
		t.Errorf("Env = %v, want %v", h.Env, wantEnv)
	}
	if got := string(h.Files[TokenFile].Data); got != "eyJhbGciOi.payload.sig\n" {
		t.Errorf("the token file holds %q", got)
	}
	if got := string(h.Files[NamespaceFile].Data); got != "shop-system" {
		t.Errorf("the namespace file holds %q, want shop-system", got)
	}
	if ca := h.Files[CAFile].Data; !strings.HasPrefix(string(ca), "-----BEGIN CERTIFICATE-----\n") {
		t.Errorf("the CA file holds %q, want a PEM certificate", ca)
	}
	if got := len(h.Files); got != 3 {
		t.Errorf("the Host has %d files, want the service account's 3", got)
	}
}

func TestReadyAndMetrics(t *testing.T) {
	ready := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/readyz" && ready:
			_, _ = fmt.Fprintln(w, "ok")
		case r.URL.Path == "/readyz":
			http.Error(w, "informers: not synced", http.StatusServiceUnavailable)
		case r.URL.Path == "/metrics":
			_, _ = fmt.Fprint(w, "# TYPE up gauge\nup 1\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	err := Ready(t.Context(), addr)
	if want := "clustertest: GET http://" + addr + "/readyz: 503 Service Unavailable \"informers: not synced\""; err == nil || err.Error() != want {
		t.Errorf("Ready before = %v, want %s", err, want)
	}
	ready = true
	if err := Ready(t.Context(), addr); err != nil {
		t.Errorf("Ready after = %v, want nil", err)
	}
	text, err := Metrics(t.Context(), addr)
	if err != nil || text != "# TYPE up gauge\nup 1\n" {
		t.Errorf("Metrics = %q, %v", text, err)
	}
	srv.Close()
	if err := Ready(t.Context(), addr); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Ready of a closed server = %v, want connection refused", err)
	}
}

// returns is a Service whose Serve returns err at once.
type returns struct{ err error }

func (s returns) Serve(context.Context) error    { return s.err }
func (s returns) Shutdown(context.Context) error { return nil }

func TestAwaitExit(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{{nil, 0}, {errors.New("boom"), 1}} {
		init := func(context.Context, *humus.Setup) ([]humus.Service, error) {
			return []humus.Service{returns{tc.err}}, nil
		}
		p := humustest.Start(t, humustest.NewHost().Host(), init)
		if got := AwaitExit(t, p); got != tc.want {
			t.Errorf("AwaitExit = %d for a Service returning %v, want %d", got, tc.err, tc.want)
		}
	}
}

func TestManagedBy(t *testing.T) {
	fields := []metav1.ManagedFieldsEntry{
		{Manager: "shop-controller", Operation: metav1.ManagedFieldsOperationApply},
		{Manager: "shop-controller", Operation: metav1.ManagedFieldsOperationApply, Subresource: "status"},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate},
	}
	for _, tc := range []struct {
		manager     string
		op          metav1.ManagedFieldsOperationType
		subresource string
		want        bool
	}{
		{"shop-controller", metav1.ManagedFieldsOperationApply, "", true},
		{"shop-controller", metav1.ManagedFieldsOperationApply, "status", true},
		{"shop-controller", metav1.ManagedFieldsOperationUpdate, "", false},
		{"kubectl", metav1.ManagedFieldsOperationUpdate, "", true},
		{"kubectl", metav1.ManagedFieldsOperationUpdate, "status", false},
		{"other", metav1.ManagedFieldsOperationApply, "", false},
	} {
		if got := ManagedBy(fields, tc.manager, tc.op, tc.subresource); got != tc.want {
			t.Errorf("ManagedBy(%s, %s, %q) = %v, want %v", tc.manager, tc.op, tc.subresource, got, tc.want)
		}
	}
}
