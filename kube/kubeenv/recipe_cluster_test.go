package kubeenv_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/kubeenv"
)

// The repository's tests build the control plane, never download it: its
// machines reach no download location.
func TestMain(m *testing.M) { os.Exit(clustertest.Run(m, clustertest.Fetch(clustertest.BuildOnly))) }

// recipe is the package doc's recipe for running a controller locally
// with its ServiceAccount's rights, as a shell script run in the folder
// the kubeconfig is written to, with SA and NS set and KUBECONFIG naming
// an admin's kubeconfig.
var recipe = []string{
	`DIR=$PWD`,
	`kubectl config view --raw --minify --flatten -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > ca.crt`,
	`kubectl config set-cluster sa --kubeconfig=sa.kubeconfig --certificate-authority=ca.crt \`,
	`	--server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"`,
	`kubectl config set-credentials "$SA" --kubeconfig=sa.kubeconfig --token="$(kubectl create token "$SA" -n "$NS")"`,
	`kubectl config set-context sa --kubeconfig=sa.kubeconfig --cluster=sa --user="$SA"`,
	`kubectl config use-context sa --kubeconfig=sa.kubeconfig`,
}

// run is the recipe's second step, run in the same shell from the
// controller's module, wherever that is, without its command: the
// variables the controller is run with.
const run = `KUBECONFIG=$DIR/sa.kubeconfig POD_NAMESPACE=$NS POD_NAME=$(uname -n)`

// The controller's ServiceAccount, and what its RBAC gives it: to read
// ConfigMaps in its namespace, and nothing else.
const account = "memcached-controller"

func readConfigMaps(ns string) clustertest.Grant {
	return clustertest.Grant{Namespace: ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
	}}
}

// The kubeconfig the recipe writes, with a token of the ServiceAccount
// and the cluster's CA in a file beside it, gives a Client the
// ServiceAccount's rights: what its RBAC allows succeeds, and the rest is
// refused with a 403, as in the cluster.
func TestClusterRecipeKubeconfigHasTheServiceAccountsRights(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	token := c.ServiceAccount(t, ns, account, readConfigMaps(ns))

	// What the recipe writes, byte for byte as kubectl v1.32 wrote it.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ca.crt"), c.CAPEM())
	writeFile(t, filepath.Join(dir, "sa.kubeconfig"), fmt.Appendf(nil, `apiVersion: v1
clusters:
- cluster:
    certificate-authority: ca.crt
    server: https://%s
  name: sa
contexts:
- context:
    cluster: sa
    user: %s
  name: sa
current-context: sa
kind: Config
preferences: {}
users:
- name: %s
  user:
    token: %s
`, c.Server(), account, account, token))

	h := humus.OSHost()
	h.Dir = dir
	conn, err := kubeenv.Kubeconfig(t.Context(), h, "sa.kubeconfig", "")
	if err != nil {
		t.Fatalf("Kubeconfig: %v", err)
	}
	assertServiceAccountsRights(t, c, h, conn, ns)
}

// The recipe itself, run with the kubectl on PATH against the control
// plane, writes a kubeconfig with the ServiceAccount's rights, whose CA is
// named by a path relative to the kubeconfig's folder, and its second
// step, run from another folder, as from the controller's module, names
// that kubeconfig by its full path. The admin's kubeconfig may hold its CA
// or name it by a file, as minikube's does: --flatten embeds it first, or
// ca.crt would come out empty.
func TestClusterRecipeWithKubectl(t *testing.T) {
	c := clustertest.Get(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl on PATH to run the recipe with")
	}
	for _, tc := range []struct {
		name  string
		admin func(t *testing.T) string // the admin's kubeconfig's path
	}{
		{"the admin's CA embedded", func(*testing.T) string { return c.KubeconfigPath() }},
		{"the admin's CA by file", func(t *testing.T) string { return caByFile(t, c) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.Namespace(t)
			c.ServiceAccount(t, ns, account, readConfigMaps(ns))
			dir, module := t.TempDir(), t.TempDir()
			script := append(slices.Clone(recipe), `cd "$MODULE"`, run+` sh -c 'printf %s "$KUBECONFIG"' > kubeconfig.path`)
			cmd := exec.CommandContext(t.Context(), "sh", "-e", "-c", strings.Join(script, "\n"))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(),
				"KUBECONFIG="+tc.admin(t), "SA="+account, "NS="+ns, "MODULE="+module,
				"HOME="+t.TempDir(), // kubectl's cache, away from the user's
			)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the recipe, with %s: %v\n%s", kubectl, err, out)
			}

			if ca, err := os.ReadFile(filepath.Join(dir, "ca.crt")); err != nil || !bytes.Equal(ca, c.CAPEM()) {
				t.Fatalf("ca.crt = %q, %v, want the control plane's CA", ca, err)
			}
			cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, "sa.kubeconfig"))
			if err != nil {
				t.Fatal(err)
			}
			if sa := cfg.Clusters["sa"]; sa == nil || sa.CertificateAuthority != "ca.crt" {
				t.Errorf("the kubeconfig's cluster = %+v, want certificate-authority ca.crt, relative to its folder", sa)
			}

			// The second step's KUBECONFIG, read by Connection on a Host
			// working in the module's folder, as the controller would.
			kubeconfig, err := os.ReadFile(filepath.Join(module, "kubeconfig.path"))
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(dir, "sa.kubeconfig"); string(kubeconfig) != want {
				t.Errorf("the second step's KUBECONFIG = %q, want %q", kubeconfig, want)
			}
			h := humus.OSHost()
			h.Dir = module
			h.LookupEnv = func(name string) (string, bool) {
				if name == "KUBECONFIG" {
					return string(kubeconfig), true
				}
				return "", false
			}
			conn, err := kubeenv.Connection(t.Context(), h)
			if err != nil {
				t.Fatalf("Connection: %v", err)
			}
			assertServiceAccountsRights(t, c, h, conn, ns)
		})
	}
}

// caByFile is the path of a copy of the control plane's admin kubeconfig
// that names its CA by a file, as minikube's does, rather than holding it.
func caByFile(t *testing.T, c *clustertest.Cluster) string {
	t.Helper()
	cfg, err := clientcmd.Load(c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caPath := filepath.Join(dir, "ca.crt")
	writeFile(t, caPath, c.CAPEM())
	for _, cluster := range cfg.Clusters {
		cluster.CertificateAuthority, cluster.CertificateAuthorityData = caPath, nil
	}
	p := filepath.Join(dir, "config")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// assertServiceAccountsRights checks that a Client on conn, made on h, has
// the rights readConfigMaps grants in ns, and no others.
func assertServiceAccountsRights(t *testing.T, c *clustertest.Cluster, h humus.Host, conn kube.Connection, ns string) {
	t.Helper()
	ctx := t.Context()
	admin, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	client, err := kube.NewClient(&humus.Setup{Host: h}, conn)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	cs, err := kubernetes.NewForConfig(client.Config())
	if err != nil {
		t.Fatal(err)
	}

	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing ConfigMaps in %s, which the RBAC allows: %v", ns, err)
	}
	if names := itemNames(list.Items); !slices.Contains(names, "settings") {
		t.Errorf("ConfigMaps in %s = %q, want settings among them", ns, names)
	}

	user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, account)
	for _, refused := range []struct {
		what string
		call func(context.Context) error
	}{
		{"listing Secrets in " + ns, func(ctx context.Context) error {
			_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"creating a ConfigMap in " + ns, func(ctx context.Context) error {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
			return err
		}},
		{"listing ConfigMaps in default", func(ctx context.Context) error {
			_, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			return err
		}},
	} {
		err := refused.call(ctx)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "`+user+`" cannot`) {
			t.Errorf("%s, which the RBAC doesn't allow: %v, want a 403 naming %s", refused.what, err, user)
		}
	}
}

func itemNames(items []corev1.ConfigMap) []string {
	var names []string
	for _, cm := range items {
		names = append(names, cm.Name)
	}
	return names
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRecipeNamesThePodWithoutUSER runs the recipe's second step where
// USER is unset, as for root in a container: POD_NAME, the Lease's
// identity, is still set.
func TestRecipeNamesThePodWithoutUSER(t *testing.T) {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "USER=") {
			env = append(env, kv)
		}
	}
	cmd := exec.CommandContext(t.Context(), "sh", "-e", "-c", run+` sh -c 'printf %s "$POD_NAME"'`)
	cmd.Env = append(env, "DIR="+t.TempDir(), "NS=default")
	out, err := cmd.Output()
	if err != nil || len(out) == 0 {
		t.Errorf("the recipe's second step without USER: POD_NAME=%q, %v; want a name", out, err)
	}
}

// TestRecipeIsTheDocs checks that the package doc, and the guide in
// docs/kubernetes-controllers.md, give the recipe these tests run, line
// for line, in order, and then its second step.
func TestRecipeIsTheDocs(t *testing.T) {
	for _, tc := range []struct {
		file, indent string
	}{
		{"doc.go", "//\t"},
		{filepath.Join("..", "..", "docs", "kubernetes-controllers.md"), ""},
	} {
		doc, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		rest := string(doc)
		for _, line := range append(slices.Clone(recipe), run+" go run ") {
			if !strings.HasSuffix(line, " go run ") {
				line += "\n"
			}
			i := strings.Index(rest, "\n"+tc.indent+line)
			if i < 0 {
				t.Errorf("%s doesn't give the recipe's line, after the ones before it:\n%s", tc.file, line)
				break
			}
			rest = rest[i+len(line):]
		}
	}
}
