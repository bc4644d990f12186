package kube

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"go.opentelemetry.io/otel/attribute"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/cluster"
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
func controllerRBAC(group, plural, ns string) []cluster.Grant {
	return []cluster.Grant{{Namespace: ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: []string{plural}, Verbs: []string{"list", "watch", "patch"}},
		{APIGroups: []string{group}, Resources: []string{plural + "/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		// list and watch for Owns; create and patch for the Reconciler's
		// apply, which creates the Deployment the first time.
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch", "create", "patch"}},
	}}}
}

// installCRD creates r's CRD, as whatever deploys the controller would,
// and waits for it to be established.
func installCRD[Spec, Status any](t *testing.T, c *cluster.Cluster, r Resource[Spec, Status]) {
	t.Helper()
	crd, err := r.CRD()
	if err != nil {
		t.Fatal(err)
	}
	ext := apiextensions.NewForConfigOrDie(c.AdminConfig())
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitEstablished(t, ext, crd.Name)
}

// waitEstablished waits for the CRD named name to be established.
func waitEstablished(t *testing.T, ext apiextensions.Interface, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the CRD %s wasn't established: %v", name, err)
	}
}

// clientAs returns a Client that authenticates with token, recording into
// tel.
func clientAs(t *testing.T, c *cluster.Cluster, tel *humustest.Telemetry, token string) (*humus.Setup, *Client) {
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
				var attrs []string
				r.WalkAttributes(func(kv attribute.KeyValue) bool {
					attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
					return true
				})
				t.Logf("record: %s %s %v", r.Severity(), r.Body().AsString(), attrs)
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
	d.calls.inc(m.Name)
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

// serveInBackground runs ctrl until the test ends, or until the returned
// stop is called, which returns what Serve did.
func serveInBackground(t *testing.T, ctrl *Controller) (stop func() error, errc <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	done := make(chan struct{})
	var served error
	go func() {
		served = ctrl.Serve(ctx)
		ch <- served
		close(done)
	}()
	// stop returns what Serve did, whether or not the test read errc.
	stop = func() error {
		cancel()
		select {
		case <-done:
			return served
		case <-time.After(30 * time.Second):
			return errors.New("Serve didn't return within 30s of its context being cancelled")
		}
	}
	t.Cleanup(func() { _ = stop() })
	return stop, ch
}

func eventually(t *testing.T, within time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, within, true, cond); err != nil {
		t.Fatalf("%s: not within %s: %v", what, within, err)
	}
}

func createCache(t *testing.T, d dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, size int64) {
	t.Helper()
	u := object(gvr.GroupVersion().String(), "Memcached", ns, name, map[string]any{"size": size})
	unstructured.RemoveNestedField(u.Object, "metadata", "uid")
	if _, err := d.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// statusApplies counts the controller's status applies: its client spans
// of a PATCH to a status subresource.
func statusApplies(tel *humustest.Telemetry) int {
	n := 0
	for _, s := range tel.Spans() {
		var method, url string
		for _, a := range s.Attributes() {
			switch a.Key {
			case "http.request.method":
				method = a.Value.AsString()
			case "url.full":
				url = a.Value.AsString()
			}
		}
		if method == "PATCH" && strings.Contains(url, "/status") {
			n++
		}
	}
	return n
}

func TestClusterMemcachedReconcilesIntoADeploymentItControls(t *testing.T) {
	c := cluster.Get(t)
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
			finalized.inc(m.Name)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := serveInBackground(t, ctrl)

	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	adminKube := kubernetes.NewForConfigOrDie(c.AdminConfig())
	createCache(t, admin, gvr, ns, "m", 2)

	eventually(t, 30*time.Second, "the status applied", func(ctx context.Context) (bool, error) {
		u, err := admin.Resource(gvr).Namespace(ns).Get(ctx, "m", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		return n == 2, nil
	})
	time.Sleep(3 * time.Second) // time for a third reconcile, or a second apply, to show
	if got := rec.calls.get("m"); got != 2 {
		t.Errorf("reconciles = %d, want 2: one for the object, one for its own status", got)
	}
	if got := statusApplies(tel); got != 1 {
		t.Errorf("status applies = %d, want 1", got)
	}

	m, err := admin.Resource(gvr).Namespace(ns).Get(t.Context(), "m", metav1.GetOptions{})
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

	// A hand-made scale is undone within a second.
	scale := []byte(`{"spec":{"replicas":5}}`)
	if _, err := adminKube.AppsV1().Deployments(ns).Patch(t.Context(), "m", types.MergePatchType, scale, metav1.PatchOptions{FieldManager: "kubectl-scale"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "the scale undone", func(ctx context.Context) (bool, error) {
		d, err := adminKube.AppsV1().Deployments(ns).Get(ctx, "m", metav1.GetOptions{})
		return err == nil && *d.Spec.Replicas == 2, err
	})

	// Deleting it runs f once, removes the finalizer, and the Deployment
	// is garbage-collected.
	if err := admin.Resource(gvr).Namespace(ns).Delete(t.Context(), "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Memcached gone", func(ctx context.Context) (bool, error) {
		_, err := admin.Resource(gvr).Namespace(ns).Get(ctx, "m", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if got := finalized.get("m"); got != 1 {
		t.Errorf("f ran %d times, want 1", got)
	}
	eventually(t, 60*time.Second, "the Deployment garbage-collected", func(ctx context.Context) (bool, error) {
		_, err := adminKube.AppsV1().Deployments(ns).Get(ctx, "m", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

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

func TestClusterServeFailsOnAResourceThatIsNotServed(t *testing.T) {
	c := cluster.Get(t)
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

func TestClusterOnlyTheLeaseHolderReconciles(t *testing.T) {
	c := cluster.Get(t)
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
		stop, _ := serveInBackground(t, ctrl)
		return replica{ctrl: ctrl, calls: &calls, stop: stop}
	}
	first := start("replica-1")
	eventually(t, 30*time.Second, "the first replica synced", func(ctx context.Context) (bool, error) {
		return first.ctrl.Synced().Healthy(ctx) == nil, nil
	})
	second := start("replica-2")
	eventually(t, 30*time.Second, "the second replica synced", func(ctx context.Context) (bool, error) {
		return second.ctrl.Synced().Healthy(ctx) == nil, nil
	})

	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	createCache(t, admin, gvr, ns, "a", 1)
	eventually(t, 30*time.Second, "the holder reconciled a", func(ctx context.Context) (bool, error) {
		return first.calls.get("a") > 0, nil
	})
	time.Sleep(time.Second)
	if got := second.calls.get("a"); got != 0 {
		t.Errorf("the standby reconciled a %d times, want none", got)
	}

	if err := first.stop(); err != nil {
		t.Errorf("the holder's Serve = %v, want nil", err)
	}
	createCache(t, admin, gvr, ns, "b", 1)
	eventually(t, 30*time.Second, "the other replica took over and reconciled b", func(ctx context.Context) (bool, error) {
		return second.calls.get("b") > 0, nil
	})
	if err := second.stop(); err != nil {
		t.Errorf("the new holder's Serve = %v, want nil", err)
	}
}

func TestClusterAnAPIServerGoneLongerThanRenewDeadlineLosesTheLease(t *testing.T) {
	c := cluster.Get(t)
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
	_, errc := serveInBackground(t, ctrl)
	adminKube := kubernetes.NewForConfigOrDie(c.AdminConfig())
	eventually(t, 30*time.Second, "the Lease taken", func(ctx context.Context) (bool, error) {
		l, err := adminKube.CoordinationV1().Leases(ns).Get(ctx, s.Name, metav1.GetOptions{})
		return err == nil && holder(l) == "replica-1", nil
	})

	c.StopAPIServer(t)
	defer c.StartAPIServer(t)
	select {
	case err := <-errc:
		if !errors.Is(err, ErrLostLeadership) {
			t.Errorf("Serve = %v, want ErrLostLeadership", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve didn't return within 30s of the API server going away")
	}
}

func TestClusterAControllerPassesTestService(t *testing.T) {
	c := cluster.Get(t)
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
		eventually(t, 30*time.Second, "the status applied", func(ctx context.Context) (bool, error) {
			u, err := admin.Resource(clusterCaches.GVR()).Namespace(ns).Get(ctx, "m", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			return n == 1, nil
		})
	}))
}
