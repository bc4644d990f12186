package kube

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/internal/control"
	"github.com/z5labs/humus/kube/internal/rbac"
	"github.com/z5labs/humus/kube/internal/shard"
)

// A Write is what a Reconciler does to objects of a resource it writes
// itself, through a clientset of its own: Writes declares it, for the
// RBAC MarshalRBAC derives.
type Write string

// The Writes a Reconciler declares, each granted as the verbs the API
// server authorizes it by.
const (
	// Apply is a server-side apply: create and patch, since an apply that
	// creates an object is authorized as a create too.
	Apply Write = "apply"
	// Create, Update, Patch, Delete and DeleteCollection are the verbs of
	// their name.
	Create           Write = "create"
	Update           Write = "update"
	Patch            Write = "patch"
	Delete           Write = "delete"
	DeleteCollection Write = "deletecollection"
)

// verbs are the RBAC verbs w is authorized by.
func (w Write) verbs() []string {
	if w == Apply {
		return []string{"create", "patch"}
	}
	return []string{string(w)}
}

// Writes declares that the Reconciler writes objects of gvr itself, as
// verbs say: such as a Deployment it applies (Writes(deployments, Apply)),
// or a ConfigMap it copies and deletes (Writes(configmaps, Apply,
// Delete)). It changes nothing the controller does: it is the part of the
// controller's rights that the rest of its declaration can't show, so
// MarshalRBAC derives them all from the code. The writes are granted where
// the controller works, in Settings.Namespace, or in every namespace when
// it is "". gvr.Resource may name a subresource, such as
// deployments/scale.
func Writes(gvr schema.GroupVersionResource, verbs ...Write) Part {
	return writes{gvr: gvr, verbs: verbs}
}

type writes struct {
	gvr   schema.GroupVersionResource
	verbs []Write
}

func (writes) part() {}

// check returns what is wrong with p.
func (p writes) check() error {
	var problems []error
	if err := checkGVR(p.gvr); err != nil {
		problems = append(problems, err)
	}
	if len(p.verbs) == 0 {
		problems = append(problems, errors.New("no Write is given: Apply, Create, Update, Patch, Delete or DeleteCollection"))
	}
	for _, v := range p.verbs {
		if !slices.Contains([]Write{Apply, Create, Update, Patch, Delete, DeleteCollection}, v) {
			problems = append(problems, fmt.Errorf("%q is not a Write: Apply, Create, Update, Patch, Delete or DeleteCollection", v))
		}
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("kube: Writes(%s): %w", p.gvr, err)
	}
	return nil
}

// declared is what a Controller declared it uses at construction: the
// rules of its resource, of what it owns, reads and writes, and of its
// Leases; and the namespace it works in.
type declared struct {
	namespace string // Settings.Namespace
	needs     []rbac.Need
}

// appliesStatus is implemented by the object types whose controller
// applies their status: a Resource's, not a Kind's.
type appliesStatus interface{ appliesStatus() }

func (resourceType[Spec, Status]) appliesStatus() {}

// declare is what a controller of gvr, with settings and parts ps, and
// objects of typ, declared it uses.
func declare(settings Settings, gvr schema.GroupVersionResource, typ control.Type, ps controllerParts) declared {
	ns := settings.Namespace
	self := "controller " + settings.Name
	d := declared{namespace: ns}
	need := func(ns string, gvr schema.GroupVersionResource, why string, verbs ...string) {
		d.needs = append(d.needs, rbac.Need{Namespace: ns, Group: gvr.Group, Resource: gvr.Resource, Verbs: verbs, Why: why})
	}
	need(ns, gvr, self+"'s resource, listed and watched", "list", "watch")
	if ps.finalizer != "" {
		need(ns, gvr, fmt.Sprintf("kube.Finalize(%q), its finalizer applied", ps.finalizer), "patch")
	}
	if _, ok := typ.(appliesStatus); ok {
		need(ns, gvr.GroupVersion().WithResource(gvr.Resource+"/status"), self+"'s status, applied", "patch")
	}
	for i, o := range ps.owned {
		fn := "kube.Owns"
		if ps.ownedSel[i] != (Selector{}) {
			fn = "kube.OwnsSelected"
		}
		need(ns, o, fn+"("+o.GroupResource().String()+")", "list", "watch")
	}
	for _, r := range ps.reads {
		fn := "kube.Reads"
		for _, rel := range ps.relations {
			if rel.Source == r {
				fn = "kube.Related"
				if rel.Index != nil {
					fn = "kube.References"
				}
			}
		}
		k := r.Entry.Key()
		need(k.Namespace, k.GVR, fn+"(a Reader of "+k.GVR.GroupResource().String()+")", "list", "watch")
	}
	for _, w := range ps.writes {
		var verbs, names []string
		for _, v := range w.verbs {
			verbs = append(verbs, v.verbs()...)
			names = append(names, "kube."+writeNames[v])
		}
		need(ns, w.gvr, "kube.Writes("+w.gvr.GroupResource().String()+", "+strings.Join(names, ", ")+")", verbs...)
	}
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	le := settings.LeaderElection.Namespace
	lease := "Lease " + settings.Name
	if settings.Shards > 1 {
		lease = "shards' Leases " + shard.LeaseName(settings.Name, string(settings.ShardBy), 0, settings.Shards) +
			" to " + shard.LeaseName(settings.Name, string(settings.ShardBy), settings.Shards-1, settings.Shards)
	}
	need(le, leases, self+"'s "+lease+", taken and renewed", "get", "create", "update")
	need(le, leases, self+", seeing the shards' Leases (Settings.Shards)", "list")
	return d
}

// writeNames are the Writes' names in Go.
var writeNames = map[Write]string{Apply: "Apply", Create: "Create", Update: "Update", Patch: "Patch", Delete: "Delete", DeleteCollection: "DeleteCollection"}

// recorderNeed is what a Recorder needs, in namespace: create an Event,
// and patch it to count a repeat into its series.
func recorderNeed(namespace string) rbac.Need {
	return rbac.Need{Namespace: namespace, Group: "events.k8s.io", Resource: "events", Verbs: []string{"create", "patch"}, Why: "kube.Recorder, its Events and their series"}
}

// MarshalRBAC returns the RBAC manifest the ServiceAccount account, in
// namespace, needs to run svcs, derived from what they declared when they
// were built, as YAML that kubectl apply takes unchanged: the
// ServiceAccount; a ClusterRole of what is needed in every namespace, and
// a ClusterRoleBinding; a Role of what is needed in one namespace alone,
// and a RoleBinding, for each such namespace; each role named account.
// Each rule is commented with what declared each of its verbs. svcs are an
// App's Services, as its Init returns them:
//
//   - a Controller needs list and watch on its resource, and patch on it
//     with Finalize, and on its status subresource for a Resource; list
//     and watch on each resource it owns (Owns, OwnsSelected) and reads
//     (Reads, Related, References, in the Reader's Selector's namespace);
//     the verbs of each Writes; all in Settings.Namespace, or every
//     namespace when it is "". In LeaderElection.Namespace, get, create and
//     update on its Lease, or its shards' Leases, and list on Leases, with
//     which a replica sees the shards' Leases;
//   - a Recorder needs create and patch on events.k8s.io events, where the
//     controllers of svcs work: in their Settings.Namespace when they all
//     work in one, and in every namespace otherwise;
//   - a Service holding others, such as webhook.Service.Before's (a
//     Services() []humus.Service method), needs what they need;
//   - any other Service, such as health's, needs nothing.
//
// A golden test writes it to the App's deploy/rbac.yaml, and fails when
// the file differs from the code: a change of rights shows in review, and
// a right the code needs and the manifest lacks fails go test, not the
// deployment. It returns an error when svcs hold no Controller or
// Recorder, or account or namespace isn't a DNS-1123 subdomain and label.
func MarshalRBAC(account, namespace string, svcs ...humus.Service) ([]byte, error) {
	var errs []error
	if problems := validation.IsDNS1123Subdomain(account); len(problems) > 0 {
		errs = append(errs, fmt.Errorf("kube: MarshalRBAC: the ServiceAccount %q: %s", account, strings.Join(problems, "; ")))
	}
	if problems := validation.IsDNS1123Label(namespace); len(problems) > 0 {
		errs = append(errs, fmt.Errorf("kube: MarshalRBAC: the namespace %q: %s", namespace, strings.Join(problems, "; ")))
	}
	var ctrls []*Controller
	var recorders int
	var walk func(svcs []humus.Service)
	walk = func(svcs []humus.Service) {
		for _, s := range svcs {
			switch s := s.(type) {
			case *Controller:
				ctrls = append(ctrls, s)
			case *Recorder:
				recorders++
			case interface{ Services() []humus.Service }:
				walk(s.Services())
			}
		}
	}
	walk(svcs)
	if len(ctrls) == 0 && recorders == 0 {
		errs = append(errs, errors.New("kube: MarshalRBAC: the Services hold no Controller and no Recorder: nothing needs a right"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var needs []rbac.Need
	where := map[string]bool{}
	for _, c := range ctrls {
		needs = append(needs, c.declared.needs...)
		where[c.declared.namespace] = true
	}
	if recorders > 0 {
		ns := ""
		if len(where) == 1 {
			for w := range where {
				ns = w
			}
		}
		needs = append(needs, recorderNeed(ns))
	}
	m := rbac.Manifest{Account: account, Namespace: namespace, Roles: rbac.Roles(needs), Header: []string{
		"The RBAC the ServiceAccount " + account + " needs, derived by kube.MarshalRBAC",
		"from what the App's controllers declare: written by its golden test (go test",
		"-update), not by hand. A rule's comment says what declared each of its verbs.",
	}}
	return m.YAML(), nil
}
