package kube

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// clusterCaches is the real-cluster tests' resource: a group of its own,
// so its CRD is the controller tests' alone.
var clusterCaches = Resource[cacheSpec, cacheStatus]{
	Group:   "controller.test.example.com",
	Version: "v1alpha1",
	Kind:    "Memcached",
	Plural:  "memcacheds",
	Scope:   Namespaced,
}

// controllerRBAC is what the package doc lists for a Controller, in ns for
// its objects and its Lease, plus what the test's Reconciler applies.
func controllerRBAC(group, plural, ns string) []clustertest.Grant {
	return []clustertest.Grant{{Namespace: ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: []string{plural}, Verbs: []string{"list", "watch", "patch"}},
		{APIGroups: []string{group}, Resources: []string{plural + "/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		// list and watch for Owns; create and patch for the Reconciler's
		// apply, which creates the Deployment the first time.
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch", "create", "patch"}},
	}}}
}

// installCRD installs r's CRD, as whatever deploys the controller would,
// and waits until it is served. It is left in place for the package's
// other tests.
func installCRD[Spec, Status any](t *testing.T, c *clustertest.Cluster, r Resource[Spec, Status]) {
	t.Helper()
	crd, err := r.CRD()
	if err != nil {
		t.Fatal(err)
	}
	c.InstallCRD(t, crd)
}

// clientAs returns a Client that authenticates with token, recording into
// tel.
func clientAs(t *testing.T, c *clustertest.Cluster, tel *humustest.Telemetry, token string) (*humus.Setup, *Client) {
	t.Helper()
	s := &humus.Setup{Host: humustest.NewHost().Host(), Telemetry: tel.Telemetry()}
	client, err := NewClient(s, Connection{
		Server: c.Server(),
		TLS:    &tls.Config{RootCAs: c.CA()},
		Token:  func(context.Context) (string, error) { return token, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range tel.Records() {
				t.Logf("record: %s %s %v", r.Severity(), r.Body().AsString(), recordAttrs(r))
			}
		}
	})
	return s, client
}

// deployer is the proposal's Memcached Reconciler, counting its reconciles.
type deployer struct {
	kube  kubernetes.Interface
	calls counter
}

func (d *deployer) Reconcile(ctx context.Context, m Object[cacheSpec, cacheStatus]) (Result[cacheStatus], error) {
	d.calls.Inc(m.Name)
	labels := map[string]string{"app": "memcached", "memcached": m.Name}
	dep, err := d.kube.AppsV1().Deployments(m.Namespace).Apply(ctx,
		appsv1ac.Deployment(m.Name, m.Namespace).
			WithOwnerReferences(metav1ac.OwnerReference().
				WithAPIVersion(m.APIVersion).WithKind(m.Kind).WithName(m.Name).WithUID(m.UID).
				WithController(true).WithBlockOwnerDeletion(true)).
			WithSpec(appsv1ac.DeploymentSpec().
				WithReplicas(m.Spec.Size).
				WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
				WithTemplate(corev1ac.PodTemplateSpec().
					WithLabels(labels).
					WithSpec(corev1ac.PodSpec().WithContainers(
						corev1ac.Container().WithName("memcached").WithImage("memcached:1.6.26-alpine3.19"))))),
		metav1.ApplyOptions{FieldManager: "memcached-controller", Force: true},
	)
	if err != nil {
		return Result[cacheStatus]{}, err
	}
	st := m.Status
	st.ReadyReplicas = *dep.Spec.Replicas
	return Result[cacheStatus]{Status: &st}, nil
}

func createCache(t *testing.T, d dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, size int64) {
	t.Helper()
	u := object(gvr.GroupVersion().String(), "Memcached", ns, name, map[string]any{"size": size})
	unstructured.RemoveNestedField(u.Object, "metadata", "uid")
	if _, err := d.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readyReplicasAre is nil once the clusterCaches object ns/name reports
// want ready replicas.
func readyReplicasAre(ctx context.Context, d dynamic.Interface, ns, name string, want int64) error {
	u, err := d.Resource(clusterCaches.GVR()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas"); n != want {
		return fmt.Errorf("%s's status.readyReplicas = %d, want %d", name, n, want)
	}
	return nil
}

// reconciled is nil once calls counts a reconcile of name.
func reconciled(calls *counter, name string) error {
	if calls.Get(name) == 0 {
		return fmt.Errorf("%s isn't reconciled yet", name)
	}
	return nil
}

// statusApplies counts the controller's status applies: its client spans
// of a PATCH to a status subresource.
func statusApplies(tel *humustest.Telemetry) int {
	n := 0
	for _, s := range tel.Spans() {
		attrs := spanAttrs(s)
		if attrs["http.request.method"] == "PATCH" && strings.Contains(attrs["url.full"], "/status") {
			n++
		}
	}
	return n
}

func TestClusterMemcachedReconcilesIntoADeploymentItControls(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	gvr := clusterCaches.GVR()
	ns := c.Namespace(t)
	token := c.ServiceAccount(t, ns, "memcached-controller", controllerRBAC(gvr.Group, gvr.Resource, ns)...)
	tel := humustest.NewTelemetry()
	setup, client := clientAs(t, c, tel, token)
	kc := kubernetes.NewForConfigOrDie(client.Config())
	rec := &deployer{kube: kc}
	var finalized counter
	s := testSettings()
	s.Namespace = ns
	s.LeaderElection.Namespace = ns
	s.Workers = 2
	ctrl, err := NewController(setup, client, s, clusterCaches, rec,
		Owns(deployments),
		Finalize("cache.example.com/finalizer", func(ctx context.Context, m Object[cacheSpec, cacheStatus]) error {
			finalized.Inc(m.Name)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	stop := served(t, ctrl)

	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	adminKube := kubernetes.NewForConfigOrDie(c.AdminConfig())
	createCache(t, admin, gvr, ns, "m", 2)
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		return readyReplicasAre(ctx, admin, ns, "m", 2)
	})
	checkOneReconcileAndOneStatusApply(t, rec, tel)
	checkTheControllersWritesOfM(t, admin, adminKube, ns)
	checkAScaleOfMsDeploymentIsUndone(t, adminKube, ns)
	checkDeletingMFinalizesItAndCollectsItsDeployment(t, admin, adminKube, ns, &finalized)

	if err := stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
	lease, err := adminKube.CoordinationV1().Leases(ns).Get(t.Context(), "memcached-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder(lease) != "" {
		t.Errorf("the Lease's holder after Serve returned = %q, want none", holder(lease))
	}
}

// checkOneReconcileAndOneStatusApply checks what the package promises,
// whatever order the events come in: one reconcile of m, and one status
// apply. The reconcile makes three changes: its finalizer and its status,
// on the Memcacheds' watch, and its Deployment, applied by the Reconciler
// through the Client's transport, on the Deployments' (nothing else
// writes the Deployment: the control plane runs no Deployment
// controller). Each is the reconcile's own outcome, so none of their
// events queues it again.
func checkOneReconcileAndOneStatusApply(t *testing.T, rec *deployer, tel *humustest.Telemetry) {
	t.Helper()
	time.Sleep(3 * time.Second) // time for a second reconcile, or a second apply, to show
	if got := rec.calls.Get("m"); got != 1 {
		t.Errorf("reconciles = %d, want 1: the events of its finalizer, its status and its Deployment are its own", got)
	}
	if got := statusApplies(tel); got != 1 {
		t.Errorf("status applies = %d, want 1", got)
	}
}

// checkTheControllersWritesOfM checks that m has the controller's
// finalizer, its two applies in its managed fields, and a Deployment
// that m controls.
func checkTheControllersWritesOfM(t *testing.T, admin dynamic.Interface, adminKube kubernetes.Interface, ns string) {
	t.Helper()
	m, err := admin.Resource(clusterCaches.GVR()).Namespace(ns).Get(t.Context(), "m", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.GetFinalizers(); len(got) != 1 || got[0] != "cache.example.com/finalizer" {
		t.Errorf("finalizers = %v, want [cache.example.com/finalizer]", got)
	}
	var applyMain, applyStatus bool
	for _, mf := range m.GetManagedFields() {
		if mf.Manager == "memcached-controller" && mf.Operation == metav1.ManagedFieldsOperationApply {
			switch mf.Subresource {
			case "":
				applyMain = true
			case "status":
				applyStatus = true
			}
		}
	}
	if !applyMain || !applyStatus {
		t.Errorf("managed fields %+v: want memcached-controller's Apply, and its Apply on status", m.GetManagedFields())
	}
	dep, err := adminKube.AppsV1().Deployments(ns).Get(t.Context(), "m", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(dep); ref == nil || ref.UID != m.GetUID() || ref.Kind != "Memcached" {
		t.Errorf("the Deployment's controller = %+v, want the Memcached %s", ref, m.GetUID())
	}
}

// checkAScaleOfMsDeploymentIsUndone scales m's Deployment by hand, and
// checks that the controller undoes it within a second.
func checkAScaleOfMsDeploymentIsUndone(t *testing.T, adminKube kubernetes.Interface, ns string) {
	t.Helper()
	scale := []byte(`{"spec":{"replicas":5}}`)
	if _, err := adminKube.AppsV1().Deployments(ns).Patch(t.Context(), "m", types.MergePatchType, scale, metav1.PatchOptions{FieldManager: "kubectl-scale"}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, time.Second, func(ctx context.Context) error {
		d, err := adminKube.AppsV1().Deployments(ns).Get(ctx, "m", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 2 {
			return fmt.Errorf("the scale isn't undone: the Deployment's replicas = %d, want 2", *d.Spec.Replicas)
		}
		return nil
	})
}

// checkDeletingMFinalizesItAndCollectsItsDeployment deletes m, and checks
// that its finalizer ran once (finalized counts its runs) and was removed,
// and that its Deployment is garbage-collected.
func checkDeletingMFinalizesItAndCollectsItsDeployment(t *testing.T, admin dynamic.Interface, adminKube kubernetes.Interface, ns string, finalized *counter) {
	t.Helper()
	objects := admin.Resource(clusterCaches.GVR()).Namespace(ns)
	if err := objects.Delete(t.Context(), "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		_, err := objects.Get(ctx, "m", metav1.GetOptions{})
		return clustertest.Gone("the Memcached", err)
	})
	if got := finalized.Get("m"); got != 1 {
		t.Errorf("f ran %d times, want 1", got)
	}
	clustertest.Eventually(t, 60*time.Second, func(ctx context.Context) error {
		_, err := adminKube.AppsV1().Deployments(ns).Get(ctx, "m", metav1.GetOptions{})
		return clustertest.Gone("the Deployment", err)
	})
}

func TestClusterServeFailsOnAResourceThatIsNotServed(t *testing.T) {
	c := clustertest.Get(t)
	absent := clusterCaches
	absent.Kind, absent.Plural = "Absent", "absents"
	tel := humustest.NewTelemetry()
	setup, client := clientAs(t, c, tel, c.AdminToken())
	s := testSettings()
	s.LeaderElection.Namespace = c.Namespace(t)
	ctrl, err := NewController(setup, client, s, absent, readyReplicas(&counter{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = ctrl.Serve(ctx)
	const want = "kube: listing controller.test.example.com/v1alpha1, Resource=absents: the server could not find the requested resource"
	if err == nil || err.Error() != want {
		t.Errorf("Serve = %v, want %q", err, want)
	}
}

// A Lease in a namespace that doesn't exist can never be created (the API
// server answers 404, namespaces "..." not found): Serve ends within
// seconds, naming the Lease and the answer, and Synced goes unhealthy.
// Before, every replica stayed Ready, retrying forever, none working.
func TestClusterALeaseInANamespaceThatDoesNotExistEndsServe(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	tel := humustest.NewTelemetry()
	setup, client := clientAs(t, c, tel, c.AdminToken())
	s := testSettings()
	s.Namespace = c.Namespace(t)
	s.LeaderElection.Namespace = "absent-" + s.Namespace[len(s.Namespace)-5:] // its random suffix
	var calls counter
	ctrl, err := NewController(setup, client, s, clusterCaches, readyReplicas(&calls))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	began := time.Now()
	err = ctrl.Serve(ctx)
	took := time.Since(began)
	want := fmt.Sprintf("kube: the Lease %s/memcached-controller: namespaces %q not found", s.LeaderElection.Namespace, s.LeaderElection.Namespace)
	if err == nil || err.Error() != want {
		t.Errorf("Serve = %v, want %q", err, want)
	}
	if took > 10*time.Second {
		t.Errorf("Serve returned %s after it began, want within 10s", took)
	}
	t.Logf("Serve returned %s after it began", took.Round(time.Millisecond))
	if err := ctrl.Synced().Healthy(t.Context()); err == nil {
		t.Error("Synced is healthy after Serve returned")
	}
}

func TestClusterOnlyTheLeaseHolderReconciles(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	gvr := clusterCaches.GVR()
	ns := c.Namespace(t)
	token := c.ServiceAccount(t, ns, "memcached-controller", controllerRBAC(gvr.Group, gvr.Resource, ns)...)

	type replica struct {
		ctrl  *Controller
		calls *counter
		stop  func() error
	}
	start := func(identity string) replica {
		setup, client := clientAs(t, c, humustest.NewTelemetry(), token)
		var calls counter
		s := testSettings()
		s.Namespace, s.LeaderElection.Namespace, s.LeaderElection.Identity = ns, ns, identity
		ctrl, err := NewController(setup, client, s, clusterCaches, readyReplicas(&calls))
		if err != nil {
			t.Fatal(err)
		}
		return replica{ctrl: ctrl, calls: &calls, stop: served(t, ctrl)}
	}
	first := start("replica-1")
	clustertest.Eventually(t, 30*time.Second, first.ctrl.Synced().Healthy)
	second := start("replica-2")
	clustertest.Eventually(t, 30*time.Second, second.ctrl.Synced().Healthy)

	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	createCache(t, admin, gvr, ns, "a", 1)
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error { return reconciled(first.calls, "a") })
	time.Sleep(time.Second)
	if got := second.calls.Get("a"); got != 0 {
		t.Errorf("the standby reconciled a %d times, want none", got)
	}

	if err := first.stop(); err != nil {
		t.Errorf("the holder's Serve = %v, want nil", err)
	}
	createCache(t, admin, gvr, ns, "b", 1)
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error { return reconciled(second.calls, "b") })
	if err := second.stop(); err != nil {
		t.Errorf("the new holder's Serve = %v, want nil", err)
	}
}

func TestClusterAnAPIServerGoneLongerThanRenewDeadlineLosesTheLease(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	ns := c.Namespace(t)
	setup, client := clientAs(t, c, humustest.NewTelemetry(), c.AdminToken())
	s := testSettings()
	s.Namespace, s.LeaderElection.Namespace = ns, ns
	s.LeaderElection.LeaseDuration, s.LeaderElection.RenewDeadline, s.LeaderElection.RetryPeriod = 4*time.Second, 3*time.Second, time.Second
	ctrl, err := NewController(setup, client, s, clusterCaches, readyReplicas(&counter{}))
	if err != nil {
		t.Fatal(err)
	}
	stop := served(t, ctrl)
	adminKube := kubernetes.NewForConfigOrDie(c.AdminConfig())
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		l, err := adminKube.CoordinationV1().Leases(ns).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := holder(l); h != "replica-1" {
			return fmt.Errorf("the Lease's holder = %q, want replica-1", h)
		}
		return nil
	})

	c.StopAPIServer(t)
	defer c.StartAPIServer(t)
	returned, err := awaitServe(ctrl, stop, 30*time.Second)
	if !returned {
		t.Fatal("Serve didn't return within 30s of the API server going away")
	}
	if !errors.Is(err, ErrLostLeadership) {
		t.Errorf("Serve = %v, want ErrLostLeadership", err)
	}
}

func TestClusterAControllerPassesTestService(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	ns := c.Namespace(t)
	setup, client := clientAs(t, c, humustest.NewTelemetry(), c.AdminToken())
	s := testSettings()
	s.Namespace, s.LeaderElection.Namespace = ns, ns
	ctrl, err := NewController(setup, client, s, clusterCaches, readyReplicas(&counter{}))
	if err != nil {
		t.Fatal(err)
	}
	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	humustest.TestService(t, ctrl, humustest.During(func(ctx context.Context) {
		createCache(t, admin, clusterCaches.GVR(), ns, "m", 1)
		clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
			return readyReplicasAre(ctx, admin, ns, "m", 1)
		})
	}))
}
