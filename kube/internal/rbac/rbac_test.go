package rbac

import (
	"reflect"
	"strings"
	"testing"
)

func TestRolesMergeNeedsIntoTheNarrowestRoles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		needs []Need
		want  []Role
	}{
		{
			name: "needs of one resource in one place are one rule, its verbs in order",
			needs: []Need{
				{Namespace: "shop", Group: "apps", Resource: "deployments", Verbs: []string{"patch", "create"}, Why: "writes"},
				{Namespace: "shop", Group: "apps", Resource: "deployments", Verbs: []string{"watch", "list"}, Why: "owns"},
			},
			want: []Role{{Namespace: "shop", Rules: []Rule{{Group: "apps", Resource: "deployments",
				Verbs: []string{"list", "watch", "create", "patch"},
				Whys:  []Why{{What: "writes", Verbs: []string{"create", "patch"}}, {What: "owns", Verbs: []string{"list", "watch"}}},
			}}}},
		},
		{
			name: "a need in one namespace stays in its Role",
			needs: []Need{
				{Group: "", Resource: "configmaps", Verbs: []string{"list"}, Why: "everywhere"},
				{Namespace: "shop", Group: "", Resource: "secrets", Verbs: []string{"list"}, Why: "one namespace"},
			},
			want: []Role{
				{Rules: []Rule{{Resource: "configmaps", Verbs: []string{"list"}, Whys: []Why{{What: "everywhere", Verbs: []string{"list"}}}}}},
				{Namespace: "shop", Rules: []Rule{{Resource: "secrets", Verbs: []string{"list"}, Whys: []Why{{What: "one namespace", Verbs: []string{"list"}}}}}},
			},
		},
		{
			name: "a need a cluster-wide one covers adds no rule, and is said in its comment",
			needs: []Need{
				{Namespace: "shop", Resource: "configmaps", Verbs: []string{"list"}, Why: "a Reader"},
				{Resource: "configmaps", Verbs: []string{"list", "watch"}, Why: "Owns"},
			},
			want: []Role{{Rules: []Rule{{Resource: "configmaps", Verbs: []string{"list", "watch"},
				Whys: []Why{{What: "a Reader (in shop)", Verbs: []string{"list"}}, {What: "Owns", Verbs: []string{"list", "watch"}}},
			}}}},
		},
		{
			name: "a need a cluster-wide one covers only in part keeps its Role",
			needs: []Need{
				{Resource: "configmaps", Verbs: []string{"list"}, Why: "Owns"},
				{Namespace: "shop", Resource: "configmaps", Verbs: []string{"list", "patch"}, Why: "Writes"},
			},
			want: []Role{
				{Rules: []Rule{{Resource: "configmaps", Verbs: []string{"list"}, Whys: []Why{{What: "Owns", Verbs: []string{"list"}}}}}},
				{Namespace: "shop", Rules: []Rule{{Resource: "configmaps", Verbs: []string{"list", "patch"}, Whys: []Why{{What: "Writes", Verbs: []string{"list", "patch"}}}}}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Roles(tc.needs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Roles() =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestYAMLBindsEachRoleToTheAccount(t *testing.T) {
	m := Manifest{Account: "web", Namespace: "web-system", Header: []string{"made by a test"}, Roles: Roles([]Need{
		{Group: "", Resource: "services", Verbs: []string{"list"}, Why: "Owns"},
		{Namespace: "web-system", Group: "coordination.k8s.io", Resource: "leases", Verbs: []string{"get"}, Why: "the Lease"},
	})}
	want := `# made by a test
apiVersion: v1
kind: ServiceAccount
metadata:
  name: web
  namespace: web-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: web
rules:
# list: Owns
- apiGroups: [""]
  resources: [services]
  verbs: [list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: web
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: web
subjects:
- kind: ServiceAccount
  name: web
  namespace: web-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: web
  namespace: web-system
rules:
# get: the Lease
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: web
  namespace: web-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: web
subjects:
- kind: ServiceAccount
  name: web
  namespace: web-system
`
	if got := string(m.YAML()); got != want {
		t.Errorf("YAML() =\n%s\nwant\n%s", got, want)
	}
	if strings.Count(want, "\n---\n") != 4 {
		t.Fatal("the test's want has lost a document")
	}
}
