package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/memcached/app"
)

// The check of rights that TestClusterMemcached makes, seen to fail: the
// App runs with deploy/rbac.yaml's rules less create on Deployments, so
// its apply of the Memcached's Deployment is refused, and with a rule it
// never uses, get on Secrets. CheckRights fails the test naming both.
func TestClusterRightsCheckNamesAVerbTakenAwayAndARuleNeverUsed(t *testing.T) {
	c := clustertest.Get(t)
	_, dyn := adminClients(t, c)
	installCRD(t, c)
	ns := c.Namespace(t)
	var grants []clustertest.Grant
	for _, g := range clustertest.RBACGrants(t, "../deploy/rbac.yaml", ns) {
		var rules []rbacv1.PolicyRule
		for _, r := range g.Rules {
			if slices.Equal(r.Resources, []string{"deployments"}) {
				r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "create" })
			}
			rules = append(rules, r)
		}
		if g.Namespace == "" {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		}
		grants = append(grants, clustertest.Grant{Namespace: g.Namespace, Rules: rules})
	}
	host := c.PodHost(t, ns, "memcached-controller-0", app.Name, grants...)
	check := &caught{TB: t}
	c.CheckRights(check, ns, app.Name, grants, clustertest.FailUnusedRights())
	p := humustest.Start(t, host.Host(), app.Init)

	memcacheds := dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	if _, err := memcacheds.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": "sessions"},
		"spec":       map[string]any{"size": int64(1)},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Memcached: %v", err)
	}
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		if r := c.RightsUsed(t, ns, app.Name, grants); len(r.Refused) == 0 {
			return errors.New("no request refused yet")
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
	p.Signal()
	clustertest.AwaitExit(t, p)

	for _, f := range check.cleanups {
		f()
	}
	for _, want := range []string{
		fmt.Sprintf("system:serviceaccount:%s:%s was refused create on deployments.apps in namespace %s, ", ns, app.Name, ns),
		`cannot create resource "deployments" in API group "apps"`,
		fmt.Sprintf("system:serviceaccount:%s:%s was granted get on secrets, cluster-wide, and never used it", ns, app.Name),
	} {
		if !slices.ContainsFunc(check.errors, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("CheckRights said\n%s\nwith nothing naming %q", strings.Join(check.errors, "\n"), want)
		}
	}
	// Beside get on Secrets, what the refused create kept from use (the
	// Deployment's patch), and what only a repeated Event uses, unused.
	if len(check.errors) != 4 || !slices.ContainsFunc(check.errors, func(e string) bool { return strings.Contains(e, "was granted patch on deployments.apps") }) {
		t.Errorf("CheckRights said\n%s\nwant the refusal, get on Secrets, and patch on Deployments and Events unused", strings.Join(check.errors, "\n"))
	}
}

// caught is a test's testing.TB that keeps what CheckRights would fail it
// with, and its cleanups, for the test to run.
type caught struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (c *caught) Helper()          {}
func (c *caught) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }
func (c *caught) Errorf(format string, args ...any) {
	c.errors = append(c.errors, fmt.Sprintf(format, args...))
}
