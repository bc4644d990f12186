package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/z5labs/humus/humustest"
)

// The service account's files, as the kubelet mounts them into a pod, in a
// Host's FS, whose paths have no leading slash.
const (
	CAFile        = "var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	TokenFile     = "var/run/secrets/kubernetes.io/serviceaccount/token"
	NamespaceFile = "var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// PodHost is a humustest Host as the kubelet sets up the controller's pod
// named pod in namespace, running as ServiceAccount account, for an App
// started with humustest.Start to run as its pod would against the
// cluster:
//
//   - account is created in namespace and granted exactly grants (see
//     ServiceAccount, and RBACGrants for a deploy/rbac.yaml's), which are in
//     effect when PodHost returns; all of it is deleted at t's cleanup;
//   - KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are Server's;
//   - CAFile holds CAPEM, TokenFile a token of account's (valid for a
//     day), and NamespaceFile namespace;
//   - the downward API's POD_NAMESPACE and POD_NAME are namespace and pod;
//   - PROBES_ADDR is a free loopback address, "127.0.0.1:PORT", for an App
//     that serves its probes (and metrics) where PROBES_ADDR says, as the
//     examples do; Ready and Metrics read them there. An App that reads
//     another variable is given it by the test, from h.Env["PROBES_ADDR"].
//
// The Host dials loopback only, as every humustest Host does.
func (c *Cluster) PodHost(t testing.TB, namespace, pod, account string, grants ...Grant) *humustest.Host {
	t.Helper()
	if len(c.caPEM) == 0 {
		t.Fatalf("clustertest: PodHost: %s names no CA, and a pod's %s needs one", c.from, CAFile)
	}
	token := c.ServiceAccount(t, namespace, account, grants...)
	host, port, err := net.SplitHostPort(c.server)
	if err != nil {
		t.Fatalf("clustertest: PodHost: the server %q: %v", c.server, err)
	}
	h := podHost(namespace, pod, host, port, c.caPEM, token)
	h.Env["PROBES_ADDR"] = freeAddr(t, h)
	return h
}

// OfflinePodHost is a humustest Host as the kubelet sets up a pod named
// pod in namespace, with no API server behind it, for tests of how an App
// reads its settings and connection: KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT are the kubernetes Service's usual 10.96.0.1 and
// 443, CAFile holds a fresh self-signed CA, TokenFile the token
// "eyJhbGciOi.payload.sig\n" (a newline ends it, as in some clusters), and
// NamespaceFile namespace; POD_NAMESPACE and POD_NAME are namespace and
// pod. An App that dials the API server from it is refused, since the
// Host dials loopback only.
func OfflinePodHost(t testing.TB, namespace, pod string) *humustest.Host {
	t.Helper()
	ca, err := NewCA("offline pod CA")
	if err != nil {
		t.Fatal(err)
	}
	return podHost(namespace, pod, "10.96.0.1", "443", ca.PEM(), "eyJhbGciOi.payload.sig\n")
}

// podHost is a Host with what the kubelet gives a pod.
func podHost(namespace, pod, serviceHost, servicePort string, caPEM []byte, token string) *humustest.Host {
	h := humustest.NewHost()
	h.Env["KUBERNETES_SERVICE_HOST"] = serviceHost
	h.Env["KUBERNETES_SERVICE_PORT"] = servicePort
	h.Env["POD_NAMESPACE"] = namespace
	h.Env["POD_NAME"] = pod
	h.Files[CAFile] = &fstest.MapFile{Data: bytes.Clone(caPEM)}
	h.Files[TokenFile] = &fstest.MapFile{Data: []byte(token)}
	h.Files[NamespaceFile] = &fstest.MapFile{Data: []byte(namespace)}
	return h
}

// freeAddr is a loopback address with a port no one listens on, found
// through h's Listen.
func freeAddr(t testing.TB, h *humustest.Host) string {
	t.Helper()
	l, err := h.Host().Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("clustertest: finding a free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("clustertest: finding a free port: %v", err)
	}
	return addr
}

// RBACGrants are the Grants of the RBAC manifest at path (YAML, documents
// separated by ---, as a controller's deploy/rbac.yaml is), for PodHost or
// ServiceAccount: each ClusterRole's and Role's rules, granted as the
// manifest's bindings grant them, with namespace, the controller's
// namespace in the test, in place of whatever namespace the manifest
// names:
//
//   - a ClusterRole that a ClusterRoleBinding binds is a Grant
//     cluster-wide;
//   - a ClusterRole that only RoleBindings bind is a Grant in namespace,
//     as a controller whose RoleBinding is in its own namespace has it;
//   - a Role is a Grant in namespace;
//   - a ClusterRole or Role that no binding in the manifest binds (a
//     manifest of the roles alone) is granted all the same: a ClusterRole
//     cluster-wide, a Role in namespace.
//
// Each binding is taken to bind the controller, whatever its subjects.
// The grants come in the order of the roles in the manifest, one a role;
// other kinds (the ServiceAccount) are passed over. It fails t, naming
// every mistake at once, if the file can't be read or parsed, holds no
// ClusterRole or Role, binds a role the manifest doesn't define (such as
// a ClusterRole of the cluster's, whose rules RBACGrants can't know), or
// holds a ClusterRole with an aggregationRule, whose rules the cluster's
// ClusterRoles decide.
func RBACGrants(t testing.TB, path, namespace string) []Grant {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("clustertest: RBACGrants: %v", err)
	}
	grants, err := parseRBAC(data, namespace)
	if err != nil {
		t.Fatalf("clustertest: RBACGrants: %s: %v", path, err)
	}
	return grants
}

// rbacDoc is what RBACGrants reads of a document of an RBAC manifest.
type rbacDoc struct {
	n        int    // its number in the manifest, from 1
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Rules           []rbacv1.PolicyRule     `json:"rules"`
	AggregationRule *rbacv1.AggregationRule `json:"aggregationRule"`
	RoleRef         rbacv1.RoleRef          `json:"roleRef"`
}

// A boundRole is a ClusterRole or Role of a manifest, and how its
// bindings bind it.
type boundRole struct {
	*rbacDoc
	clusterWide bool // a ClusterRoleBinding binds it
	inNamespace bool // a RoleBinding binds it
}

// parseRBAC is RBACGrants of the manifest data.
func parseRBAC(data []byte, namespace string) ([]Grant, error) {
	docs, err := readRBAC(data)
	if err != nil {
		return nil, err
	}
	var roles []*boundRole
	var errs []error
	for _, d := range docs {
		switch d.Kind {
		case "ClusterRole", "Role":
			roles = append(roles, &boundRole{rbacDoc: d})
			if d.AggregationRule != nil {
				errs = append(errs, fmt.Errorf("document %d: the ClusterRole %s has an aggregationRule: its rules are those of the cluster's ClusterRoles"+
					" that it selects, which RBACGrants can't know; list the rules in it, or in a ClusterRole of their own", d.n, d.Metadata.Name))
			}
		}
	}
	for _, d := range docs {
		if d.Kind == "ClusterRoleBinding" || d.Kind == "RoleBinding" {
			errs = append(errs, bind(roles, d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(roles) == 0 {
		return nil, errors.New("no ClusterRole or Role")
	}
	grants := make([]Grant, 0, len(roles))
	for _, r := range roles {
		g := Grant{Namespace: namespace, Rules: r.Rules}
		if r.Kind == "ClusterRole" && (r.clusterWide || !r.inNamespace) {
			g.Namespace = ""
		}
		grants = append(grants, g)
	}
	return grants, nil
}

// readRBAC is the documents of the manifest data.
func readRBAC(data []byte) ([]*rbacDoc, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []*rbacDoc
	for n := 1; ; n++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		d := &rbacDoc{n: n}
		if err := yaml.Unmarshal(raw, d); err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		docs = append(docs, d)
	}
}

// bind marks the role of roles that binding b binds as bound by it, or
// says why it can't.
func bind(roles []*boundRole, b *rbacDoc) error {
	ref := b.RoleRef
	this := fmt.Sprintf("document %d: the %s %s", b.n, b.Kind, b.Metadata.Name)
	if b.Kind == "RoleBinding" && b.Metadata.Namespace != "" {
		this = fmt.Sprintf("document %d: the RoleBinding %s/%s", b.n, b.Metadata.Namespace, b.Metadata.Name)
	}
	if ref.Kind != "ClusterRole" && (ref.Kind != "Role" || b.Kind != "RoleBinding") {
		return fmt.Errorf("%s binds a %q, which a %s can't", this, ref.Kind, b.Kind)
	}
	for _, r := range roles {
		if r.Kind != ref.Kind || r.Metadata.Name != ref.Name {
			continue
		}
		if r.Kind == "Role" && r.Metadata.Namespace != "" && b.Metadata.Namespace != "" && r.Metadata.Namespace != b.Metadata.Namespace {
			continue // another namespace's Role of the name
		}
		if b.Kind == "ClusterRoleBinding" {
			r.clusterWide = true
		} else {
			r.inNamespace = true
		}
		return nil
	}
	return fmt.Errorf("%s binds the %s %s, which the manifest doesn't define: RBACGrants grants only the rules the manifest holds", this, ref.Kind, ref.Name)
}

// Ready is nil once the probes at addr, "HOST:PORT", answer GET /readyz
// with 200 OK: a check for Eventually, with PodHost's PROBES_ADDR.
func Ready(ctx context.Context, addr string) error {
	_, err := probe(ctx, addr, "/readyz")
	return err
}

// Metrics is what the probes' server at addr, "HOST:PORT", serves at GET
// /metrics, in Prometheus' text format; an answer other than 200 OK is an
// error.
func Metrics(ctx context.Context, addr string) (string, error) {
	return probe(ctx, addr, "/metrics")
}

// probe GETs path from the plain HTTP server at addr, and returns its body
// when the answer is 200 OK.
func probe(ctx context.Context, addr, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return "", fmt.Errorf("clustertest: %w", err)
	}
	// No connection is kept: a test that checks for goroutines left
	// running finds none of this client's.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("clustertest: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("clustertest: GET %s: %w", req.URL, err)
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("clustertest: GET %s: %s %q", req.URL, res.Status, lastLines(body, 10))
	}
	return string(body), nil
}

// exitTimeout is how long AwaitExit waits: humus.Run returns within its
// grace period of 20s once the App is signalled.
const exitTimeout = time.Minute

// AwaitExit waits for the App that humustest.Start started to exit, and
// returns its exit code; it fails t if the App hasn't exited within a
// minute (humus.Run returns within its grace period of 20s once the App
// is signalled, or once its Services have returned).
func AwaitExit(t testing.TB, p *humustest.Process) int {
	t.Helper()
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(exitTimeout):
		t.Fatalf("clustertest: the App didn't exit within %s", exitTimeout)
		return -1
	}
}

// ManagedBy reports whether manager owns fields of an object, by its
// managedFields, through operation op on subresource ("" for the object
// itself, "status" for its status): such as a controller's server-side
// apply of the object (metav1.ManagedFieldsOperationApply, "") and of its
// status (metav1.ManagedFieldsOperationApply, "status").
func ManagedBy(fields []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType, subresource string) bool {
	for _, f := range fields {
		if f.Manager == manager && f.Operation == op && f.Subresource == subresource {
			return true
		}
	}
	return false
}
