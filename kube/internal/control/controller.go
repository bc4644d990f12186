package control

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/z5labs/humus/kube/internal/cache"

	"k8s.io/apimachinery/pkg/runtime/schema"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/z5labs/humus/health"
)

// Controller is the control loop of one resource: kube.Controller's
// engine.
type Controller struct {
	name      string
	settings  Settings
	gvr       schema.GroupVersionResource
	Group     string // the objects' API group, for owner references
	Kind      string
	Scope     Scope
	objType   Type
	Finalizer string // "" without Finalize
	owned     []schema.GroupVersionResource
	reads     []*Source   // each Reader's resource once, in the order given
	Relations []*Relation // Related and References, in the order given
	// watched is every resource the controller lists and watches, in the
	// order of its checks: its own, each it owns, each it reads.
	watched []cache.Key
	cache   *cache.Shared // the Client's

	API API
	tel *telemetry
	// processID tells this Controller's holding of a Lease from another
	// process's with the same identity: random, one per Controller.
	processID string

	Ready     *health.Binary
	Versions  WrittenVersions
	OwnWrites *OwnedWrites // the reconciles' writes to owned resources
	InFlight  inFlight     // the keys being reconciled, and their events held
	retry     workqueue.TypedRateLimiter[string]
	// Leader leads once the resources are served: on the one Lease, or on
	// a Lease of each shard.
	Leader leader
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
	Done       chan struct{} // closed when Serve returns
}

// clients are the API clients a Controller uses: built from the Client's
// Config, or client-go's fakes in the package's tests.
type API struct {
	cache.Clients
	Leases coordinationv1.LeasesGetter
	// CloseIdle closes the transport's idle connections, whose goroutines
	// would otherwise outlive Serve by the transport's idle timeout.
	CloseIdle func()
	// Open is how many of the transport's connections are open.
	Open func() int
	// Abort closes every connection of the transport, idle or not, at once,
	// dropping whatever they haven't sent: a replica that lost the Lease
	// sends nothing late.
	Abort func()
}

// OrNoop fills the functions cl lacks with ones that do nothing.
func (cl API) OrNoop() API {
	if cl.CloseIdle == nil {
		cl.CloseIdle = func() {}
	}
	if cl.Abort == nil {
		cl.Abort = func() {}
	}
	if cl.Open == nil {
		cl.Open = func() int { return 0 }
	}
	return cl
}

// engineConfig is what a Controller is built from: its settings, its
// objects' resource and Go type, its parts, and what it runs on.
type Config struct {
	Settings  Settings
	GVR       schema.GroupVersionResource
	Group     string // the objects' API group, for owner references
	Kind      string
	Scope     Scope
	Type      Type
	Finalizer string      // "" without Finalize
	Owned     []cache.Key // each owned resource, as the controller watches it
	Reads     []*Source
	Relations []*Relation
	Cache     *cache.Shared // the Client's
	API       API
	Telemetry *telemetry
}

// newEngine returns the Controller cfg describes.
func New(cfg Config) *Controller {
	settings, gvr := cfg.Settings, cfg.GVR
	watched := []cache.Key{{GVR: gvr, Namespace: settings.Namespace, Labels: settings.LabelSelector, Fields: settings.FieldSelector}}
	watched = append(watched, cfg.Owned...)
	owned := make([]schema.GroupVersionResource, len(cfg.Owned))
	for i, o := range cfg.Owned {
		owned[i] = o.GVR
	}
	written := slices.Clone(owned)
	for _, r := range cfg.Reads {
		watched = append(watched, r.Entry.Key())
		written = append(written, r.Entry.Key().GVR)
	}
	for i, rel := range cfg.Relations {
		rel.name = relationName(i)
	}
	work, cancel := context.WithCancel(context.Background())
	ctrl := &Controller{
		name:       settings.Name,
		settings:   settings,
		gvr:        gvr,
		Group:      cfg.Group,
		Kind:       cfg.Kind,
		Scope:      cfg.Scope,
		objType:    cfg.Type,
		Finalizer:  cfg.Finalizer,
		owned:      owned,
		reads:      cfg.Reads,
		Relations:  cfg.Relations,
		watched:    watched,
		cache:      cfg.Cache,
		OwnWrites:  NewOwnedWrites(written),
		Versions:   WrittenVersions{Manager: settings.Name},
		processID:  strconv.FormatUint(rand.Uint64(), 36),
		API:        cfg.API,
		tel:        cfg.Telemetry,
		retry:      newRetryLimiter(settings),
		Ready:      health.NewBinary(fmt.Errorf("kube: controller %s: its caches haven't synced", settings.Name)),
		crew:       newCrew(settings.Workers),
		stop:       make(chan struct{}),
		work:       work,
		cancelWork: cancel,
		Done:       make(chan struct{}),
	}
	ctrl.Leader = newLeader(ctrl)
	return ctrl
}
