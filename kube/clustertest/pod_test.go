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

// clusterRole and role are a ClusterRole and a Role named name (the Role
// in namespace ns) whose one rule is on resource name, or with no rule
// when res is "".
func clusterRole(name, res string) string {
	doc := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + name + "\n"
	if res != "" {
		doc += "rules:\n- apiGroups: [shop.example.com]\n  resources: [" + res + "]\n  verbs: [list]\n"
	}
	return doc
}

func role(ns, name string) string {
	return "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
		"\nrules:\n- apiGroups: [shop.example.com]\n  resources: [" + name + "]\n  verbs: [list]\n"
}

// binding is a binding of kind in namespace ns ("" for none) of the role
// of refKind named name, binding the ServiceAccount shop/shop. It is named
// after its namespace, or "cluster" or "namespace" when it has none.
func binding(kind, ns, refKind, name string) string {
	meta := "  name: " + ns + "\n  namespace: " + ns + "\n"
	switch {
	case ns == "" && kind == "ClusterRoleBinding":
		meta = "  name: cluster\n"
	case ns == "":
		meta = "  name: namespace\n"
	}
	return "apiVersion: rbac.authorization.k8s.io/v1\nkind: " + kind + "\nmetadata:\n" + meta +
		"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: " + refKind + "\n  name: " + name +
		"\nsubjects:\n- kind: ServiceAccount\n  name: shop\n  namespace: shop\n"
}

// TestRBACGrantsBindings pins RBACGrants' ignoring of bindings: it used to
// grant every ClusterRole cluster-wide, even one the manifest binds only
// by a RoleBinding, so a namespaced controller's test had more rights
// than its deployment.
func TestRBACGrantsBindings(t *testing.T) {
	rule := func(res string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{"shop.example.com"}, Resources: []string{res}, Verbs: []string{"list"}}}
	}
	docs := func(d ...string) string { return strings.Join(d, "---\n") }
	for _, tc := range []struct {
		name, manifest string
		want           []Grant
	}{
		{
			"a ClusterRole bound by a RoleBinding",
			docs(clusterRole("carts", "carts"), binding("RoleBinding", "shop", "ClusterRole", "carts")),
			[]Grant{{Namespace: "test-ns", Rules: rule("carts")}},
		},
		{
			"a ClusterRole bound by a ClusterRoleBinding",
			docs(binding("ClusterRoleBinding", "", "ClusterRole", "carts"), clusterRole("carts", "carts")),
			[]Grant{{Rules: rule("carts")}},
		},
		{
			"a ClusterRole bound by both",
			docs(clusterRole("carts", "carts"), binding("RoleBinding", "shop", "ClusterRole", "carts"), binding("ClusterRoleBinding", "", "ClusterRole", "carts")),
			[]Grant{{Rules: rule("carts")}},
		},
		{
			"a ClusterRole bound by RoleBindings in two namespaces",
			docs(clusterRole("carts", "carts"), binding("RoleBinding", "shop", "ClusterRole", "carts"), binding("RoleBinding", "other", "ClusterRole", "carts")),
			[]Grant{{Namespace: "test-ns", Rules: rule("carts")}},
		},
		{
			"roles of each kind, each bound, in the manifest's order",
			docs(role("shop", "leases"), clusterRole("carts", "carts"), clusterRole("orders", "orders"),
				binding("RoleBinding", "shop", "Role", "leases"), binding("RoleBinding", "shop", "ClusterRole", "carts"),
				binding("ClusterRoleBinding", "", "ClusterRole", "orders")),
			[]Grant{{Namespace: "test-ns", Rules: rule("leases")}, {Namespace: "test-ns", Rules: rule("carts")}, {Rules: rule("orders")}},
		},
		{
			"roles no binding binds, beside bound ones",
			docs(clusterRole("carts", "carts"), clusterRole("orders", "orders"), role("shop", "leases"),
				binding("RoleBinding", "shop", "ClusterRole", "carts")),
			[]Grant{{Namespace: "test-ns", Rules: rule("carts")}, {Rules: rule("orders")}, {Namespace: "test-ns", Rules: rule("leases")}},
		},
		{
			"Roles of one name in two namespaces, one bound",
			docs(role("a", "leases"), role("b", "leases"), binding("RoleBinding", "b", "Role", "leases")),
			[]Grant{{Namespace: "test-ns", Rules: rule("leases")}, {Namespace: "test-ns", Rules: rule("leases")}},
		},
		{
			"a binding without a namespace, of a Role with one",
			docs(role("shop", "leases"), binding("RoleBinding", "", "Role", "leases")),
			[]Grant{{Namespace: "test-ns", Rules: rule("leases")}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rbac.yaml")
			if err := os.WriteFile(path, []byte(tc.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := RBACGrants(t, path, "test-ns"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("RBACGrants of\n%s\n= %+v\nwant %+v", tc.manifest, got, tc.want)
			}
		})
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
		{"bad rules", write("bad.yaml", "kind: Role\n---\nkind: ClusterRole\nrules: 3\n"), "clustertest: RBACGrants: " + filepath.Join(dir, "bad.yaml") + ": document 2: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal number into Go struct field rbacDoc.rules of type []v1.PolicyRule"},
		{"aggregated, and bindings of roles it lacks", write("agg.yaml", clusterRole("all", "")+"aggregationRule:\n  clusterRoleSelectors:\n  - matchLabels: {x: y}\n---\n"+
			binding("RoleBinding", "shop", "ClusterRole", "view")+"---\n"+binding("ClusterRoleBinding", "", "Role", "all")+"---\n"+
			binding("RoleBinding", "", "Role", "absent")),
			"clustertest: RBACGrants: " + filepath.Join(dir, "agg.yaml") + ": document 1: the ClusterRole all has an aggregationRule:" +
				" its rules are those of the cluster's ClusterRoles that it selects, which RBACGrants can't know; list the rules in it, or in a ClusterRole of their own\n" +
				"document 2: the RoleBinding shop/shop binds the ClusterRole view, which the manifest doesn't define: RBACGrants grants only the rules the manifest holds\n" +
				`document 3: the ClusterRoleBinding cluster binds a "Role", which a ClusterRoleBinding can't` + "\n" +
				"document 4: the RoleBinding namespace binds the Role absent, which the manifest doesn't define: RBACGrants grants only the rules the manifest holds"},
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
