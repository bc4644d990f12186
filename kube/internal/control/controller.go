package control

import (
	"context"
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

// leader leads once the resources are served: it runs steps 2 to 5 of How
// one key is reconciled, in the package doc, on the one Lease (oneLease),
// or with Settings.Shards above 1 on a Lease of each shard (shards.go).
type leader interface {
	serve(ctx, stopping context.Context, inf *informing) error
	// each calls f with each work this replica has now: the one Lease's,
	// or each held shard's whose caches have synced.
	each(f func(*Work))
}
