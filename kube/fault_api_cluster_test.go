package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/control"
)

// The fault suite's scenarios about what the API server serves and lets the
// controller do: an object deleted while no replica runs, the CRD deleted
// under a running controller, an object stored through a looser CRD than
// the Go types, and each rule of the documented RBAC taken away. Each is
// checked against what the API server holds and its audit log; a log
// record is read only where nothing else can show what the controller saw.

// apiCRDName is the name of clusterCaches' CRD, shared by the package's
// tests.
const apiCRDName = "memcacheds.controller.test.example.com"

// TestClusterFaultAnObjectDeletedWhileNoReplicaRunsIsFinalizedOnceOneStarts: a
// Memcached deleted while no replica runs stays, held by the finalizer;
// the next replica to start finalizes it from its first list, and the
// garbage collector then deletes its Deployment.
func TestClusterFaultAnObjectDeletedWhileNoReplicaRunsIsFinalizedOnceOneStarts(t *testing.T) {
	w := newWorkload(t)
	gvr := clusterCaches.GVR()
	apiReleaseAtCleanup(t, w.admin, gvr, w.ns)
	const n = 5
	w.create(n)
	s := testSettings()
	a := w.replica("replica-a", s)
	w.converged(time.Minute)
	for i := range n {
		m := apiGet(t, w.admin, gvr, w.ns, fmt.Sprintf("m-%d", i))
		if !slices.Contains(m.GetFinalizers(), testFinalizer) {
			t.Fatalf("%s's finalizers = %v, want %s", m.GetName(), m.GetFinalizers(), testFinalizer)
		}
	}
	if err := a.stop(); err != nil {
		t.Fatalf("replica-a's Serve = %v, want nil", err)
	}
	stopped := time.Now()

	if err := w.admin.Resource(gvr).Namespace(w.ns).Delete(t.Context(), "m-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // no replica runs: nothing may remove the finalizer
	m0 := apiGet(t, w.admin, gvr, w.ns, "m-0")
	if m0.GetDeletionTimestamp() == nil || !slices.Contains(m0.GetFinalizers(), testFinalizer) {
		t.Fatalf("m-0 after its deletion, with no replica running: deletionTimestamp %v, finalizers %v; want it deleting, held by %s",
			m0.GetDeletionTimestamp(), m0.GetFinalizers(), testFinalizer)
	}

	started := time.Now()
	b := w.replica("replica-b", s)
	const bound = time.Minute
	clustertest.Eventually(t, bound, func(ctx context.Context) error {
		_, err := w.admin.Resource(gvr).Namespace(w.ns).Get(ctx, "m-0", metav1.GetOptions{})
		return clustertest.Gone("m-0, to be finalized,", err)
	})
	finalized := time.Since(started)
	// kube-controller-manager's garbage collector watches a new CRD's
	// resource only from its next discovery (every 30s): the first test
	// to install the CRD waits for that too.
	clustertest.Eventually(t, bound, func(ctx context.Context) error {
		_, err := w.kube.AppsV1().Deployments(w.ns).Get(ctx, "m-0", metav1.GetOptions{})
		return clustertest.Gone("m-0's Deployment, to be garbage-collected,", err)
	})
	collected := time.Since(started)
	w.converged(30 * time.Second) // the others are untouched

	// The audit log: replica-b removed the finalizer; replica-a wrote
	// nothing once its Serve had returned.
	time.Sleep(time.Second) // for the last writes to reach the log
	events := w.c.Audit(t)
	removed := slices.ContainsFunc(w.writes(events, b.user), func(e clustertest.AuditEvent) bool {
		return e.Verb == "patch" && e.Resource == "memcacheds" && e.Subresource == "" && e.Name == "m-0" && e.RequestReceived.After(started)
	})
	if !removed {
		t.Errorf("no patch of m-0 by %s after it started: the finalizer wasn't removed by the new replica", b.user)
	}
	for _, e := range w.writes(events, a.user) {
		if e.StageTime.After(stopped) {
			t.Errorf("%s wrote %s %s/%s at %s, after its Serve returned", a.user, e.Verb, e.Resource, e.Name, e.StageTime.Format(time.StampMicro))
		}
	}
	t.Logf("m-0 finalized %s after replica-b started, its Deployment collected after %s", finalized.Round(time.Millisecond), collected.Round(time.Millisecond))
	if err := b.stop(); err != nil {
		t.Errorf("replica-b's Serve = %v, want nil", err)
	}
}

// TestClusterFaultACRDDeletedWhileTheControllerRunsEndsServe: the CRD deleted
// under a running replica: its objects, deleted with it, are finalized by
// the replica, the CRD goes, and Serve ends within unservedGrace (plus a
// margin) with an error naming the resource; Synced is unhealthy. The CRD
// installed again, a new replica converges new objects.
func TestClusterFaultACRDDeletedWhileTheControllerRunsEndsServe(t *testing.T) {
	w := newWorkload(t)
	gvr := clusterCaches.GVR()
	// The CRD is the package's tests': it must be there, established,
	// whatever this test did. Registered after the namespace's cleanup, so
	// it runs before it.
	t.Cleanup(func() { apiRestoreSharedCRD(t, w.c) })
	apiReleaseAtCleanup(t, w.admin, gvr, w.ns)

	const n = 3
	w.create(n)
	a := startAPIReplica(t, w.c, w.ns, "replica-a", clusterCaches, controllerRBAC(gvr.Group, gvr.Resource, w.ns))
	w.converged(time.Minute)
	if !a.running() {
		t.Fatalf("replica-a's Serve = %v before the CRD's deletion, want it running", a.stop())
	}
	if err := a.ctrl.Synced().Healthy(t.Context()); err != nil {
		t.Fatalf("replica-a's Synced before the CRD's deletion = %v, want healthy", err)
	}

	deleted, gone := deleteTheSharedCRD(t, w)
	checkServeEndedNamingTheResource(t, a, deleted, gone)
	// The audit log: replica-a finalized its objects, once they were being
	// deleted with the CRD, before the CRD could go.
	events := w.writes(w.c.Audit(t), a.user)
	for i := range n {
		name := fmt.Sprintf("m-%d", i)
		if !slices.ContainsFunc(events, func(e clustertest.AuditEvent) bool {
			return e.Verb == "patch" && e.Resource == "memcacheds" && e.Subresource == "" && e.Name == name &&
				e.RequestReceived.After(deleted) && !e.StageTime.After(gone)
		}) {
			t.Errorf("no patch of %s by %s between the CRD's deletion and its end: its finalizer wasn't removed by the running replica", name, a.user)
		}
	}

	// Installed again, a new replica serves it.
	installCRD(t, w.c, clusterCaches)
	for i := range n {
		createCache(t, w.admin, gvr, w.ns, fmt.Sprintf("after-%d", i), 2)
	}
	reinstalled := time.Now()
	b := w.replica("replica-b", testSettings())
	w.converged(time.Minute)
	t.Logf("a new replica converged the new objects %s after the CRD was installed again", time.Since(reinstalled).Round(time.Millisecond))
	if err := b.stop(); err != nil {
		t.Errorf("replica-b's Serve = %v, want nil", err)
	}
}

// deleteTheSharedCRD deletes clusterCaches' CRD and waits until it is
// gone; it returns when its deletion was asked for, and when it was gone.
// The CRD's deletion deletes every Memcached in the cluster and waits for
// them to be gone: those that other tests left in their namespaces, with
// a finalizer no running controller will remove, would hold it forever,
// so they are released first. No other test runs meanwhile.
func deleteTheSharedCRD(t *testing.T, w *workload) (deleted, gone time.Time) {
	t.Helper()
	crds := apiextensions.NewForConfigOrDie(w.c.AdminConfig()).ApiextensionsV1().CustomResourceDefinitions()
	apiReleaseOthers(t, w.admin, clusterCaches.GVR(), w.ns)
	deleted = time.Now()
	if err := crds.Delete(t.Context(), apiCRDName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, time.Minute, func(ctx context.Context) error {
		_, err := crds.Get(ctx, apiCRDName, metav1.GetOptions{})
		return clustertest.Gone("the CRD", err)
	})
	return deleted, time.Now()
}

// checkServeEndedNamingTheResource checks that a's Serve ended within
// unservedGrace (plus a margin) of its CRD being gone, with an error naming
// the resource, and that Synced is unhealthy.
func checkServeEndedNamingTheResource(t *testing.T, a *apiReplica, deleted, gone time.Time) {
	t.Helper()
	bound := control.UnservedGrace + 30*time.Second
	ok, err := a.served(bound - time.Since(gone))
	if !ok {
		t.Fatalf("replica-a's Serve still running %s after its CRD was gone; Synced = %v", bound, a.ctrl.Synced().Healthy(t.Context()))
	}
	t.Logf("the CRD gone %s after its deletion; Serve returned %s after that: %v",
		gone.Sub(deleted).Round(time.Millisecond), time.Since(gone).Round(time.Millisecond), err)
	const want = "kube: listing controller.test.example.com/v1alpha1, Resource=memcacheds"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("replica-a's Serve = %v, want an error starting %q", err, want)
	}
	if err := a.ctrl.Synced().Healthy(t.Context()); err == nil {
		t.Error("replica-a's Synced is healthy after Serve returned")
	}
}

// looserCaches is clusterCaches in a group of its own, whose CRD
// apiInstallLooserCRD installs with a looser schema than the Go types'.
var looserCaches = Resource[cacheSpec, cacheStatus]{
	Group:   "looser.test.example.com",
	Version: clusterCaches.Version,
	Kind:    clusterCaches.Kind,
	Plural:  clusterCaches.Plural,
	Scope:   clusterCaches.Scope,
}

// TestClusterFaultAnObjectStoredThroughALooserCRDIsAnErrorNamingTheField: a CRD
// whose spec.size is an integer or a string stores a Memcached of size
// "big", which the controller's Go types (Size int32) can't decode. That
// object gets no finalizer and no status (the controller's user never
// writes it), the error names it and the field, and every other object
// converges. The same CRD takes any string for a condition's
// lastTransitionTime: a status of the controller's own with "yesterday"
// there is reconciled from a zero status, and the status apply mends it
// (issue 35, point 3).
func TestClusterFaultAnObjectStoredThroughALooserCRDIsAnErrorNamingTheField(t *testing.T) {
	c := clustertest.Get(t)
	apiInstallLooserCRD(t, c)
	ns := c.Namespace(t)
	gvr := looserCaches.GVR()
	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	adminKube := kubernetes.NewForConfigOrDie(c.AdminConfig())
	apiReleaseAtCleanup(t, admin, gvr, ns)

	for i := range faultObjects {
		createCache(t, admin, gvr, ns, fmt.Sprintf("m-%d", i), 1)
	}
	bad := object(gvr.GroupVersion().String(), looserCaches.Kind, ns, "bad", map[string]any{"size": "big"})
	unstructured.RemoveNestedField(bad.Object, "metadata", "uid")
	if _, err := admin.Resource(gvr).Namespace(ns).Create(t.Context(), bad, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Memcached of size \"big\" through the looser CRD: %v", err)
	}

	apiStoreABadTime(t, admin, gvr, ns, "bad-time")

	r := startAPIReplica(t, c, ns, "replica-a", looserCaches, controllerRBAC(gvr.Group, gvr.Resource, ns))
	started := time.Now()
	clustertest.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		return unconvergedIn(ctx, admin, adminKube, gvr, ns, func(name string) bool { return name == "bad" })
	})
	apiCheckBadTimeMended(t, r, admin, gvr, ns, "bad-time")
	t.Logf("%d objects converged in %s", faultObjects, time.Since(started).Round(time.Millisecond))
	// The object that can't be decoded is retried with backoff meanwhile:
	// give its retries time to show, should one write.
	time.Sleep(3 * time.Second)

	got := apiGet(t, admin, gvr, ns, "bad")
	if f := got.GetFinalizers(); len(f) != 0 {
		t.Errorf("bad's finalizers = %v, want none: the finalizer comes after the decode", f)
	}
	if st, ok := got.Object["status"]; ok {
		t.Errorf("bad's status = %v, want none", st)
	}
	if _, err := adminKube.AppsV1().Deployments(ns).Get(t.Context(), "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("bad's Deployment: Get = %v, want NotFound: its Reconciler mustn't have run", err)
	}
	for _, e := range c.Audit(t) {
		if e.User == r.user && e.Namespace == ns && e.Resource == "memcacheds" && e.Name == "bad" {
			t.Errorf("%s wrote bad: %s %s (subresource %q), code %d", r.user, e.Verb, e.RequestURI, e.Subresource, e.Code)
		}
	}
	// What the controller saw is an error only its records can show: the
	// test's name promises it names the object and the field.
	const want = "kube: decoding Memcached " // ns/bad: field spec.size: ...
	var named bool
	for _, rec := range apiFailedReconciles(r.tel, "bad") {
		if strings.HasPrefix(rec, want+ns+"/bad") && strings.Contains(rec, "spec.size") {
			named = true
			break
		}
	}
	if !named {
		t.Errorf("no reconcile failed record for bad naming it and spec.size; bad's records: %q", apiFailedReconciles(r.tel, "bad"))
	}
	if !r.running() {
		t.Errorf("Serve = %v, want it still running: no error ends the Service", r.stop())
	}
	if err := r.ctrl.Synced().Healthy(t.Context()); err != nil {
		t.Errorf("Synced = %v, want healthy", err)
	}
	if err := r.stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

// TestClusterFaultEachRuleOfTheRBACRemovedSaysWhichRequestWasForbidden takes
// each verb of controllerRBAC's rules for the controller away in turn. The
// controller never sits Ready doing nothing: either Serve ends with an
// error naming the forbidden request, as the API server's 403 does
// (cannot <verb> resource "<resource>"), and Synced is unhealthy; or, for
// a write it makes per object, every reconcile fails with that 403, which
// the API server's audit log shows refused, and the controller's records
// show it saw.
func TestClusterFaultEachRuleOfTheRBACRemovedSaysWhichRequestWasForbidden(t *testing.T) {
	gvr := clusterCaches.GVR()
	for _, tc := range []forbiddenRule{
		{gvr.Resource, "list", true},
		{gvr.Resource, "watch", true},
		{gvr.Resource, "patch", false},
		{gvr.Resource + "/status", "patch", false},
		{"leases", "get", true},
		{"leases", "create", true},
		{"leases", "update", true},
		{"deployments", "list", true},
		{"deployments", "watch", true},
	} {
		t.Run(tc.verb+" "+strings.ReplaceAll(tc.resource, "/", " "), func(t *testing.T) {
			t.Parallel()
			w := newWorkload(t)
			apiReleaseAtCleanup(t, w.admin, gvr, w.ns)
			const n = 3
			w.create(n)
			grants := apiGrantsWithout(t, controllerRBAC(gvr.Group, gvr.Resource, w.ns), tc.resource, tc.verb)
			r := startAPIReplica(t, w.c, w.ns, "replica-a", clusterCaches, grants)
			if tc.serveEnds {
				tc.checkServeEnded(t, r, time.Now())
				return
			}
			tc.checkEachReconcileFailed(t, w, r, n, time.Now())
		})
	}
}

// forbiddenRule is a verb of controllerRBAC's rules taken away.
type forbiddenRule struct {
	resource, verb string
	// serveEnds: Serve returns an error naming the request. Otherwise
	// each reconcile fails with the 403, and Serve runs on.
	serveEnds bool
}

// forbiddenBound is how long the controller has to show that a request
// was forbidden.
const forbiddenBound = time.Minute

// refusal is how the API server's 403 names the request.
func (tc forbiddenRule) refusal() string {
	return fmt.Sprintf("cannot %s resource %q", tc.verb, tc.resource)
}

// checkServeEnded checks that r's Serve, started at started, ended with
// an error naming the forbidden request, and that Synced is unhealthy.
func (tc forbiddenRule) checkServeEnded(t *testing.T, r *apiReplica, started time.Time) {
	t.Helper()
	want := tc.refusal()
	ok, err := r.served(forbiddenBound)
	if !ok {
		t.Fatalf("Serve still running %s after it started, Synced = %v: want it ended, naming the forbidden request: %s",
			forbiddenBound, r.ctrl.Synced().Healthy(t.Context()), want)
	}
	t.Logf("Serve returned %s after it started: %v", time.Since(started).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("Serve = %v, want an error naming the forbidden request: %s", err, want)
	}
	if err := r.ctrl.Synced().Healthy(t.Context()); err == nil {
		t.Error("Synced is healthy after Serve returned")
	}
}

// checkEachReconcileFailed checks a write made per object: every
// reconcile of the n objects fails with the 403, retried with backoff;
// the controller serves on, and says so; the refused write left nothing,
// and the audit log has it refused, never allowed.
func (tc forbiddenRule) checkEachReconcileFailed(t *testing.T, w *workload, r *apiReplica, n int, started time.Time) {
	t.Helper()
	// Only its records show what it saw: the one case where a log record
	// is the observable.
	clustertest.Eventually(t, forbiddenBound, func(context.Context) error {
		for i := range n {
			name := fmt.Sprintf("m-%d", i)
			if !slices.ContainsFunc(apiFailedReconciles(r.tel, name), func(e string) bool {
				return strings.Contains(e, "forbidden") && strings.Contains(e, tc.refusal())
			}) {
				return fmt.Errorf("%s's reconciles haven't all failed with the 403: %q", name, apiFailedReconciles(r.tel, name))
			}
		}
		return nil
	})
	t.Logf("every reconcile failed with the 403 within %s", time.Since(started).Round(time.Millisecond))
	if !r.running() {
		t.Errorf("Serve = %v, want it still running: no error of a reconcile ends the Service", r.stop())
	}
	tc.checkNothingWritten(t, w, n)
	tc.checkRefusedInTheAuditLog(t, w, r)
	if err := r.ctrl.Synced().Healthy(t.Context()); err != nil {
		t.Errorf("Synced = %v, want healthy: the controller serves, and each reconcile says what it can't do", err)
	}
}

// checkNothingWritten checks that the n objects have no status, and, when
// the finalizer's apply is the write refused, no finalizer and no
// Deployment; when the status's is, the finalizer.
func (tc forbiddenRule) checkNothingWritten(t *testing.T, w *workload, n int) {
	t.Helper()
	gvr := clusterCaches.GVR()
	status := tc.resource != gvr.Resource
	for i := range n {
		m := apiGet(t, w.admin, gvr, w.ns, fmt.Sprintf("m-%d", i))
		if has := slices.Contains(m.GetFinalizers(), testFinalizer); has != status {
			t.Errorf("%s's finalizers = %v, want the finalizer: %t", m.GetName(), m.GetFinalizers(), status)
		}
		if st, ok := m.Object["status"]; ok {
			t.Errorf("%s's status = %v, want none", m.GetName(), st)
		}
	}
	if !status {
		deps, err := w.kube.AppsV1().Deployments(w.ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(deps.Items) != 0 {
			t.Errorf("%d Deployments, want none: the Reconciler runs only once the finalizer is added", len(deps.Items))
		}
	}
}

// checkRefusedInTheAuditLog checks that the audit log has r's requests
// of the forbidden verb on the resource, each refused with a 403.
func (tc forbiddenRule) checkRefusedInTheAuditLog(t *testing.T, w *workload, r *apiReplica) {
	t.Helper()
	_, sub, _ := strings.Cut(tc.resource, "/")
	var refused int
	for _, e := range w.c.Audit(t) {
		if e.User != r.user || e.Namespace != w.ns || e.Resource != clusterCaches.GVR().Resource || e.Subresource != sub || e.Verb != tc.verb {
			continue
		}
		if e.Code != 403 {
			t.Errorf("%s %s %s (subresource %q): code %d, want 403", r.user, e.Verb, e.Name, e.Subresource, e.Code)
		}
		refused++
	}
	if refused == 0 {
		t.Errorf("the audit log has no %s of %s by %s, refused", tc.verb, tc.resource, r.user)
	}
}

// apiReplica is a replica of the suite's controller (w.replica's: the
// deployer, Owns(deployments), the finalizer), of a resource, with grants
// and a telemetry the test reads.
type apiReplica struct {
	ctrl *Controller
	tel  *humustest.Telemetry
	user string // as the audit log names it
	// stop cancels Serve's context and returns what Serve returned: at
	// once, once it has.
	stop func() error
}

func startAPIReplica(t *testing.T, c *clustertest.Cluster, ns, name string, r Resource[cacheSpec, cacheStatus], grants []clustertest.Grant) *apiReplica {
	t.Helper()
	token := c.ServiceAccount(t, ns, name, grants...)
	tel := humustest.NewTelemetry()
	setup, client := clientAs(t, c, tel, token)
	ctrl, _ := suiteController(t, setup, client, ns, name, testSettings(), r, nil)
	return &apiReplica{ctrl: ctrl, tel: tel, user: "system:serviceaccount:" + ns + ":" + name, stop: served(t, ctrl)}
}

// served waits up to d for Serve to return, and returns true and what it
// returned, or false when it still runs.
func (r *apiReplica) served(d time.Duration) (bool, error) {
	return awaitServe(r.ctrl, r.stop, d)
}

// running reports whether Serve still runs.
func (r *apiReplica) running() bool {
	select {
	case <-r.ctrl.engine.Done:
		return false
	default:
		return true
	}
}

// apiGrantsWithout is grants with verb taken out of the rule naming
// resource; a rule left without a verb is dropped.
func apiGrantsWithout(t *testing.T, grants []clustertest.Grant, resource, verb string) []clustertest.Grant {
	t.Helper()
	out := make([]clustertest.Grant, 0, len(grants))
	removed := false
	for _, g := range grants {
		ng := clustertest.Grant{Namespace: g.Namespace}
		for _, r := range g.Rules {
			r = *r.DeepCopy()
			if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
				removed = true
			}
			if len(r.Verbs) > 0 {
				ng.Rules = append(ng.Rules, r)
			}
		}
		out = append(out, ng)
	}
	if !removed {
		t.Fatalf("no rule grants %s on %s", verb, resource)
	}
	return out
}

// apiFailedReconciles is the errors of tel's "reconcile failed" records
// for the object named name.
func apiFailedReconciles(tel *humustest.Telemetry, name string) []string {
	var out []string
	for _, r := range recordsWithBody(tel, "reconcile failed") {
		if attrs := recordAttrs(r); attrs[control.AttrObjectName] == name {
			out = append(out, attrs["error"])
		}
	}
	return out
}

// apiStoreABadTime creates name, of size 1, and applies its status as the
// controller would, with its field manager, but with a condition whose
// lastTransitionTime is "yesterday", which the looser CRD stores and the
// controller's Go types (metav1.Time) can't parse.
func apiStoreABadTime(t *testing.T, admin dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	m := object(gvr.GroupVersion().String(), looserCaches.Kind, ns, name, map[string]any{"size": int64(1)})
	unstructured.RemoveNestedField(m.Object, "metadata", "uid")
	if _, err := admin.Resource(gvr).Namespace(ns).Create(t.Context(), m, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	st := object(gvr.GroupVersion().String(), looserCaches.Kind, ns, name, nil)
	unstructured.RemoveNestedField(st.Object, "metadata", "uid")
	st.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "Up", "message": "", "lastTransitionTime": "yesterday",
	}}}
	if _, err := admin.Resource(gvr).Namespace(ns).Apply(t.Context(), name, st, metav1.ApplyOptions{FieldManager: testSettings().Name, Force: true}, "status"); err != nil {
		t.Fatalf("applying %s's status with a lastTransitionTime of \"yesterday\": %v", name, err)
	}
}

// apiCheckBadTimeMended checks that name, which apiStoreABadTime stored,
// converged with the rest: its status applied, without the condition it
// couldn't decode, and a WARN record naming the field.
func apiCheckBadTimeMended(t *testing.T, r *apiReplica, admin dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if conds, ok, _ := unstructured.NestedSlice(apiGet(t, admin, gvr, ns, name).Object, "status", "conditions"); ok {
		t.Errorf("%s's status.conditions = %v, want none: the status apply mends the status", name, conds)
	}
	const want = "field status.conditions: parsing time \"yesterday\""
	var warned bool
	for _, rec := range recordsWithBody(r.tel, "the status can't be decoded: reconciling from a zero status") {
		warned = warned || strings.Contains(recordAttrs(rec)["error"], want)
	}
	if !warned {
		t.Errorf("no WARN record of %s's status naming %s", name, want)
	}
}

// apiGet gets an object, failing t if it can't.
func apiGet(t *testing.T, d dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := d.Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// apiRelease removes every finalizer from the Memcacheds of gvr in the
// namespaces keep accepts, so their deletion, or their CRD's, doesn't wait
// on a controller that no longer runs.
func apiRelease(ctx context.Context, d dynamic.Interface, gvr schema.GroupVersionResource, keep func(ns string) bool) error {
	list, err := d.Resource(gvr).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil // the CRD is gone
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range list.Items {
		if len(m.GetFinalizers()) == 0 || !keep(m.GetNamespace()) {
			continue
		}
		_, err := d.Resource(gvr).Namespace(m.GetNamespace()).Patch(ctx, m.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// apiReleaseAtCleanup releases the objects of ns at t's cleanup, once its
// replicas stopped: registered after the namespace's cleanup and before
// the replicas', it runs between the two.
func apiReleaseAtCleanup(t *testing.T, d dynamic.Interface, gvr schema.GroupVersionResource, ns string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := apiRelease(ctx, d, gvr, func(other string) bool { return other == ns }); err != nil {
			t.Errorf("releasing the test's objects at cleanup: %v", err)
		}
	})
}

// apiReleaseOthers releases the Memcacheds other tests left in namespaces
// other than ns.
func apiReleaseOthers(t *testing.T, d dynamic.Interface, gvr schema.GroupVersionResource, ns string) {
	t.Helper()
	if err := apiRelease(t.Context(), d, gvr, func(other string) bool { return other != ns }); err != nil {
		t.Fatalf("releasing other tests' Memcacheds: %v", err)
	}
}

// apiRestoreSharedCRD leaves clusterCaches' CRD installed and served, as
// the package's other tests need it: once a deletion under way has ended,
// it is created again. It runs at cleanup, so not on t's context.
func apiRestoreSharedCRD(t *testing.T, c *clustertest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ext := apiextensions.NewForConfigOrDie(c.AdminConfig())
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	want, err := clusterCaches.CRD()
	if err != nil {
		t.Error(err)
		return
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, apiCRDName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := crds.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return false, err
			}
			return true, nil
		case err != nil:
			return false, err
		case got.DeletionTimestamp != nil:
			// Its objects' finalizers would hold its deletion forever
			// once no controller runs.
			return false, apiRelease(ctx, admin, clusterCaches.GVR(), func(string) bool { return true })
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("restoring the CRD %s for the package's other tests: %v", apiCRDName, err)
		return
	}
	c.AwaitCRD(t, apiCRDName)
}

// apiInstallLooserCRD installs looserCaches' CRD with spec.size an
// integer or a string, and deletes it at t's cleanup.
func apiInstallLooserCRD(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	crd, err := looserCaches.CRD()
	if err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := root.Properties["spec"]
	if _, ok := spec.Properties["size"]; !ok {
		t.Fatalf("the CRD's spec has no size: %v", spec.Properties)
	}
	spec.Properties["size"] = apiextensionsv1.JSONSchemaProps{XIntOrString: true}
	root.Properties["spec"] = spec
	status := root.Properties["status"]
	conds := status.Properties["conditions"]
	if conds.Items == nil || conds.Items.Schema == nil {
		t.Fatalf("the CRD's status has no conditions: %v", status.Properties)
	}
	conds.Items.Schema.Properties["lastTransitionTime"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	status.Properties["conditions"] = conds
	root.Properties["status"] = status
	ext := apiextensions.NewForConfigOrDie(c.AdminConfig())
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := crds.Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the CRD %s at cleanup: %v", crd.Name, err)
		}
	})
	c.AwaitCRD(t, crd.Name)
}
