package clustertest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// A Right is one verb on one resource, in one namespace or in all.
type Right struct {
	Namespace string // "" for every namespace, or a cluster-scoped resource
	Group     string // the API group, "" for the core group
	Resource  string // its plural, or plural/subresource, such as memcacheds/status
	Verb      string
}

// String names r, such as "create on deployments.apps in namespace shop"
// or "list on namespaces, cluster-wide".
func (r Right) String() string {
	res := r.Resource
	if r.Group != "" {
		base, sub, ok := strings.Cut(res, "/")
		res = base + "." + r.Group
		if ok {
			res += "/" + sub
		}
	}
	where := ", cluster-wide"
	if r.Namespace != "" {
		where = " in namespace " + r.Namespace
	}
	return r.Verb + " on " + res + where
}

// A Refusal is a Right an identity's requests were refused with 403.
type Refusal struct {
	Right
	Requests int    // how many were refused
	Message  string // the API server's answer to the first
}

// A RightsReport is what an identity's requests, as kube-apiserver's
// audit log has them, say of the rights it was granted.
type RightsReport struct {
	// Refused is each right the identity's requests were refused with a
	// 403, in the order first refused.
	Refused []Refusal
	// Unused is each verb on each resource the grants allow (each rule
	// expanded into its groups, resources and verbs) that no request of
	// the identity used, in the order of the grants and their rules. A
	// rule of non-resource URLs isn't checked.
	Unused []Right
}

// RightsUsed reads the audit log, and returns what the requests of the
// ServiceAccount account in namespace made so far say of grants, the
// rights it was given (PodHost's, such as RBACGrants' of a manifest). The
// audit log holds every request of a ServiceAccount outside kube-system
// but the non-resource ones (discovery), reads included. A request is a
// use of a right that allows its verb on its resource in its namespace;
// a server-side apply or an update that created its object (201 Created)
// is a use of create too, as the API server authorizes it. A request
// refused with 403 is a Refusal of the verb and resource the API server's
// answer names (create, for an apply that may patch but not create), and
// uses nothing. It fails t on an existing cluster (FromKubeconfig), whose
// audit log this package can't read.
func (c *Cluster) RightsUsed(t testing.TB, namespace, account string, grants []Grant) RightsReport {
	t.Helper()
	return rightsUsed(c.auditRecords(t), "system:serviceaccount:"+namespace+":"+account, grants)
}

// A RightsOption changes what CheckRights takes for a failure.
type RightsOption func(*rightsCheck)

type rightsCheck struct{ failUnused bool }

// FailUnusedRights makes a right granted and never used fail the test, as
// a refused one does; without it, CheckRights only logs it. Unused
// rights aren't said of a test that failed otherwise, with no refusal,
// whose run may have been cut short before it used them.
func FailUnusedRights() RightsOption { return func(c *rightsCheck) { c.failUnused = true } }

// CheckRights checks, at t's cleanup, the requests the ServiceAccount
// account in namespace made during the test against grants, the rights
// PodHost was given, as RightsUsed reads them from the audit log: each
// right its requests were refused with 403 fails t, naming the verb, the
// resource and the namespace, how often, and the API server's answer; each
// right granted and never used is logged, or fails t with
// FailUnusedRights. So a whole-App test fails on a right its manifest
// lacks, and says which rights it grants that the App didn't use.
//
// Call it before the App starts, as a whole-App test's run is what it
// checks: its cleanup then runs after humustest.Start's has stopped the
// App, and a watch's right is seen from when it began. On an existing
// cluster (FromKubeconfig), whose audit log this package can't read, it
// logs that it checks nothing.
func (c *Cluster) CheckRights(t testing.TB, namespace, account string, grants []Grant, opts ...RightsOption) {
	t.Helper()
	var check rightsCheck
	for _, o := range opts {
		o(&check)
	}
	if c.from.kind == fromKubeconfig {
		t.Logf("clustertest: CheckRights checks nothing on %s, whose audit log this package can't read", c.from)
		return
	}
	t.Cleanup(func() {
		r := c.RightsUsed(t, namespace, account, grants)
		user := "system:serviceaccount:" + namespace + ":" + account
		for _, f := range r.Refused {
			t.Errorf("clustertest: %s was refused %s, %d times: its grants lack it (the API server: %s)", user, f.Right, f.Requests, f.Message)
		}
		if t.Failed() && len(r.Refused) == 0 {
			return // a run cut short leaves rights unused that a whole one uses
		}
		for _, u := range r.Unused {
			if check.failUnused {
				t.Errorf("clustertest: %s was granted %s, and never used it", user, u)
			} else {
				t.Logf("clustertest: %s was granted %s, and never used it", user, u)
			}
		}
	})
}

// refusedRight reads the verb, resource and group a 403's message names,
// such as `User "x" cannot create resource "deployments" in API group
// "apps" in the namespace "shop"`.
var refusedRight = regexp.MustCompile(`cannot (\S+) resource "([^"]+)"(?: in API group "([^"]*)")?`)

// rightsUsed is RightsUsed of the audit log's records.
func rightsUsed(records []auditRecord, user string, grants []Grant) RightsReport {
	var report RightsReport
	used := map[Right]bool{} // each grant's rules' rights, by the grant's namespace
	seen := map[string]bool{}
	for _, r := range records {
		if r.User != user || r.Resource == "" || seen[r.AuditID] {
			continue
		}
		seen[r.AuditID] = true
		res := r.Resource
		if r.Subresource != "" {
			res += "/" + r.Subresource
		}
		if r.Code == 403 {
			report.refuse(r, res)
			continue
		}
		verbs := []string{r.Verb}
		if r.Code == 201 && (r.Verb == "patch" || r.Verb == "update") {
			verbs = append(verbs, "create")
		}
		for _, g := range grants {
			if g.Namespace != "" && g.Namespace != r.Namespace {
				continue
			}
			for _, rule := range g.Rules {
				for _, v := range verbs {
					for _, right := range rights(g.Namespace, rule) {
						if matches(right, r.APIGroup, res, v) && (len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, r.Name)) {
							used[right] = true
						}
					}
				}
			}
		}
	}
	for _, g := range grants {
		for _, rule := range g.Rules {
			for _, right := range rights(g.Namespace, rule) {
				if !used[right] && !slices.Contains(report.Unused, right) {
					report.Unused = append(report.Unused, right)
				}
			}
		}
	}
	return report
}

// refuse adds r, a request refused with 403 on res, to the report.
func (report *RightsReport) refuse(r auditRecord, res string) {
	right := Right{Namespace: r.Namespace, Group: r.APIGroup, Resource: res, Verb: r.Verb}
	if m := refusedRight.FindStringSubmatch(r.message); m != nil {
		right.Verb, right.Resource, right.Group = m[1], m[2], m[3]
	}
	i := slices.IndexFunc(report.Refused, func(f Refusal) bool { return f.Right == right })
	if i < 0 {
		report.Refused = append(report.Refused, Refusal{Right: right, Message: r.message})
		i = len(report.Refused) - 1
	}
	report.Refused[i].Requests++
}

// rights are rule's rights, granted in namespace: each of its groups,
// resources and verbs, wildcards as they are. A rule of non-resource
// URLs has none.
func rights(namespace string, rule rbacv1.PolicyRule) []Right {
	var out []Right
	for _, g := range rule.APIGroups {
		for _, res := range rule.Resources {
			for _, v := range rule.Verbs {
				out = append(out, Right{Namespace: namespace, Group: g, Resource: res, Verb: v})
			}
		}
	}
	return out
}

// matches reports whether right, with its wildcards, allows verb on res
// (plural, or plural/subresource) of group, as RBAC matches a rule.
func matches(right Right, group, res, verb string) bool {
	if right.Group != rbacv1.APIGroupAll && right.Group != group {
		return false
	}
	if right.Verb != rbacv1.VerbAll && right.Verb != verb {
		return false
	}
	if right.Resource == rbacv1.ResourceAll || right.Resource == res {
		return true
	}
	// "*/status" matches the status of every resource.
	_, sub, ok := strings.Cut(res, "/")
	return ok && right.Resource == "*/"+sub
}

// String says the report in lines: each refusal, then each unused right.
func (report RightsReport) String() string {
	var b strings.Builder
	for _, f := range report.Refused {
		fmt.Fprintf(&b, "refused %s, %d times: %s\n", f.Right, f.Requests, f.Message)
	}
	for _, u := range report.Unused {
		fmt.Fprintf(&b, "unused %s\n", u)
	}
	return b.String()
}
