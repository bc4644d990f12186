package kube

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/z5labs/humus/kube/internal/cache"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/workqueue"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/health"
)

// Controller reconciles the objects of one Resource or one Kind. It is a
// humus.Service: Serve runs it, and Shutdown finishes its reconciles in
// flight. A Controller serves once.
type Controller struct {
	name      string
	settings  Settings
	gvr       schema.GroupVersionResource
	group     string // the objects' API group, for owner references
	kind      string
	scope     Scope
	objType   objectType
	finalizer string // "" without Finalize
	owned     []schema.GroupVersionResource
	reads     []*reader   // each Reader's resource once, in the order given
	relations []*relation // Related and References, in the order given
	// watched is every resource the controller lists and watches, in the
	// order of its checks: its own, each it owns, each it reads.
	watched []cache.Key
	cache   *cache.Shared // the Client's
	// declared is what it declared it uses, for MarshalRBAC.
	declared declared

	clients clients
	tel     *telemetry
	// processID tells this Controller's holding of a Lease from another
	// process's with the same identity: random, one per Controller.
	processID string

	synced    *health.Binary
	versions  writtenVersions
	ownWrites *ownedWrites // the reconciles' writes to owned resources
	inFlight  inFlight     // the keys being reconciled, and their events held
	retry     workqueue.TypedRateLimiter[string]
	// leader leads once the resources are served: on the one Lease, or on
	// a Lease of each shard.
	leader leader
	// crew is the workers of every term of leading, which Shutdown waits
	// for.
	crew *crew

	// stop is closed when shutdown begins: Serve's context is done, or
	// Shutdown is called.
	stop     chan struct{}
	stopOnce sync.Once
	// work is the reconciles' and the Lease release's context, cancelled
	// when Shutdown's context ends first. Each term of leading has a
	// context of its own under it, cancelled when the Lease is lost.
	work       context.Context
	cancelWork context.CancelFunc
	started    atomic.Bool
	done       chan struct{} // closed when Serve returns
}

// clients are the API clients a Controller uses: built from the Client's
// Config, or client-go's fakes in the package's tests.
type clients struct {
	cache.Clients
	leases coordinationv1.LeasesGetter
	// closeIdle closes the transport's idle connections, whose goroutines
	// would otherwise outlive Serve by the transport's idle timeout.
	closeIdle func()
	// open is how many of the transport's connections are open.
	open func() int
	// abort closes every connection of the transport, idle or not, at once,
	// dropping whatever they haven't sent: a replica that lost the Lease
	// sends nothing late.
	abort func()
}

func newClients(c *Client) (clients, error) {
	cfg := c.Config()
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("kube: the dynamic client: %w", err)
	}
	m, err := metadata.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("kube: the metadata client: %w", err)
	}
	l, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("kube: the Lease client: %w", err)
	}
	r, err := cache.NewObjectsREST(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("kube: the objects' client: %w", err)
	}
	cl := clients{Clients: cache.Clients{Dynamic: d, REST: r, Metadata: m}, leases: l}
	if t, ok := cfg.Transport.(interface{ CloseIdleConnections() }); ok {
		cl.closeIdle = t.CloseIdleConnections
	}
	if t, ok := cfg.Transport.(interface{ abortConnections() }); ok {
		cl.abort = t.abortConnections
	}
	if t, ok := cfg.Transport.(interface{ openConnections() int }); ok {
		cl.open = t.openConnections
	}
	return cl.orNoop(), nil
}

// orNoop fills the functions cl lacks with ones that do nothing.
func (cl clients) orNoop() clients {
	if cl.closeIdle == nil {
		cl.closeIdle = func() {}
	}
	if cl.abort == nil {
		cl.abort = func() {}
	}
	if cl.open == nil {
		cl.open = func() int { return 0 }
	}
	return cl
}

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

func newController(s *humus.Setup, c *Client, settings Settings, gvr schema.GroupVersionResource, group, kind string, scope Scope, typ objectType, ps controllerParts, errs []error) (*Controller, error) {
	errs = append(errs, settings.check(scope))
	if s == nil {
		errs = append(errs, errors.New("kube: the Setup is nil"))
		s = &humus.Setup{}
	}
	tel, err := newTelemetry(s.Telemetry, settings.Name, gvr.GroupResource())
	errs = append(errs, err)
	var cl clients
	if c == nil {
		errs = append(errs, errors.New("kube: the Client is nil"))
	} else {
		cl, err = newClients(c)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	work, cancel := context.WithCancel(context.Background())
	owned := ps.owned
	watched := []cache.Key{{GVR: gvr, Namespace: settings.Namespace, Labels: settings.LabelSelector, Fields: settings.FieldSelector}}
	for i, o := range owned {
		watched = append(watched, cache.Key{GVR: o, Namespace: settings.Namespace, Labels: ps.ownedSel[i].Labels, Fields: ps.ownedSel[i].Fields})
	}
	written := slices.Clone(owned)
	for _, r := range ps.reads {
		watched = append(watched, r.entry.Key())
		written = append(written, r.entry.Key().GVR)
	}
	for i, rel := range ps.relations {
		rel.name = relationName(i)
	}
	ctrl := &Controller{
		name:       settings.Name,
		settings:   settings,
		gvr:        gvr,
		group:      group,
		kind:       kind,
		scope:      scope,
		objType:    typ,
		finalizer:  ps.finalizer,
		owned:      owned,
		reads:      ps.reads,
		relations:  ps.relations,
		declared:   declare(settings, gvr, typ, ps),
		watched:    watched,
		cache:      c.cache,
		ownWrites:  newOwnedWrites(written),
		versions:   writtenVersions{manager: settings.Name},
		processID:  strconv.FormatUint(rand.Uint64(), 36),
		clients:    cl,
		tel:        tel,
		retry:      newRetryLimiter(settings),
		synced:     health.NewBinary(fmt.Errorf("kube: controller %s: its caches haven't synced", settings.Name)),
		crew:       newCrew(settings.Workers),
		stop:       make(chan struct{}),
		work:       work,
		cancelWork: cancel,
		done:       make(chan struct{}),
	}
	ctrl.leader = newLeader(ctrl)
	return ctrl, nil
}

// Synced is healthy once the controller's caches have synced, on every
// replica, leader or not, and until Serve returns. It is for readiness:
// serve it as health.Readiness(ctrl.Synced()).
func (c *Controller) Synced() health.Monitor { return c.synced }

// Part is a part of a controller beyond its Reconciler: Owns or Finalize.
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
	reads     []*reader
	relations []*relation
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
		case r.err != nil:
			errs = append(errs, fmt.Errorf("kube: %s: %w", what, r.err))
		case c != nil && r.client != c:
			errs = append(errs, fmt.Errorf("kube: %s: the Reader of %s reads another Client's cache: build it with the controller's Client", what, r.entry.Key()))
		default:
			if !read[r.entry] {
				read[r.entry] = true
				ps.reads = append(ps.reads, r)
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
				ps.relations = append(ps.relations, &relation{related: p})
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
