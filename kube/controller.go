package kube

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/metadata"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/health"
)

func newClients(c *Client) (control.API, error) {
	cfg := c.Config()
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return control.API{}, fmt.Errorf("kube: the dynamic client: %w", err)
	}
	m, err := metadata.NewForConfig(cfg)
	if err != nil {
		return control.API{}, fmt.Errorf("kube: the metadata client: %w", err)
	}
	l, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		return control.API{}, fmt.Errorf("kube: the Lease client: %w", err)
	}
	r, err := cache.NewObjectsREST(cfg)
	if err != nil {
		return control.API{}, fmt.Errorf("kube: the objects' client: %w", err)
	}
	cl := control.API{Clients: cache.Clients{Dynamic: d, REST: r, Metadata: m}, Leases: l}
	if t, ok := cfg.Transport.(interface{ CloseIdleConnections() }); ok {
		cl.CloseIdle = t.CloseIdleConnections
	}
	if t, ok := cfg.Transport.(interface{ abortConnections() }); ok {
		cl.Abort = t.abortConnections
	}
	if t, ok := cfg.Transport.(interface{ openConnections() int }); ok {
		cl.Open = t.openConnections
	}
	return cl.OrNoop(), nil
}

// Controller reconciles the objects of one Resource or one Kind. It is a
// humus.Service: Serve runs it, and Shutdown finishes its reconciles in
// flight. A Controller serves once.
type Controller struct {
	engine   *control.Controller
	declared declared // what it declared it uses, for MarshalRBAC
}

// Serve runs the controller until its context is done, and then returns
// nil once the reconciles in flight have finished and the Lease is
// released. It returns an error naming the resource when the resource, or
// one it owns, isn't served or may not be listed, such as when its CRD
// isn't installed or is deleted while the controller runs; an error naming
// the Lease when this replica may not read or write it; and
// ErrLostLeadership when the replica loses the Lease.
//
// Every replica lists and watches, and keeps its caches warm; only the
// Lease's holder reconciles, with Settings.Workers workers.
func (c *Controller) Serve(ctx context.Context) error { return c.engine.Serve(ctx) }

// Shutdown finishes the controller's shutdown within ctx. Shutdown begins
// when Serve's context is done, or when Shutdown is called: the controller
// stops taking keys, lets the reconciles in flight finish, releases the
// Lease and stops its informers, leaving its backlog for the next leader,
// and Serve returns nil. When ctx ends first, Shutdown cancels the
// reconciles in flight and the Lease's release, waits for the reconciles
// to return, and returns an error wrapping ctx's: it never waits on the API
// server, however slow the release or the informers are. A Reconciler that
// ignores its cancelled context holds Shutdown, and humus.Main's grace
// period bounds that.
func (c *Controller) Shutdown(ctx context.Context) error { return c.engine.Shutdown(ctx) }

// ErrLostLeadership is what Serve returns when the replica loses the Lease
// while it serves: it couldn't renew it for RenewDeadline, or another
// replica took it. The App exits 1, and Kubernetes restarts the pod, which
// campaigns again.
var ErrLostLeadership = control.ErrLostLeadership

// NewController returns a Controller of r's objects. It opens no
// connection. It returns one error naming every mistake in settings, in r,
// as CRD reports them, and in parts.
//
// The controller never installs r's CRD: installing it would give the
// controller's ServiceAccount write access to every CRD in the cluster, and
// a CRD outlives the controller's pods, so it belongs to whatever deploys
// them. Serve fails, naming the resource, when the CRD isn't installed.
func NewController[Spec, Status any](s *humus.Setup, c *Client, settings Settings, r Resource[Spec, Status], rec Reconciler[Spec, Status], parts ...Part) (*Controller, error) {
	var errs []error
	if _, err := r.CRD(); err != nil {
		errs = append(errs, err)
	}
	if rec == nil {
		errs = append(errs, errors.New("kube: the Reconciler is nil"))
	}
	ps, err := checkParts[Object[Spec, Status]](c, parts)
	errs = append(errs, err)
	typ := resourceType[Spec, Status]{rec: rec, fin: ps.fin}
	return newController(s, c, settings, r.GVR(), r.Group, r.Kind, r.Scope, typ, ps.controllerParts, errs)
}

// NewKindController returns a Controller of k's objects. It opens no
// connection. It returns one error naming every mistake in settings, in k
// and in parts. *T must be a metav1.Object, as every client-go type's is.
func NewKindController[T any](s *humus.Setup, c *Client, settings Settings, k Kind[T], rec KindReconciler[T], parts ...Part) (*Controller, error) {
	errs := []error{checkKind(k, "kube: ")}
	if rec == nil {
		errs = append(errs, errors.New("kube: the KindReconciler is nil"))
	}
	ps, err := checkParts[T](c, parts)
	errs = append(errs, err)
	typ := kindType[T]{rec: rec, fin: ps.fin}
	return newController(s, c, settings, k.GVR, k.GVR.Group, k.Kind, k.Scope, typ, ps.controllerParts, errs)
}

func newController(s *humus.Setup, c *Client, settings Settings, gvr schema.GroupVersionResource, group, kind string, scope Scope, typ control.Type, ps controllerParts, errs []error) (*Controller, error) {
	errs = append(errs, settings.check(scope))
	if s == nil {
		errs = append(errs, errors.New("kube: the Setup is nil"))
		s = &humus.Setup{}
	}
	tel, err := control.NewTelemetry(s.Telemetry, settings.Name, gvr.GroupResource())
	errs = append(errs, err)
	var cl control.API
	if c == nil {
		errs = append(errs, errors.New("kube: the Client is nil"))
	} else {
		cl, err = newClients(c)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	owned := make([]cache.Key, len(ps.owned))
	for i, o := range ps.owned {
		owned[i] = cache.Key{GVR: o, Namespace: settings.Namespace, Labels: ps.ownedSel[i].Labels, Fields: ps.ownedSel[i].Fields}
	}
	return &Controller{engine: control.New(control.Config{
		Settings:  settings.engine(),
		GVR:       gvr,
		Group:     group,
		Kind:      kind,
		Scope:     control.Scope(scope),
		Type:      typ,
		Finalizer: ps.finalizer,
		Owned:     owned,
		Reads:     ps.reads,
		Relations: ps.relations,
		Cache:     c.cache,
		API:       cl,
		Telemetry: tel,
	}), declared: declare(settings, gvr, typ, ps)}, nil
}

// Synced is healthy once the controller's caches have synced, on every
// replica, leader or not, and until Serve returns. It is for readiness:
// serve it as health.Readiness(ctrl.Synced()).
func (c *Controller) Synced() health.Monitor { return c.engine.Ready }

// Part is a part of a controller beyond its Reconciler: Owns (or
// OwnsSelected), Finalize, Reads, Related, References or Writes.
type Part interface{ part() }

// Owns reconciles an object again when a resource of gvr that it controls
// changes: one whose controller owner reference names the object's group
// and kind. The controller watches gvr's resources through a metadata
// informer, limited to Settings.Namespace, since only their owner
// references are looked at. A namespaced resource can name a cluster-scoped
// owner, such as its Namespace.
//
// The end user sets the owner reference when they apply the child; the
// controller needs list and watch on gvr.
func Owns(gvr schema.GroupVersionResource) Part { return owns{gvr: gvr} }

// OwnsSelected is Owns, of the objects of gvr that sel's Labels and
// Fields select only: listed and watched with them, so no other object
// is cached, nor reconciles its owner. sel.Namespace must be "": owned
// objects are those of Settings.Namespace. An owned object that stops
// matching (a label taken off) is gone to the controller: its owner is
// reconciled, as for a deletion, and an owner that applies it again with
// the label brings it back.
func OwnsSelected(gvr schema.GroupVersionResource, sel Selector) Part {
	return owns{gvr: gvr, sel: sel, selected: true}
}

type owns struct {
	gvr      schema.GroupVersionResource
	sel      Selector
	selected bool // OwnsSelected
}

func (owns) part() {}

// Finalize keeps every object until f has cleaned up after it. The
// controller adds the finalizer name to each object it reconciles, with
// server-side apply under its field manager, before the first reconcile.
// Once an object is being deleted, it calls f in place of the Reconciler
// until f returns nil, and then removes name, so the deletion completes. An
// error from f retries, as a reconcile's does; a panic in f is recovered and
// not retried, and the object keeps its finalizer until its next reconcile.
//
// f must be idempotent: it runs again after an error, after a new leader
// took over mid-way, and if the finalizer's removal fails. A deletion waits
// while no replica of the controller runs: the object stays, being
// deleted, until a leader has run f and removed the finalizer, so an
// uninstalled controller leaves its objects undeletable until the
// finalizer is removed by hand.
//
// T is the Controller's object type: Object[Spec, Status] for a Resource,
// and T for a Kind[T]. NewController and NewKindController check it, and
// that name is a qualified name with a domain prefix of the author's own,
// such as "cache.example.com/finalizer": a name without a domain, which
// the API server accepts with a warning, and a kubernetes.io or k8s.io
// domain (or a subdomain of one), which Kubernetes keeps for itself, are
// refused.
func Finalize[T any](name string, f func(ctx context.Context, obj T) error) Part {
	return finalize{name: name, f: f, typ: reflect.TypeFor[T]()}
}

type finalize struct {
	name string
	f    any // func(context.Context, T) error
	typ  reflect.Type
}

func (finalize) part() {}

// check returns what is wrong with p, given the resources owned before it
// (seen).
func (p owns) check(seen map[schema.GroupVersionResource]bool) error {
	if err := checkGVR(p.gvr); err != nil {
		return fmt.Errorf("kube: Owns(%s): %w", p.gvr, err)
	}
	if seen[p.gvr] {
		return fmt.Errorf("kube: Owns(%s) is given twice", p.gvr)
	}
	if !p.selected {
		return nil
	}
	var problems []error
	if p.sel.Namespace != "" {
		problems = append(problems, fmt.Errorf("Selector.Namespace %q must be empty: the owned objects are those of Settings.Namespace", p.sel.Namespace))
	}
	if err := p.sel.check(Namespaced); err != nil {
		problems = append(problems, err)
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("kube: OwnsSelected(%s): %w", p.gvr, err)
	}
	return nil
}

// controllerParts are a controller's parts, of whatever object type.
type controllerParts struct {
	finalizer string // "" without Finalize
	owned     []schema.GroupVersionResource
	ownedSel  []Selector // each owned resource's
	reads     []*control.Source
	relations []*control.Relation
	writes    []writes
}

// checkedParts are a controller's parts, and the finalizer function for
// objects of type T, if one is given.
type checkedParts[T any] struct {
	controllerParts
	fin func(context.Context, T) error
}

// checkParts returns a controller's parts, of objects of type T, built on
// c, and one error naming every mistake in them.
func checkParts[T any](c *Client, parts []Part) (checkedParts[T], error) {
	var ps checkedParts[T]
	var errs []error
	seen := map[schema.GroupVersionResource]bool{}
	read := map[*cache.Entry]bool{}
	checkReader := func(what string, r *reader) bool {
		switch {
		case r == nil:
			errs = append(errs, fmt.Errorf("kube: %s: the Reader is nil", what))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("kube: %s: %w", what, r.Err))
		case c != nil && r.client != c:
			errs = append(errs, fmt.Errorf("kube: %s: the Reader of %s reads another Client's cache: build it with the controller's Client", what, r.Entry.Key()))
		default:
			if !read[r.Entry] {
				read[r.Entry] = true
				ps.reads = append(ps.reads, r.Source)
			}
			return true
		}
		return false
	}
	for i, p := range parts {
		switch p := p.(type) {
		case owns:
			if err := p.check(seen); err != nil {
				errs = append(errs, err)
				continue
			}
			seen[p.gvr] = true
			ps.owned, ps.ownedSel = append(ps.owned, p.gvr), append(ps.ownedSel, p.sel)
		case finalize:
			if ps.finalizer != "" {
				errs = append(errs, fmt.Errorf("kube: Finalize(%q) is a second finalizer; a controller has one, %q", p.name, ps.finalizer))
				continue
			}
			if err := checkFinalizerName(p.name); err != nil {
				errs = append(errs, fmt.Errorf("kube: Finalize(%q): %w", p.name, err))
			}
			f, ok := p.f.(func(context.Context, T) error)
			if !ok {
				errs = append(errs, fmt.Errorf("kube: Finalize(%q): f takes a %s, and the controller's objects are %s", p.name, p.typ, reflect.TypeFor[T]()))
			}
			ps.fin, ps.finalizer = f, p.name
		case reads:
			checkReader(fmt.Sprintf("part %d, Reads", i), p.r)
		case related:
			what := fmt.Sprintf("part %d, Related", i)
			if p.index != nil {
				what = fmt.Sprintf("part %d, References", i)
			}
			ok := checkReader(what, p.r)
			if p.index != nil && p.typ != reflect.TypeFor[T]() {
				errs = append(errs, fmt.Errorf("kube: %s: refs takes a %s, and the controller's objects are %s", what, p.typ, reflect.TypeFor[T]()))
				ok = false
			}
			if ok {
				ps.relations = append(ps.relations, &control.Relation{Source: p.r.Source, Mapper: p.mapper, Index: p.index})
			}
		case writes:
			errs, ps.writes = append(errs, p.check()), append(ps.writes, p)
		case nil:
			errs = append(errs, fmt.Errorf("kube: part %d is nil", i))
		default:
			errs = append(errs, fmt.Errorf("kube: part %d is a %T, not one of Owns, Finalize, Reads, Related, References or Writes", i, p))
		}
	}
	return ps, errors.Join(errs...)
}

// checkFinalizerName returns what is wrong with a finalizer's name. The API
// server takes any qualified name (IsQualifiedName, in
// k8s.io/apimachinery's ValidateFinalizerName), and for a custom
// resource's object only warns of one without a domain prefix
// (validateKubeFinalizerName in apiextensions-apiserver's
// registry/customresource: "prefer a domain-qualified finalizer name to
// avoid accidental conflicts with other finalizer writers"); for its own
// kinds, such as a Namespace, it refuses one ("name is neither a standard
// finalizer name nor is it fully qualified"). kube refuses it for every
// kind, and a prefix in kubernetes.io or k8s.io, which Kubernetes keeps
// for its own finalizers, such as kubernetes.io/pv-protection.
func checkFinalizerName(name string) error {
	if problems := validation.IsQualifiedName(name); len(problems) > 0 {
		return fmt.Errorf("the name must be a qualified name, such as example.com/finalizer: %s", strings.Join(problems, "; "))
	}
	prefix, _, ok := strings.Cut(name, "/")
	if !ok {
		return errors.New("the name must be domain-qualified, such as example.com/finalizer, as the API server prefers a finalizer name to be, to avoid accidental conflicts with other finalizer writers")
	}
	for _, reserved := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == reserved || strings.HasSuffix(prefix, "."+reserved) {
			return fmt.Errorf("the name's prefix %s is in %s, which Kubernetes keeps for its own finalizers: use a domain of your own", prefix, reserved)
		}
	}
	return nil
}

// checkGVR returns what is missing from gvr. Its group is "" for the core
// group, which is valid.
func checkGVR(gvr schema.GroupVersionResource) error {
	var missing []string
	if gvr.Version == "" {
		missing = append(missing, "Version")
	}
	if gvr.Resource == "" {
		missing = append(missing, "Resource")
	}
	if len(missing) > 0 {
		return errors.New("the GVR has no " + strings.Join(missing, " and no "))
	}
	return nil
}
