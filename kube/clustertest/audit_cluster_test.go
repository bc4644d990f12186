package clustertest

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// writes are the verbs the audit policy records.
var writes = []string{"create", "update", "patch", "delete", "deletecollection"}

func TestClusterAudit(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	token := c.ServiceAccount(t, ns, "writer", Grant{Namespace: ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "list"}},
	}})
	cfg := c.AdminConfig()
	cfg.BearerToken = token
	cfg.UserAgent = "audit-test"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":writer"

	before := time.Now()
	if _, err := client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	// Reads, and a write RBAC forbids.
	if _, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), "audited", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().ConfigMaps(ns).Delete(t.Context(), "audited", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("deleting without the right: %v, want 403", err)
	}

	created := c.AwaitAudit(t, 30*time.Second, func(e AuditEvent) bool {
		return e.User == user && e.Verb == "create" && e.Resource == "configmaps"
	})
	want := AuditEvent{
		AuditID: created.AuditID, Verb: "create", User: user, UserAgent: "audit-test",
		RequestURI: "/api/v1/namespaces/" + ns + "/configmaps",
		APIVersion: "v1", Resource: "configmaps", Namespace: ns, Name: "audited", Code: 201,
		RequestReceived: created.RequestReceived, StageTime: created.StageTime,
	}
	if created != want {
		t.Errorf("the create's event is\n%+v, want\n%+v", created, want)
	}
	if created.AuditID == "" {
		t.Errorf("the create's event has no audit ID")
	}
	// The log's times have microseconds; the clocks are the same machine's.
	early, late := before.Truncate(time.Microsecond), after.Add(time.Microsecond)
	if created.RequestReceived.Before(early) || created.StageTime.Before(created.RequestReceived) || created.StageTime.After(late) {
		t.Errorf("the create's event was received at %s and complete at %s, want both within [%s, %s] in order",
			created.RequestReceived, created.StageTime, early, late)
	}
	for _, ts := range []time.Time{created.RequestReceived, created.StageTime} {
		if ts.Nanosecond()%1000 != 0 {
			t.Errorf("time %s has a finer precision than microseconds", ts)
		}
	}

	deleted := c.AwaitAudit(t, 30*time.Second, func(e AuditEvent) bool { return e.User == user && e.Verb == "delete" })
	if deleted.Code != 403 || deleted.Resource != "configmaps" || deleted.Name != "audited" {
		t.Errorf("the forbidden delete's event is %+v, want code 403 on configmaps %s/audited", deleted, ns)
	}

	checkOnlyWritesOnce(t, c, user)
}

// checkOnlyWritesOnce checks that the audit log records only writes, each
// once, and that Writes picks the events of one user or of everyone.
func checkOnlyWritesOnce(t *testing.T, c *Cluster, user string) {
	t.Helper()
	mine := Writes(c.Audit(t), user)
	var ids []string
	for _, e := range mine {
		if !slices.Contains(writes, e.Verb) {
			t.Errorf("an event of verb %q: %+v", e.Verb, e)
		}
		if slices.Contains(ids, e.AuditID) {
			t.Errorf("audit ID %s is logged twice: only the ResponseComplete stage should be", e.AuditID)
		}
		ids = append(ids, e.AuditID)
	}
	if n := len(Writes(mine, "someone else")); n != 0 {
		t.Errorf("Writes(events, someone else) has %d events, want none", n)
	}
	if all := c.Audit(t); len(Writes(all, "")) != len(all) {
		t.Errorf(`Writes(events, "") has %d events of %d, want all`, len(Writes(all, "")), len(all))
	}
}

// TestClusterAuditAcrossRestart checks that the audit log keeps the events
// of a kube-apiserver that was killed, and gets those of the next.
func TestClusterAuditAcrossRestart(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	client := adminClient(t, c)
	isCreate := func(name string) func(AuditEvent) bool {
		return func(e AuditEvent) bool {
			return e.User == "admin" && e.Verb == "create" && e.Namespace == ns && e.Name == name
		}
	}
	createConfigMap(t, client, ns, "before", nil)
	c.AwaitAudit(t, 30*time.Second, isCreate("before"))

	c.KillAPIServer(t)
	c.StartAPIServer(t)
	createConfigMap(t, client, ns, "after", nil)
	c.AwaitAudit(t, 30*time.Second, isCreate("after"))

	events := c.Audit(t)
	i, j := slices.IndexFunc(events, isCreate("before")), slices.IndexFunc(events, isCreate("after"))
	if i < 0 || j < i {
		t.Errorf("the create before the restart is event %d and the one after is event %d, want both, in order", i, j)
	}
}
