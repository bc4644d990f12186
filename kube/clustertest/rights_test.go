package clustertest

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestRightsUsedNamesRefusalsAndUnusedRights(t *testing.T) {
	const user = "system:serviceaccount:shop:web"
	req := func(id, verb, group, res, sub, ns string, code int, message string) auditRecord {
		return auditRecord{AuditEvent: AuditEvent{AuditID: id, User: user, Verb: verb, APIGroup: group, Resource: res, Subresource: sub, Namespace: ns, Code: code}, stage: "ResponseComplete", message: message}
	}
	watchStarted := req("w", "watch", "apps", "deployments", "", "", 200, "")
	watchStarted.stage = "ResponseStarted"
	records := []auditRecord{
		req("1", "list", "apps", "deployments", "", "", 200, ""),
		watchStarted,
		req("w", "watch", "apps", "deployments", "", "", 200, ""),
		// A server-side apply that created its Deployment: patch and create.
		req("2", "patch", "apps", "deployments", "", "shop", 201, ""),
		// The status, refused; twice.
		req("3", "patch", "web.example.com", "websites", "status", "shop", 403, `websites.web.example.com "docs" is forbidden: User "`+user+`" cannot patch resource "websites/status" in API group "web.example.com" in the namespace "shop"`),
		req("4", "patch", "web.example.com", "websites", "status", "shop", 403, `websites.web.example.com "docs" is forbidden: User "`+user+`" cannot patch resource "websites/status" in API group "web.example.com" in the namespace "shop"`),
		// An apply that would create a Service, refused its create.
		req("5", "patch", "", "services", "", "shop", 403, `services "docs" is forbidden: User "`+user+`" cannot create resource "services" in API group "" in the namespace "shop"`),
		// The Lease, in the controller's namespace.
		req("6", "get", "coordination.k8s.io", "leases", "", "web-system", 200, ""),
		// Someone else's, and a non-resource request.
		{AuditEvent: AuditEvent{AuditID: "7", User: "admin", Verb: "delete", APIGroup: "apps", Resource: "deployments", Code: 200}},
		{AuditEvent: AuditEvent{AuditID: "8", User: user, Verb: "get", Code: 200}},
	}
	grants := []Grant{
		{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch", "create", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"patch"}},
		}},
		{Namespace: "web-system", Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update"}},
		}},
		// A Role in another namespace covers nothing of the cluster-wide list.
		{Namespace: "shop", Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list"}},
		}},
	}
	got := rightsUsed(records, user, grants)
	want := RightsReport{
		Refused: []Refusal{
			{Right: Right{Namespace: "shop", Group: "web.example.com", Resource: "websites/status", Verb: "patch"}, Requests: 2, Message: records[4].message},
			{Right: Right{Namespace: "shop", Group: "", Resource: "services", Verb: "create"}, Requests: 1, Message: records[6].message},
		},
		Unused: []Right{
			{Group: "apps", Resource: "deployments", Verb: "delete"},
			{Group: "", Resource: "services", Verb: "patch"},
			{Namespace: "web-system", Group: "coordination.k8s.io", Resource: "leases", Verb: "update"},
			{Namespace: "shop", Group: "apps", Resource: "deployments", Verb: "list"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rightsUsed =\n%s\nwant\n%s", got, want)
	}
	if s := want.Refused[0].String(); s != "patch on websites.web.example.com/status in namespace shop" {
		t.Errorf("the refusal reads %q", s)
	}
	if s := want.Unused[0].String(); s != "delete on deployments.apps, cluster-wide" {
		t.Errorf("the unused right reads %q", s)
	}
}
