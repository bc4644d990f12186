package kube

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/control"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClusterFaultListAndWatchTakenAwayWhileRunningEndsServe: list and
// watch of the owned Deployments taken away from a running, leading
// controller, its watches open. The API server checks a request's rights
// when it begins, so the open watches go on; the controller lists and
// watches each resource again every rightsProbe, and Serve ends within
// rightsProbe and unservedGrace, naming the request, with Synced unhealthy.
// Before, it ran on, Ready, until its watch timed out (5 to 10 minutes):
// 46 s after the rule was removed it still ran, /readyz ok.
func TestClusterFaultListAndWatchTakenAwayWhileRunningEndsServe(t *testing.T) {
	t.Parallel() // a namespace of its own: it runs beside the other parallel scenarios
	gvr := clusterCaches.GVR()
	w := newWorkload(t)
	apiReleaseAtCleanup(t, w.admin, gvr, w.ns)
	w.create(3)
	r := startAPIReplica(t, w.c, w.ns, "replica-a", clusterCaches, controllerRBAC(gvr.Group, gvr.Resource, w.ns))
	w.holds(testSettings().Name, "replica-a", 30*time.Second)
	w.converged(time.Minute)

	// The replica's Role, without list and watch on Deployments.
	roles, err := w.kube.RbacV1().Roles(w.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(roles.Items, func(r rbacv1.Role) bool { return strings.HasPrefix(r.Name, "replica-a-") })
	if i < 0 {
		t.Fatalf("no Role of replica-a's among %d", len(roles.Items))
	}
	role := roles.Items[i]
	for j, rule := range role.Rules {
		if slices.Contains(rule.Resources, "deployments") {
			role.Rules[j].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == "list" || v == "watch" })
		}
	}
	if _, err := w.kube.RbacV1().Roles(w.ns).Update(t.Context(), &role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	bound := control.RightsProbe + control.UnservedGrace + 5*time.Second
	ok, err := r.served(bound)
	if !ok {
		t.Fatalf("Serve still runs %s after list and watch of Deployments were taken away, Synced = %v", bound, r.ctrl.Synced().Healthy(t.Context()))
	}
	t.Logf("Serve returned %s after the rule was removed: %v", time.Since(taken).Round(time.Millisecond), err)
	want := fmt.Sprintf("kube: listing %s: ", deployments)
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `cannot list resource "deployments"`) {
		t.Errorf("Serve = %v, want %q followed by the 403 naming the list", err, want)
	}
	if err := r.ctrl.Synced().Healthy(t.Context()); err == nil {
		t.Error("Synced is healthy after Serve returned")
	}
}

// TestClusterFaultAReleasedLeaseThatMayBeReadButNotTakenEndsServe: the
// replica may get, list, watch and create Leases but not update them, and
// the Lease is already there, released (as the last leader's SIGTERM
// leaves it): every take is an update the API server refuses, each after
// a read it allows. Serve ends once the takes have been refused for
// unservedGrace, naming the request and the Lease, and Synced goes
// unhealthy. Before, the read's success reset the grace before each take:
// Serve ran on, Synced healthy, and no replica led.
func TestClusterFaultAReleasedLeaseThatMayBeReadButNotTakenEndsServe(t *testing.T) {
	t.Parallel() // a namespace of its own: it runs beside the other parallel scenarios
	gvr := clusterCaches.GVR()
	w := newWorkload(t)
	apiReleaseAtCleanup(t, w.admin, gvr, w.ns)
	w.create(3)
	name := testSettings().Name
	released := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: new(int32(1)), LeaseTransitions: new(int32(1))},
	}
	if _, err := w.kube.CoordinationV1().Leases(w.ns).Create(t.Context(), released, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grants := apiGrantsWithout(t, controllerRBAC(gvr.Group, gvr.Resource, w.ns), "leases", "update")
	for i, rule := range grants[0].Rules {
		if slices.Contains(rule.Resources, "leases") {
			grants[0].Rules[i].Verbs = append(grants[0].Rules[i].Verbs, "list", "watch")
		}
	}
	r := startAPIReplica(t, w.c, w.ns, "replica-a", clusterCaches, grants)
	started := time.Now()

	const bound = 20 * time.Second
	ok, err := r.served(bound)
	if !ok {
		t.Fatalf("Serve still runs %s after it started, Synced = %v: want it ended, naming the refused take", bound, r.ctrl.Synced().Healthy(t.Context()))
	}
	t.Logf("Serve returned %s after it started: %v", time.Since(started).Round(time.Millisecond), err)
	want := fmt.Sprintf("kube: the Lease %s/%s: ", w.ns, name)
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `cannot update resource "leases"`) {
		t.Errorf("Serve = %v, want %q followed by the 403 naming the update", err, want)
	}
	if err := r.ctrl.Synced().Healthy(t.Context()); err == nil {
		t.Error("Synced is healthy after Serve returned")
	}
	if h := w.leaseHolder(name); h != "" {
		t.Errorf("the Lease's holder = %q, want none: every take was refused", h)
	}
}
