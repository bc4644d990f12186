// Package rbac turns what an App's controllers declare they use into the
// RBAC manifest its ServiceAccount runs with: the ServiceAccount, a
// ClusterRole for what is needed in every namespace, a Role for each
// namespace something is needed in alone, and their bindings, as YAML
// that kubectl apply takes unchanged.
//
// It promises:
//
//   - No rule is wider than the needs it is given: a need in one
//     namespace is granted in that namespace's Role, never cluster-wide; a
//     verb is granted on a resource only when a need names both. Needs of
//     one resource in one place are merged into one rule, and a need in a
//     namespace that a cluster-wide need of the same resource and verbs
//     covers adds no rule of its own.
//   - Every rule is commented with what declared each of its verbs, the
//     Why of each need, so a change of rights reads in review as a change
//     of code.
//   - The output depends only on its input, in the order given: the same
//     needs write the same bytes, so a golden file stays put.
//
// It imports the standard library only: it knows nothing of the
// controller, only resources, verbs and namespaces.
package rbac

import (
	"fmt"
	"slices"
	"strings"
)

// A Need is verbs on one resource that something of the App uses, in one
// namespace or in all.
type Need struct {
	// Namespace is where the verbs are needed: "" for every namespace (a
	// ClusterRole), or for a cluster-scoped resource.
	Namespace string
	Group     string // "" for the core group
	// Resource is the resource's plural, or plural/subresource, such as
	// memcacheds/status.
	Resource string
	Verbs    []string
	// Why is what declared the need, such as "kube.Owns(apps/v1,
	// Resource=deployments)": the rule's comment says it.
	Why string
}

// Verbs are the verbs a Need may name, in the order rules list them.
var Verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// A Rule is a PolicyRule of one resource, and what declared its verbs.
type Rule struct {
	Group    string
	Resource string
	Verbs    []string // in the order of Verbs
	Whys     []Why    // in the order declared
}

// A Why is what declared some of a rule's verbs.
type Why struct {
	What  string
	Verbs []string // in the order of Verbs
}

// A Role is a ClusterRole (Namespace "") or a Role in Namespace.
type Role struct {
	Namespace string
	Rules     []Rule // in the order their resources were first needed
}

// Roles merges needs into roles: the ClusterRole first, when any need is
// cluster-wide, then a Role for each namespace, in the order first
// needed. A role with no rule left is left out.
func Roles(needs []Need) []Role {
	wide := map[[2]string]map[string]bool{} // group, resource -> verbs needed cluster-wide
	for _, n := range needs {
		if n.Namespace == "" {
			k := [2]string{n.Group, n.Resource}
			if wide[k] == nil {
				wide[k] = map[string]bool{}
			}
			for _, v := range n.Verbs {
				wide[k][v] = true
			}
		}
	}
	var roles []Role
	index := map[string]int{}
	role := func(ns string) *Role {
		i, ok := index[ns]
		if !ok {
			i = len(roles)
			index[ns] = i
			roles = append(roles, Role{Namespace: ns})
		}
		return &roles[i]
	}
	if len(wide) > 0 {
		role("")
	}
	for _, n := range needs {
		ns := n.Namespace
		if covered(wide[[2]string{n.Group, n.Resource}], n.Verbs) {
			ns = "" // said in the cluster-wide rule's comment, granted by it
		}
		role(ns).add(n)
	}
	out := roles[:0]
	for _, r := range roles {
		if len(r.Rules) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// covered reports whether every verb of verbs is in have.
func covered(have map[string]bool, verbs []string) bool {
	if len(have) == 0 {
		return false
	}
	for _, v := range verbs {
		if !have[v] {
			return false
		}
	}
	return true
}

// add merges n into r's rule of its resource.
func (r *Role) add(n Need) {
	i := slices.IndexFunc(r.Rules, func(rule Rule) bool { return rule.Group == n.Group && rule.Resource == n.Resource })
	if i < 0 {
		i = len(r.Rules)
		r.Rules = append(r.Rules, Rule{Group: n.Group, Resource: n.Resource})
	}
	rule := &r.Rules[i]
	rule.Verbs = ordered(rule.Verbs, n.Verbs)
	what := n.Why
	if n.Namespace != r.Namespace {
		what += " (in " + n.Namespace + ")"
	}
	j := slices.IndexFunc(rule.Whys, func(w Why) bool { return w.What == what })
	if j < 0 {
		rule.Whys = append(rule.Whys, Why{What: what, Verbs: ordered(nil, n.Verbs)})
		return
	}
	rule.Whys[j].Verbs = ordered(rule.Whys[j].Verbs, n.Verbs)
}

// ordered is the union of a and b, in the order of Verbs; a verb Verbs
// lacks goes last, in the order given.
func ordered(a, b []string) []string {
	var out []string
	for _, v := range Verbs {
		if slices.Contains(a, v) || slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	for _, v := range slices.Concat(a, b) {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Manifest is an RBAC manifest: the ServiceAccount Account in Namespace,
// and its roles, each named Account, bound to it.
type Manifest struct {
	Account   string
	Namespace string
	Header    []string // comment lines opening the file, without the #
	Roles     []Role
}

// YAML is m as YAML documents: the ServiceAccount, then each role
// followed by its binding.
func (m Manifest) YAML() []byte {
	var b strings.Builder
	for _, line := range m.Header {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: %s\n  namespace: %s\n", m.Account, m.Namespace)
	for _, r := range m.Roles {
		b.WriteString("---\n")
		kind, binding, meta := "ClusterRole", "ClusterRoleBinding", fmt.Sprintf("  name: %s\n", m.Account)
		if r.Namespace != "" {
			kind, binding = "Role", "RoleBinding"
			meta += fmt.Sprintf("  namespace: %s\n", r.Namespace)
		}
		fmt.Fprintf(&b, "apiVersion: rbac.authorization.k8s.io/v1\nkind: %s\nmetadata:\n%srules:\n", kind, meta)
		for _, rule := range r.Rules {
			for _, w := range rule.Whys {
				b.WriteString(strings.TrimRight(fmt.Sprintf("# %s: %s", strings.Join(w.Verbs, ", "), w.What), " ") + "\n")
			}
			fmt.Fprintf(&b, "- apiGroups: [%s]\n  resources: [%s]\n  verbs: [%s]\n", flow(rule.Group), rule.Resource, strings.Join(rule.Verbs, ", "))
		}
		fmt.Fprintf(&b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: %s\nmetadata:\n%s", binding, meta)
		fmt.Fprintf(&b, "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: %s\n  name: %s\n", kind, m.Account)
		fmt.Fprintf(&b, "subjects:\n- kind: ServiceAccount\n  name: %s\n  namespace: %s\n", m.Account, m.Namespace)
	}
	return []byte(b.String())
}

// flow is an API group as an item of a YAML flow sequence: the core
// group, "", quoted.
func flow(group string) string {
	if group == "" {
		return `""`
	}
	return group
}
