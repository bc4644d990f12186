package app_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/internal/apptest"
	"github.com/z5labs/humus/kube/example/memcached/app"
)

// The whole App, on humustest's Host and a real control plane, runs as its
// pod would: the Host's environment and files are what the kubelet gives
// a pod, and its service account has exactly the RBAC of
// deploy/rbac.yaml.

type memcachedObject = kube.Object[app.MemcachedSpec, app.MemcachedStatus]

func TestClusterMemcached(t *testing.T) {
	r := startMemcached(t)
	for _, phase := range []struct {
		name  string
		check func(*testing.T)
	}{
		{"reconciles into a Deployment it controls, and applies its status", r.reconcilesIntoADeployment},
		{"serves the controller's metrics at /metrics, under the docs' names", r.servesMetrics},
		{"undoes a hand-made scale of the Deployment, each time, and says so in an Event's series", r.undoesAHandMadeScale},
		{"restarted, it reads the Deployment that is up to date from its cache, and writes nothing to it", r.restartsWithoutWriting},
		{"deleting the Memcached finalizes it once, and garbage-collects its Deployment", r.finalizesOnce},
		{"exits 0 on its signal, and releases the Lease", r.exitsAndReleasesTheLease},
	} {
		if !t.Run(phase.name, phase.check) {
			return
		}
	}
}

// A memcachedRun is TestClusterMemcached's App and its Memcached, which
// each phase finds as the phases before it left them.
type memcachedRun struct {
	admin  kubernetes.Interface
	ns     string
	host   *humustest.Host
	probes string // the probes' address, where /metrics is served too
	p      *humustest.Process
	// start starts the App as main.go runs it, with BuildTelemetry: its
	// records are lines on stderr, and its metrics are served at /metrics
	// beside the probes. It is TestClusterMemcached's, not a phase's, so
	// the App it starts outlives the phase that restarts it.
	start      func() *humustest.Process
	memcacheds dynamic.ResourceInterface
	uid        types.UID // the Memcached's
}

// memcachedPod is the name of TestClusterMemcached's pod.
const memcachedPod = "memcached-controller-7d9f-x2k4q"

// startMemcached starts the App as its pod would run, waits until it is
// ready, and creates the Memcached sessions, of size 1.
func startMemcached(t *testing.T) *memcachedRun {
	c := clustertest.Get(t)
	admin, dyn := adminClients(t, c)
	installCRD(t, c)
	ns := c.Namespace(t)
	grants := clustertest.RBACGrants(t, "../deploy/rbac.yaml", ns)
	host := c.PodHost(t, ns, memcachedPod, app.Name, grants...)
	// Over the whole run, no request refused, and no right unused.
	c.CheckRights(t, ns, app.Name, grants, clustertest.FailUnusedRights())
	r := &memcachedRun{admin: admin, ns: ns, host: host, probes: host.Env["PROBES_ADDR"]}
	r.start = func() *humustest.Process {
		return humustest.Start(t, host.Host(), app.Init, humus.WithTelemetry(app.BuildTelemetry))
	}
	r.p = r.start()

	t.Log("the probes' /readyz answers ok once the caches have synced")
	clustertest.Eventually(t, time.Minute, func(ctx context.Context) error { return clustertest.Ready(ctx, r.probes) })

	r.memcacheds = dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	created, err := r.memcacheds.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": "sessions"},
		"spec":       map[string]any{"size": int64(1)},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the Memcached: %v", err)
	}
	r.uid = created.GetUID()
	return r
}

func (r *memcachedRun) reconcilesIntoADeployment(t *testing.T) {
	m := r.awaitAvailable(t)
	r.checkMemcachedApplied(t, m)
	d := r.checkDeploymentControlled(t, m)
	r.checkDeploymentCreatedEvent(t, d)
}

// awaitAvailable waits for the Memcached's status to say Available, and
// returns the Memcached.
func (r *memcachedRun) awaitAvailable(t *testing.T) memcachedObject {
	var m memcachedObject
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		var err error
		m, err = getMemcached(t, r.memcacheds, "sessions")
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, "Available"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions = %+v, want Available True", m.Status.Conditions)
		}
		return nil
	})
	return m
}

// checkMemcachedApplied checks what the App applied to the Memcached: its
// status, for its generation, and its finalizer; and what the CRD's
// default filled in.
func (r *memcachedRun) checkMemcachedApplied(t *testing.T, m memcachedObject) {
	if c := meta.FindStatusCondition(m.Status.Conditions, "Available"); c.Reason != "DeploymentApplied" || c.ObservedGeneration != m.Generation {
		t.Errorf("Available = %+v, want DeploymentApplied for generation %d", c, m.Generation)
	}
	if m.Spec.Image != "memcached:1.6.26-alpine3.19" {
		t.Errorf("image = %q, want the CRD's default", m.Spec.Image)
	}
	if got := m.Finalizers; len(got) != 1 || got[0] != app.Finalizer {
		t.Errorf("finalizers = %v, want [%s]", got, app.Finalizer)
	}
	if !clustertest.ManagedBy(m.ManagedFields, app.Name, metav1.ManagedFieldsOperationApply, "") {
		t.Errorf("managed fields = %s, want %s's Apply, of the finalizer", managers(m.ManagedFields), app.Name)
	}
	if !clustertest.ManagedBy(m.ManagedFields, app.Name, metav1.ManagedFieldsOperationApply, "status") {
		t.Errorf("managed fields = %s, want %s's Apply on status", managers(m.ManagedFields), app.Name)
	}
}

// checkDeploymentControlled checks the Deployment the App applied for m,
// which controls it, and returns it.
func (r *memcachedRun) checkDeploymentControlled(t *testing.T, m memcachedObject) *appsv1.Deployment {
	d, err := r.admin.AppsV1().Deployments(r.ns).Get(t.Context(), "sessions", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Deployment: %v", err)
	}
	owner := metav1.GetControllerOf(d)
	if owner == nil || owner.UID != r.uid || owner.Kind != "Memcached" || owner.APIVersion != "cache.example.com/v1alpha1" {
		t.Errorf("controller owner reference = %+v, want the Memcached %s", owner, r.uid)
	}
	if !clustertest.ManagedBy(d.ManagedFields, app.Name, metav1.ManagedFieldsOperationApply, "") {
		t.Errorf("the Deployment's managed fields = %s, want %s's Apply", managers(d.ManagedFields), app.Name)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Template.Spec.Containers[0].Image != m.Spec.Image {
		t.Errorf("the Deployment runs %v of %q, want 1 of %q", d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image, m.Spec.Image)
	}
	return d
}

// checkDeploymentCreatedEvent checks the one Event of the Deployment's
// creation, reported by this replica, about the Deployment d too.
func (r *memcachedRun) checkDeploymentCreatedEvent(t *testing.T, d *appsv1.Deployment) {
	// client-go's recorder writes its Events in the background.
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		created, err := eventsOf(t, r.admin, r.ns, r.uid, "DeploymentCreated")
		if err != nil {
			return err
		}
		if len(created) != 1 {
			return fmt.Errorf("%d DeploymentCreated events, want 1", len(created))
		}
		e := created[0]
		if e.ReportingController != app.Name || e.ReportingInstance != memcachedPod ||
			e.Related == nil || e.Related.Kind != "Deployment" || e.Related.UID != d.UID {
			t.Errorf("the event = %+v, want it reported by %s %s, about the Deployment too", e, app.Name, memcachedPod)
		}
		return nil
	})
}

func (r *memcachedRun) servesMetrics(t *testing.T) {
	// The names of docs/kubernetes-controllers.md's table, in its
	// column "in Prometheus".
	names := []string{
		"humus_kube_controller_queue_depth",
		"humus_kube_controller_queue_adds_total",
		"humus_kube_controller_queue_duration_seconds",
		"humus_kube_controller_reconcile_duration_seconds",
		"humus_kube_controller_reconcile_unfinished_duration_seconds",
		"humus_kube_controller_reconcile_longest_unfinished_duration_seconds",
		"humus_kube_controller_queue_oldest_wait_seconds",
		"humus_kube_controller_reconcile_change_latency_seconds",
	}
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		text, err := clustertest.Metrics(ctx, r.probes)
		if err != nil {
			return err
		}
		for _, name := range names {
			if !regexp.MustCompile(`(?m)^` + name + `(_bucket|_count|_sum)?\{[^}]*controller_name="` + app.Name + `"`).MatchString(text) {
				return fmt.Errorf("/metrics has no %s of %s:\n%s", name, app.Name, text)
			}
		}
		return nil
	})
}

func (r *memcachedRun) undoesAHandMadeScale(t *testing.T) {
	// Twice: each time it is put back, the App records an Event, the
	// second counted into the first's series, with a patch of it.
	for range 2 {
		r.scaleByHand(t)
	}
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		reapplied, err := eventsOf(t, r.admin, r.ns, r.uid, "DeploymentReapplied")
		if err != nil {
			return err
		}
		if len(reapplied) != 1 || reapplied[0].Series == nil || reapplied[0].Series.Count != 2 {
			return fmt.Errorf("DeploymentReapplied events = %+v, want one, of a series of 2", reapplied)
		}
		return nil
	})
}

// scaleByHand scales the Deployment to 3, as kubectl scale does, and
// waits for the App to put it back to the Memcached's 1.
func (r *memcachedRun) scaleByHand(t *testing.T) {
	// Through the scale subresource, as kubectl scale does.
	deployments := r.admin.AppsV1().Deployments(r.ns)
	scale, err := deployments.GetScale(t.Context(), "sessions", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 3
	if _, err := deployments.UpdateScale(t.Context(), "sessions", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scaling the Deployment to 3: %v", err)
	}
	scaled := time.Now()
	clustertest.Eventually(t, 5*time.Second, func(context.Context) error {
		d, err := deployments.Get(t.Context(), "sessions", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 1 {
			return fmt.Errorf("replicas = %d, want the Memcached's 1", *d.Spec.Replicas)
		}
		return nil
	})
	t.Logf("undone in %v", time.Since(scaled).Round(time.Millisecond))
}

func (r *memcachedRun) restartsWithoutWriting(t *testing.T) {
	deployments := r.admin.AppsV1().Deployments(r.ns)
	before, err := deployments.Get(t.Context(), "sessions", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An apply that changes nothing changes no resourceVersion either,
	// so what tells is the API server's count of the requests.
	applies, gets := deploymentRequests(t, r.admin, "APPLY"), deploymentRequests(t, r.admin, "GET")
	if applies == 0 {
		t.Fatal("the API server counts no applies of Deployments, though the App made two: the count is wrong")
	}
	apptest.Stop(t, r.p, r.host)
	r.p = r.start()
	r.awaitAReconcile(t)
	after, err := deployments.Get(t.Context(), "sessions", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := deploymentRequests(t, r.admin, "APPLY") - applies; n != 0 {
		t.Errorf("%d applies of Deployments since the restart, want 0: the Deployment is up to date", n)
	}
	// The test's own Get of the Deployment counts too: the Reconciler
	// reads it from the cache, and sends none.
	if n := deploymentRequests(t, r.admin, "GET") - gets; n != 1 {
		t.Errorf("%d gets of Deployments since the restart, want the test's own only: the Reconciler reads the Deployment from the cache", n)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the Deployment's resourceVersion went from %s to %s: the restart wrote it; managed fields: %s",
			before.ResourceVersion, after.ResourceVersion, managers(after.ManagedFields))
	}
}

// awaitAReconcile waits for the App's first reconcile of the Memcached,
// counted in its metrics.
func (r *memcachedRun) awaitAReconcile(t *testing.T) {
	clustertest.Eventually(t, time.Minute, func(ctx context.Context) error {
		text, err := clustertest.Metrics(ctx, r.probes)
		if err != nil {
			return err
		}
		if !regexp.MustCompile(`(?m)^humus_kube_controller_reconcile_duration_seconds_count\{[^}]*outcome="success"[^}]*\} [1-9]`).MatchString(text) {
			return errors.New("no reconcile yet")
		}
		return nil
	})
}

func (r *memcachedRun) finalizesOnce(t *testing.T) {
	if err := r.memcacheds.Delete(t.Context(), "sessions", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the Memcached: %v", err)
	}
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		_, err := r.memcacheds.Get(t.Context(), "sessions", metav1.GetOptions{})
		return clustertest.Gone("the Memcached", err)
	})
	r.checkFinalizedEvent(t)
	// The garbage collector finds a new CRD's resources at its next
	// discovery, every 30s.
	clustertest.Eventually(t, 2*time.Minute, func(context.Context) error {
		_, err := r.admin.AppsV1().Deployments(r.ns).Get(t.Context(), "sessions", metav1.GetOptions{})
		return clustertest.Gone("the Deployment", err)
	})
}

// checkFinalizedEvent checks the one Event of the Memcached's Finalize,
// reported by this replica, once.
func (r *memcachedRun) checkFinalizedEvent(t *testing.T) {
	// client-go's recorder writes its Events in the background.
	var finalized []eventsv1.Event
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		var err error
		finalized, err = eventsOf(t, r.admin, r.ns, r.uid, "Finalized")
		if err != nil {
			return err
		}
		if len(finalized) == 0 {
			return errors.New("no Finalized event yet")
		}
		return nil
	})
	for _, e := range finalized {
		if e.ReportingController != app.Name || e.ReportingInstance != memcachedPod || e.Action != "Finalize" {
			t.Errorf("the event was reported by %s %s, with action %s, want %s %s, Finalize", e.ReportingController, e.ReportingInstance, e.Action, app.Name, memcachedPod)
		}
		// The recorder counts an Event that recurs in its series.
		if e.Series != nil {
			t.Errorf("the event recurred %d times, want once: the finalizer runs once", e.Series.Count)
		}
	}
	if len(finalized) != 1 {
		t.Errorf("%d Finalized events for the Memcached, want 1: the finalizer runs once", len(finalized))
	}
}

func (r *memcachedRun) exitsAndReleasesTheLease(t *testing.T) {
	l, err := r.admin.CoordinationV1().Leases(r.ns).Get(t.Context(), app.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease: %v", err)
	}
	if h := l.Spec.HolderIdentity; h == nil || *h != memcachedPod {
		t.Errorf("the Lease's holder = %v, want %s", stringOf(h), memcachedPod)
	}
	apptest.Stop(t, r.p, r.host)
	// What is on stderr is BuildTelemetry's: one line a log record,
	// none an error, and no error of humus's own, which would be a
	// line of its own.
	record := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARN) `)
	for line := range strings.Lines(r.host.Stderr()) {
		if !record.MatchString(line) {
			t.Errorf("stderr has %q, want only log records of no more than WARN; stderr:\n%s", line, r.host.Stderr())
			break
		}
	}
	apptest.LeaseReleased(t, r.admin, r.ns, app.Name)
}

// Limited to one namespace, the controller lists and watches only there,
// so deploy/rbac.yaml's ClusterRole can be a Role in that namespace.
func TestClusterMemcachedInOneNamespace(t *testing.T) {
	c := clustertest.Get(t)
	_, dyn := adminClients(t, c)
	installCRD(t, c)
	ns := c.Namespace(t)
	var grants []clustertest.Grant
	for _, g := range clustertest.RBACGrants(t, "../deploy/rbac.yaml", ns) {
		g.Namespace = ns
		grants = append(grants, g)
	}
	host := c.PodHost(t, ns, "memcached-controller-0", app.Name, grants...)
	host.Env["WATCH_NAMESPACE"] = ns
	// No request outside the namespace, which its grants would refuse.
	c.CheckRights(t, ns, app.Name, grants)

	p := humustest.Start(t, host.Host(), app.Init)

	memcacheds := dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	if _, err := memcacheds.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": "sessions"},
		"spec":       map[string]any{"size": int64(2)},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Memcached: %v", err)
	}
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		m, err := getMemcached(t, memcacheds, "sessions")
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, "Available"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions = %+v, want Available True", m.Status.Conditions)
		}
		return nil
	})
	// Finalized while the App runs, so the namespace's deletion isn't held
	// up by a finalizer no one removes.
	if err := memcacheds.Delete(t.Context(), "sessions", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		_, err := memcacheds.Get(t.Context(), "sessions", metav1.GetOptions{})
		return clustertest.Gone("the Memcached", err)
	})

	apptest.Stop(t, p, host)
}

func TestClusterMissingCRDExits1(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)

	// A Resource of the same types whose CRD no one installed, as when the
	// controller is deployed before its CRD.
	absent := app.Memcached
	absent.Kind, absent.Plural = "Absent", "absents"
	token := c.ServiceAccount(t, ns, "absent-controller",
		clustertest.Grant{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{absent.Group}, Resources: []string{absent.Plural}, Verbs: []string{"get", "list", "watch", "patch"}},
		}},
		clustertest.Grant{Namespace: ns, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		}},
	)
	init := func(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
		// A test fills the Connection with what its cluster needs.
		client, err := kube.NewClient(s, kube.Connection{
			Server: c.Server(),
			TLS:    &tls.Config{RootCAs: c.CA()},
			Token:  func(context.Context) (string, error) { return token, nil },
		})
		if err != nil {
			return nil, err
		}
		settings := kube.DefaultSettings()
		settings.Name = "absent-controller"
		settings.LeaderElection.Namespace, settings.LeaderElection.Identity = ns, "absent-controller-0"
		ctrl, err := kube.NewController(s, client, settings, absent, kube.ReconcilerFunc[app.MemcachedSpec, app.MemcachedStatus](
			func(context.Context, memcachedObject) (kube.Result[app.MemcachedStatus], error) {
				t.Error("an object of a resource that isn't served was reconciled")
				return kube.Result[app.MemcachedStatus]{}, nil
			}))
		if err != nil {
			return nil, err
		}
		return []humus.Service{ctrl}, nil
	}
	host := humustest.NewHost()

	p := humustest.Start(t, host.Host(), init)

	if code := clustertest.AwaitExit(t, p); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want := "kube: listing cache.example.com/v1alpha1, Resource=absents: the server could not find the requested resource\n"
	if got := host.Stderr(); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

// installCRD installs the CRD that Memcached.CRD returns, as whatever
// deploys the controller would, and waits until it is served. It is left
// in place for the test binary's other tests.
func installCRD(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	crd, err := app.Memcached.CRD()
	if err != nil {
		t.Fatal(err)
	}
	c.InstallCRD(t, crd)
}

func adminClients(t *testing.T, c *clustertest.Cluster) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	kc, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return kc, dyn
}

func getMemcached(t *testing.T, memcacheds dynamic.ResourceInterface, name string) (memcachedObject, error) {
	var m memcachedObject
	u, err := memcacheds.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return m, err
	}
	return m, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m)
}

// deploymentRequests is how many requests of verb, such as "APPLY", on
// Deployments the API server has served, from its own metrics: the
// control plane runs no deployment controller, so in a test the requests
// are the test's and the App's.
func deploymentRequests(t *testing.T, kc kubernetes.Interface, verb string) int {
	t.Helper()
	text, err := kc.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("the API server's metrics: %v", err)
	}
	re := regexp.MustCompile(`(?m)^apiserver_request_total\{[^}]*resource="deployments"[^}]*verb="` + verb + `"[^}]*\} (\d+)$`)
	n := 0
	for _, m := range re.FindAllStringSubmatch(string(text), -1) {
		v, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n
}

// eventsOf are the Events in ns about the object uid, of reason.
func eventsOf(t *testing.T, kc kubernetes.Interface, ns string, uid types.UID, reason string) ([]eventsv1.Event, error) {
	list, err := kc.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var got []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason && e.Regarding.UID == uid {
			got = append(got, e)
		}
	}
	return got, nil
}

func managers(fields []metav1.ManagedFieldsEntry) string {
	var s []string
	for _, f := range fields {
		s = append(s, fmt.Sprintf("%s %s %q", f.Manager, f.Operation, f.Subresource))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func stringOf(p *string) string {
	if p == nil {
		return "nil"
	}
	return *p
}
