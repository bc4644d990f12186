package control

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	"go.opentelemetry.io/otel/attribute"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/z5labs/humus/kube/internal/elector"
	"github.com/z5labs/humus/kube/internal/shard"
)

// MaxShards bounds Settings.Shards: each shard is a Lease, and a list and a
// watch of each resource on the replica that holds it.
const MaxShards = 256

// With Settings.Shards above 1, the objects are divided into that many
// ranges of their hash (internal/shard), each with a Lease of its own, and the
// replicas share the Leases:
//
//   - Every RetryPeriod a replica lists the Leases. A shard's Lease that is
//     free (missing, released, or not renewed for its duration since this
//     replica first saw its version) it takes while it holds fewer than
//     ceil(shards / members), the members being itself, the holders of
//     the Leases and the replicas asking for one; holding none, it takes
//     one, so replicas that start together see each other before they
//     take more.
//   - A replica that holds fewer than floor(shards / members), and finds
//     none free, asks the replica holding the most for one: it writes its
//     name into one of that replica's Leases (annotationWantedBy). The
//     holder sees it at its next renewal, stops taking the shard's keys,
//     lets its reconciles in flight finish, releases the Lease, and the
//     asker takes it. A released Lease wanted by another is left to it for
//     LeaseDuration.
//   - Each shard held is a term of leading (term.go), as the one Lease's: its
//     writes are made under its own proof, and a shard whose Lease can't be
//     proven stops its workers by the lost deadline. A replica that loses a
//     shard, or every shard, keeps running and takes shards again.
//   - The Lease names carry the shard count and the key: name-i-of-n by
//     UID, the names of the Leases before the key was written into them,
//     so a replica by UID shares its Leases with one of that code;
//     name-i-of-n-by-namespace by namespace. A shard isn't taken while a
//     Lease of another count, or the one Lease of an unsharded controller,
//     that covers any of its objects is held, nor while a Lease of another
//     key is (an object of one UID shard can be in any namespace shard),
//     and a replica that finds one just after taking a shard gives it back
//     before reconciling: so a rollout that changes Settings.Shards or
//     Settings.ShardBy never has two writers for one object. (A replica of
//     the code before that shards by namespace names its Leases as one by
//     UID does: a rollout from it straight to ShardByUID isn't guarded.)
//   - The replica lists and watches each shard it holds with the shard's
//     selector, from when it takes it: it caches its shards' objects only,
//     and a shard taken over starts cold.

// annotationWantedBy, on a shard's Lease, names the replica that asked its
// holder for it.
const annotationWantedBy = "kube.humus.z5labs.dev/wanted-by"

// newLeader is how c leads: with Settings.Shards above 1, on a Lease of
// each shard it holds; otherwise on the one Lease, kept from it while a
// Lease of the shards covers some of its objects.
func newLeader(c *Controller) leader {
	if c.settings.Shards > 1 {
		return &ShardManager{c: c, Terms: map[int]*shardTerm{}}
	}
	return &OneLease{c: c, blocked: shardLeasesHeld(c), gaveBack: "Gave the lease back: a replica of another shard count holds a shard's"}
}

// ShardManager runs a sharded controller's terms: one for each shard this
// replica holds.
type ShardManager struct {
	c        *Controller
	ctx      context.Context // Serve's
	stopping context.Context
	inf      *informing
	electors []*elector.Elector // one for each shard, kept across its terms
	foreign  *shard.Foreign
	ended    chan int // each term's shard, once it has ended
	honoured sync.Once
	refusal  elector.Refusal // of the Lease list's answers

	Mu    sync.Mutex
	Terms map[int]*shardTerm
}

// shardTerm is one term of holding one shard.
type shardTerm struct {
	r         shard.Range
	w         *Work
	Informers []toolscache.SharedIndexInformer
	el        *elector.Elector
	Synced    atomic.Bool
	asked     chan struct{} // closed when another replica asks for the shard, or the term is to end
	askOnce   sync.Once
	over      chan struct{} // closed when the term has ended
}

func (m *ShardManager) each(f func(*Work)) {
	m.Mu.Lock()
	var works []*Work
	for _, t := range m.Terms {
		if t.Synced.Load() {
			works = append(works, t.w)
		}
	}
	m.Mu.Unlock()
	for _, w := range works {
		f(w)
	}
}

// serve runs steps 2 to 5 of a sharded controller: it takes shards, lists
// and watches each from when it takes it, and reconciles each while
// holding it, until shutdown begins.
func (m *ShardManager) serve(ctx, stopping context.Context, inf *informing) error {
	c := m.c
	n := c.settings.Shards
	m.ctx, m.stopping, m.inf = ctx, stopping, inf
	m.foreign = shard.NewForeign(c.name, string(c.settings.ShardBy), c.settings.LeaderElection.LeaseDuration)
	m.ended = make(chan int, n)
	m.refusal = elector.Refusal{Grace: UnservedGrace}
	for i := range n {
		cfg := c.electorConfig(shard.LeaseName(c.name, string(c.settings.ShardBy), i, n))
		cfg.Taking = func(l *coordinationv1.Lease) {
			delete(l.Annotations, annotationWantedBy) // whoever asked, it is this replica's now
		}
		m.electors = append(m.electors, elector.New(cfg))
	}
	m.markSynced()

	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stopping.Done():
			m.awaitTerms()
			return nil
		case i := <-m.ended:
			m.forget(i)
			continue
		case <-t.C:
			if stopping.Err() != nil {
				continue // no shard taken once shutdown has begun
			}
		}
		next, err := m.look()
		if err != nil {
			m.stopAll()
			return err
		}
		t.Reset(time.Until(next))
	}
}

// look lists the Leases, takes the shards plan says, and asks for one.
// It returns when to look next: RetryPeriod from now, or sooner, when a
// Lease expires by this replica's clock. Only a Lease this replica may not
// read or write is an error, and the shards it has just taken, whose terms
// haven't begun, it gives back first: Serve ends, and no other replica
// should wait them out.
func (m *ShardManager) look() (time.Time, error) {
	le := m.c.settings.LeaderElection
	next := time.Now().Add(le.RetryPeriod)
	leases, ok, err := m.list()
	if err != nil || !ok {
		return next, err
	}
	states, expiry := m.states(leases)
	if !expiry.IsZero() && expiry.Before(next) {
		next = expiry
	}
	more, take, ask := shard.Plan(le.Identity, states, time.Now(), le.LeaseDuration)
	var taken []int
	for _, i := range take {
		if len(taken) == more {
			break
		}
		el := m.electors[i]
		if el.Take(m.campaigning()) {
			taken = append(taken, i)
		}
		if err := el.DeniedErr(); err != nil {
			m.giveBack(taken)
			return next, err
		}
	}
	if len(taken) > 0 {
		// Of two replicas with different shard counts or keys taking
		// overlapping shards at once, at least one sees the other's Lease
		// now.
		leases, ok, err := m.list()
		if err != nil {
			m.giveBack(taken)
			return next, err
		}
		blocked := m.blockedShards(leases)
		for _, i := range taken {
			if !ok || blocked[i] {
				m.c.release(m.electors[i])
				continue
			}
			m.start(i)
		}
	}
	if ask >= 0 {
		m.askFor(ask)
	}
	return next, nil
}

// giveBack releases the Leases of the shards taken, whose terms haven't
// begun.
func (m *ShardManager) giveBack(taken []int) {
	for _, i := range taken {
		m.c.release(m.electors[i])
	}
}

func (m *ShardManager) campaigning() context.Context {
	return klog.NewContext(context.WithoutCancel(m.ctx), m.c.tel.logr)
}

// list lists the Leases in the Lease's namespace. It returns false and no
// error when the list failed and may succeed next time.
func (m *ShardManager) list() ([]coordinationv1.Lease, bool, error) {
	le := m.c.settings.LeaderElection
	ctx, cancel := context.WithTimeout(m.campaigning(), le.RenewDeadline)
	defer cancel()
	list, err := m.c.API.Leases.Leases(le.Namespace).List(ctx, metav1.ListOptions{})
	switch {
	case m.refusal.Final(err, elector.Incurable(err, false)):
		return nil, false, fmt.Errorf("kube: listing the Leases in %s: %w", le.Namespace, err)
	case err != nil:
		klog.FromContext(ctx).V(4).Info("Failed to list the leases", "err", err)
		return nil, false, nil
	}
	return list.Items, true, nil
}

// states reads the Leases as plan takes them: each shard's, as its
// elector sees it; and when the first of those held by another replica
// expires, unless renewed first.
func (m *ShardManager) states(leases []coordinationv1.Lease) (states []shard.State, expiry time.Time) {
	byName := map[string]*coordinationv1.Lease{}
	for i := range leases {
		byName[leases[i].Name] = &leases[i]
	}
	blocked := m.blockedShards(leases)
	m.Mu.Lock()
	defer m.Mu.Unlock()
	states = make([]shard.State, len(m.electors))
	for i, el := range m.electors {
		s := &states[i]
		s.Blocked = blocked[i]
		if _, ok := m.Terms[i]; ok {
			s.Running = true
			continue
		}
		el.Saw(byName[el.Name()])
		if free, at := el.Free(); !free {
			s.Holder = el.Holder() // the Lease may be missing, and count as held still
			if expiry.IsZero() || at.Before(expiry) {
				expiry = at
			}
		}
		s.Free = el.SeenAt()
		if seen := el.Seen(); seen != nil {
			s.WantedBy = seen.Annotations[annotationWantedBy]
		}
	}
	return states, expiry
}

// blockedShards says which shards a held Lease of another shard count
// covers some of: the unsharded controller's one Lease, named Name,
// covers all.
func (m *ShardManager) blockedShards(leases []coordinationv1.Lease) map[int]bool {
	return m.foreign.Blocked(leases, len(m.electors))
}

// askFor asks the holder of the i-th shard for it: an update of its Lease,
// conditioned on the version this replica saw, naming this replica.
func (m *ShardManager) askFor(i int) {
	el := m.electors[i]
	asked, err := el.Annotate(m.campaigning(), annotationWantedBy, m.c.settings.LeaderElection.Identity)
	switch {
	case !asked:
		return
	case err != nil:
		el.Log().V(4).Info("Failed to ask for the shard", "err", err)
		return
	}
	el.Log().Info("Asked the holder for the shard", "holder", el.Holder())
}

// start begins a term of the i-th shard, whose Lease this replica has just
// taken: it renews the Lease, starts the shard's informers and, once they
// have synced, its workers.
func (m *ShardManager) start(i int) {
	r := shard.NewRange(i, len(m.electors))
	t := &shardTerm{
		r: r, w: m.c.NewWork([]attribute.KeyValue{attribute.String(attrShard, r.String())}), el: m.electors[i],
		asked: make(chan struct{}), over: make(chan struct{}),
	}
	m.Mu.Lock()
	m.Terms[i] = t
	m.Mu.Unlock()
	m.markSynced()
	go m.run(t)
}

// run is one term of a shard, until it is lost, handed to the replica
// that asked for it, or shutdown begins.
func (m *ShardManager) run(t *shardTerm) {
	c, el := m.c, t.el
	defer m.end(t)

	// Renew the Lease from now on; a renewal that finds the shard wanted by
	// another replica asks the term to end.
	holding, stopHolding := context.WithCancel(m.campaigning())
	defer stopHolding()
	held := make(chan struct{})
	go func() {
		defer close(held)
		el.Hold(holding, func(l *coordinationv1.Lease) {
			if by := l.Annotations[annotationWantedBy]; by != "" && by != c.settings.LeaderElection.Identity {
				t.ask()
			}
		})
	}()
	running, stopInformers := context.WithCancel(m.inf.ctx)
	defer stopInformers()
	lt := c.newTerm(m.ctx, el, t.w, held, stopHolding, "shard", t.r.String())
	defer lt.close()

	if !m.cache(t, lt, running) {
		return
	}
	if t.Synced.Load() {
		lt.lead()
	}
	if !lt.serve(m.stopping.Done(), t.asked) {
		if m.stopping.Err() == nil {
			el.Log().Info("Released the shard", "wantedBy", el.Seen().Annotations[annotationWantedBy])
		}
		return
	}
	if !lt.lose() {
		c.tel.log.ErrorContext(m.ctx, "a reconcile ignored its cancelled context: the shard isn't taken again until it returns", "lease", el.Describe())
		<-lt.finished
	}
	<-held
}

// cache starts the shard's informers, from cold, each until running ends,
// and waits for their caches to sync, until the term is lost or handed
// back, or shutdown begins. It reports false, having released the Lease,
// when the informers can't be started.
func (m *ShardManager) cache(t *shardTerm, lt *term, running context.Context) bool {
	c := m.c
	informers := c.shardInformers(t.r, m.notHonoured(t.r))
	if err := c.handle(informers, t.w, m.inf.watch); err != nil {
		c.tel.log.ErrorContext(m.ctx, "starting a shard's informers", "shard", t.r.String(), "error", err.Error())
		t.w.stopTaking()
		lt.release()
		return false
	}
	t.w.Store = informers[0].GetIndexer()
	m.Mu.Lock()
	t.Informers = informers
	m.Mu.Unlock()
	syncing, stopSyncing := context.WithCancel(m.stopping)
	defer stopSyncing()
	go func() {
		select {
		case <-lt.lost:
		case <-t.asked:
		case <-syncing.Done():
		}
		stopSyncing()
	}()
	if m.inf.start(running, syncing, informers) {
		t.Synced.Store(true)
		m.markSynced()
	}
	return true
}

// end ends a term, once its workers have returned: it drops what the
// controller keeps of each key of the term (forgetKeys), and tells the
// manager.
func (m *ShardManager) end(t *shardTerm) {
	t.w.Later.Stop()
	m.forgetKeys(t.w)
	close(t.over)
	m.ended <- t.r.Index
}

// forgetKeys drops what the controller keeps of each key of a term that
// has ended, once its workers have returned: its writes and its backoff,
// which another replica's term of the shard makes stale; and whatever is
// left in its queue, so the queue's depth goes back to none.
func (m *ShardManager) forgetKeys(w *Work) {
	if w.Store != nil {
		for _, k := range w.Store.ListKeys() {
			m.c.Versions.forget(k)
			m.c.retry.Forget(k)
		}
	}
	for w.Q.Len() > 0 {
		item, _ := w.Q.Get()
		w.Q.Done(item.Key)
	}
}

// ask ends the term as a handover does: asked for by another replica, or
// by the manager.
func (t *shardTerm) ask() { t.askOnce.Do(func() { close(t.asked) }) }

// forget drops the i-th shard's term, which has ended.
func (m *ShardManager) forget(i int) {
	m.Mu.Lock()
	delete(m.Terms, i)
	m.Mu.Unlock()
	m.markSynced()
}

// current is the terms running or ending now.
func (m *ShardManager) current() []*shardTerm {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	return slices.Collect(maps.Values(m.Terms))
}

// awaitTerms waits for every term to end, once shutdown has begun.
func (m *ShardManager) awaitTerms() {
	for _, t := range m.current() {
		<-t.over
	}
}

// stopAll ends every term, as shutdown does, and returns once they have
// ended.
func (m *ShardManager) stopAll() {
	for _, t := range m.current() {
		t.ask()
		<-t.over
	}
}

// markSynced makes Synced healthy when the caches of every shard this
// replica holds have synced, holding none included.
func (m *ShardManager) markSynced() {
	m.Mu.Lock()
	defer m.Mu.Unlock()
	for i, t := range m.Terms {
		if !t.Synced.Load() {
			m.c.Ready.MarkUnhealthy(fmt.Errorf("kube: controller %s: the caches of shard %s haven't synced", m.c.name, shard.NewRange(i, len(m.electors))))
			return
		}
	}
	m.c.Ready.MarkHealthy()
}

// notHonoured returns what the shard's filter calls when the API server
// sends an object of another shard: it doesn't filter by shard, such as
// without the ShardedListAndWatch feature gate. It says so once.
func (m *ShardManager) notHonoured(r shard.Range) func() {
	return func() {
		m.honoured.Do(func() {
			m.c.tel.log.WarnContext(m.ctx, "the API server doesn't filter lists and watches by shard: this replica receives every shard's objects and keeps only its own",
				"shard", r.String(), "featureGate", "ShardedListAndWatch")
		})
	}
}

// shardInformers returns the informers of r's objects, in informers'
// order: the resource's with r's selector on ShardBy's field; each owned
// resource's with the same selector by namespace, and by UID, which the
// API server can't filter by owner, all of them. Each keeps only r's
// objects, whatever the API server sends: an owned object is r's when its
// controller owner is.
func (c *Controller) shardInformers(r shard.Range, foreign func()) []toolscache.SharedIndexInformer {
	ns, by := c.settings.Namespace, c.settings.ShardBy
	field := func(o metav1.Object) (string, bool) { return string(o.GetUID()), true }
	ownerField := c.ownerUID
	if by == ShardByNamespace {
		field = func(o metav1.Object) (string, bool) { return o.GetNamespace(), true }
		ownerField = field
	}
	res := c.API.Objects(c.gvr, ns)
	list, watch := cache.Selecting(c.watched[0], res.List, res.Watch)
	lw := &shard.ListWatch{
		List:     list,
		Watch:    watch,
		Filter:   shard.Filter{Range: r, Key: field, Foreign: foreign},
		Selector: r.Selector(string(by)),
	}
	infs := []toolscache.SharedIndexInformer{shardInformer(lw, c.API.Dynamic, c.gvr, &cache.Object{}, c.settings.Resync, c.Indexers())}
	for i, gvr := range c.owned {
		md := c.API.Metadata.Resource(gvr).Namespace(ns)
		list, watch := cache.Selecting(c.watched[1+i], md.List, md.Watch)
		lw := &shard.ListWatch{
			List:   list,
			Watch:  watch,
			Filter: shard.Filter{Range: r, Key: ownerField, Foreign: func() {}},
		}
		if by == ShardByNamespace {
			lw.Selector, lw.Filter.Foreign = r.Selector(string(by)), foreign
		}
		inf := shardInformer(lw, c.API.Metadata, gvr, &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
		lw.Known = func(obj any) (any, bool) {
			o, ok, err := inf.GetStore().Get(obj)
			return o, ok && err == nil
		}
		infs = append(infs, inf)
	}
	return infs
}

// shardInformer is an informer of what lw lists and watches, through
// client, with indexers.
func shardInformer(lw *shard.ListWatch, client any, gvr schema.GroupVersionResource, example runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return cache.NewInformer(toolscache.ListWatch{ListWithContextFunc: lw.ListWithContext, WatchFuncWithContext: lw.WatchWithContext}, client, gvr, example, resync, indexers)
}

// ownerUID is the UID of o's controller owner when it is of the
// controller's kind: the field an owned object's shard is hashed from.
func (c *Controller) ownerUID(o metav1.Object) (string, bool) {
	if ref := c.controllerRef(o); ref != nil {
		return string(ref.UID), true
	}
	return "", false
}

// guardOff is the WARN record of a replica with one shard that may not
// list the Leases: it can't see a shard's Lease still held.
const guardOff = "this replica may not list the Leases: a rollout from several shards back to one can have two writers"

// shardLeasesHeld returns what reports whether a held Lease of c's shards
// keeps a replica with one shard from the one Lease: when Settings.Shards
// goes back to 1, the old replicas' shards' Leases, until they are
// released or expire. It lists the Leases in the Lease's namespace. A list
// this replica may not make guards nothing: only a sharded controller
// needs list on Leases, so a controller that never ran sharded has no
// shards' Leases; it says so once, with a WARN record naming the missing
// rule, since a rollout from shards back to one without it can have two
// writers. A list that fails otherwise keeps the replica from the Lease
// until the next try.
func shardLeasesHeld(c *Controller) func(ctx context.Context) bool {
	foreign := shard.NewForeign(c.name, string(c.settings.ShardBy), c.settings.LeaderElection.LeaseDuration)
	var warned sync.Once
	return func(ctx context.Context) bool {
		le := c.settings.LeaderElection
		ctx, cancel := context.WithTimeout(ctx, le.RenewDeadline)
		defer cancel()
		list, err := c.API.Leases.Leases(le.Namespace).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err):
			warned.Do(func() {
				c.tel.log.WarnContext(ctx, guardOff, "missing", "list on leases.coordination.k8s.io in "+le.Namespace, "error", err.Error())
			})
			return false
		case err != nil:
			klog.FromContext(ctx).V(4).Info("Failed to list the leases", "err", err)
			return true
		}
		return foreign.Blocked(list.Items, 1)[0]
	}
}
