package deploytest_test

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/z5labs/humus/kube/example/deploytest"
)

// An example is one of the examples' deploy/ folders, and what its
// controller's documents must agree on.
type example struct {
	dir        string // the deploy/ folder, from this package
	namespace  string // the controller's own namespace, namespace.yaml's
	controller string // the Deployment's and the ServiceAccount's name
	crds       int    // how many CRDs it ships
}

// name is the example's folder's name, such as memcached.
func (ex example) name() string { return filepath.Base(filepath.Dir(ex.dir)) }

var examples = []example{
	{dir: "../memcached/deploy", namespace: "memcached-system", controller: "memcached-controller", crds: 1},
	{dir: "../defaultdeny/deploy", namespace: "default-deny", controller: "default-deny", crds: 0},
}

// humusGracePeriod is humus.Main's default grace period: the pod's
// terminationGracePeriodSeconds must outlast it, or SIGKILL cuts the
// shutdown short.
const humusGracePeriod = 20

// TestDeployDecodes decodes every document of each deploy/ folder into
// client-go's types, refusing unknown and duplicate fields, and checks the
// folder has one Namespace, one ServiceAccount and one Deployment, all
// three of the names the example's rbac.yaml uses.
func TestDeployDecodes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

	for _, ex := range examples {
		t.Run(ex.name(), func(t *testing.T) {
			docs, err := deploytest.Read(ex.dir)
			if err != nil {
				t.Fatal(err)
			}
			count := map[string]int{}
			for _, d := range docs {
				obj, _, err := decoder.Decode(d.JSON, nil, nil)
				if runtime.IsNotRegisteredError(err) {
					continue // a custom resource, such as a sample; TestClusterDeploy applies it
				}
				if err != nil {
					t.Errorf("%s: %v", d, err)
					continue
				}
				switch o := obj.(type) {
				case *corev1.Namespace:
					count["Namespace"]++
					if o.Name != ex.namespace {
						t.Errorf("%s: want the Namespace %s", d, ex.namespace)
					}
				case *apiextensionsv1.CustomResourceDefinition:
					count["CustomResourceDefinition"]++
				case *corev1.ServiceAccount:
					count["ServiceAccount"]++
					if o.Name != ex.controller || o.Namespace != ex.namespace {
						t.Errorf("%s: want the ServiceAccount %s/%s", d, ex.namespace, ex.controller)
					}
				case *appsv1.Deployment:
					count["Deployment"]++
					checkDeployment(t, ex, d, o)
				}
			}
			want := map[string]int{"Namespace": 1, "ServiceAccount": 1, "Deployment": 1}
			if ex.crds > 0 {
				want["CustomResourceDefinition"] = ex.crds
			}
			for kind, n := range want {
				if count[kind] != n {
					t.Errorf("%d of kind %s, want %d", count[kind], kind, n)
				}
			}
		})
	}
}

// checkDeployment checks the controller's Deployment against what the
// App reads (app/settings.go) and what the Lease and a restricted Pod
// Security Standard need.
func checkDeployment(t *testing.T, ex example, d deploytest.Doc, dep *appsv1.Deployment) {
	t.Helper()
	k := deploymentCheck{t: t, d: d}
	pod := dep.Spec.Template.Spec
	k.checkPod(ex, dep)
	if len(pod.Containers) != 1 {
		k.errorf("%d containers, want 1", len(pod.Containers))
		return
	}
	c := pod.Containers[0]
	if c.Image == "" {
		k.errorf("no image")
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	k.checkEnv(env)
	probesPort := k.addrPort(env, "PROBES_ADDR", 8081)
	k.checkProbes(c, probesPort)
	k.checkPorts(c, env, probesPort)
	k.checkResources(c)
	k.checkSecurityContext(c, pod)
}

// A deploymentCheck reports what is wrong with one document, a
// Deployment, each error naming the document.
type deploymentCheck struct {
	t *testing.T
	d deploytest.Doc
}

func (k deploymentCheck) errorf(format string, args ...any) {
	k.t.Helper()
	k.t.Errorf("%s: %s", k.d, fmt.Sprintf(format, args...))
}

// checkPod checks the Deployment's name, its replicas, and its pod's
// ServiceAccount, grace period and seccomp profile.
func (k deploymentCheck) checkPod(ex example, dep *appsv1.Deployment) {
	k.t.Helper()
	if dep.Name != ex.controller || dep.Namespace != ex.namespace {
		k.errorf("want the Deployment %s/%s", ex.namespace, ex.controller)
	}
	if r := dep.Spec.Replicas; r == nil || *r != 2 {
		k.errorf("replicas = %s, want 2, one leader and one standby on the Lease", show(r))
	}
	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName != ex.controller {
		k.errorf("serviceAccountName = %q, want rbac.yaml's %q", pod.ServiceAccountName, ex.controller)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= humusGracePeriod {
		k.errorf("terminationGracePeriodSeconds = %s, want more than humus.Main's grace period, %ds", show(g), humusGracePeriod)
	}
	if psc := pod.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		k.errorf("the pod's seccompProfile isn't RuntimeDefault")
	}
}

// checkEnv checks that the pod's identity comes from the downward API,
// and that no KUBECONFIG overrides its service account.
func (k deploymentCheck) checkEnv(env map[string]corev1.EnvVar) {
	k.t.Helper()
	for name, path := range map[string]string{"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"} {
		if e, ok := env[name]; !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
			k.errorf("%s isn't set from the downward API's %s", name, path)
		}
	}
	if _, ok := env["KUBECONFIG"]; ok {
		k.errorf("KUBECONFIG is set: in a pod, the service account's token is used")
	}
}

// addrPort is the port of the address the variable name holds, or def if
// it is unset; -1, reported, if it isn't an address with a port.
func (k deploymentCheck) addrPort(env map[string]corev1.EnvVar, name string, def int) int {
	k.t.Helper()
	e, ok := env[name]
	if !ok {
		return def
	}
	_, port, err := net.SplitHostPort(e.Value)
	if err != nil {
		k.errorf("%s %q: %v", name, e.Value, err)
		return -1
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		k.errorf("%s %q: %v", name, e.Value, err)
		return -1
	}
	return n
}

// checkProbes checks that the readiness and liveness probes get the
// App's /readyz and /livez, on probesPort.
func (k deploymentCheck) checkProbes(c corev1.Container, probesPort int) {
	k.t.Helper()
	for what, probe := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"readinessProbe": {c.ReadinessProbe, "/readyz"}, "livenessProbe": {c.LivenessProbe, "/livez"}} {
		switch p := probe.p; {
		case p == nil || p.HTTPGet == nil:
			k.errorf("no %s with an httpGet", what)
		case p.HTTPGet.Path != probe.path || portOf(c, p.HTTPGet.Port) != probesPort:
			k.errorf("%s gets %s on port %s, want %s on %d", what, p.HTTPGet.Path, p.HTTPGet.Port.String(), probe.path, probesPort)
		}
	}
}

// portOf is the number of the container's port p, or -1 if p names a
// port the container hasn't.
func portOf(c corev1.Container, p intstr.IntOrString) int {
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	return -1
}

// checkPorts checks the container's one port. The App serves /metrics
// beside the probes, on PROBES_ADDR's port: it is the container's one
// port, named for Prometheus' scrapes, and there is no METRICS_ADDR,
// which the App doesn't read.
func (k deploymentCheck) checkPorts(c corev1.Container, env map[string]corev1.EnvVar, probesPort int) {
	k.t.Helper()
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || int(c.Ports[0].ContainerPort) != probesPort {
		k.errorf("ports %v, want one, named http, PROBES_ADDR's %d, where /metrics is served too", c.Ports, probesPort)
	}
	if _, ok := env["METRICS_ADDR"]; ok {
		k.errorf("METRICS_ADDR is set: the App serves /metrics on PROBES_ADDR")
	}
}

// checkResources checks that the container requests and is limited to
// some CPU and memory.
func (k deploymentCheck) checkResources(c corev1.Container) {
	k.t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			k.errorf("no request of %s", r)
		}
		if q, ok := c.Resources.Limits[r]; !ok || q.IsZero() {
			k.errorf("no limit of %s", r)
		}
	}
}

// checkSecurityContext checks the container's security context against
// the restricted Pod Security Standard: not root, no escalation, a
// read-only root filesystem, every capability dropped.
func (k deploymentCheck) checkSecurityContext(c corev1.Container, pod corev1.PodSpec) {
	k.t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		k.errorf("no container securityContext")
		return
	}
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil && pod.SecurityContext != nil {
		nonRoot = pod.SecurityContext.RunAsNonRoot
	}
	if nonRoot == nil || !*nonRoot {
		k.errorf("runAsNonRoot isn't true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		k.errorf("allowPrivilegeEscalation isn't false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		k.errorf("readOnlyRootFilesystem isn't true")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		k.errorf("capabilities don't drop exactly ALL and add none")
	}
}

// show is *p, or "unset" when p is nil.
func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
