package kube

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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
	bound := rightsProbe + unservedGrace + 5*time.Second
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
