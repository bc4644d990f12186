package kube

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// With Settings.Shards above 1, the objects are divided into that many
// ranges of their hash (shard.go), each with a Lease of its own, and the
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
//   - Each shard held is a term of leading, with the rules of lease.go: its
//     writes are made under its own proof, and a shard whose Lease can't be
//     proven stops its workers by the lost deadline. A replica that loses a
//     shard, or every shard, keeps running and takes shards again.
//   - The Lease names carry the shard count. A shard isn't taken while a
//     Lease of another count, or the one Lease of an unsharded controller,
//     that covers any of its objects is held, and a replica that finds one
//     just after taking a shard gives it back before reconciling: so a
//     rollout that changes Settings.Shards never has two writers for one
//     object.
//   - The replica lists and watches each shard it holds with the shard's
//     selector, from when it takes it: it caches its shards' objects only,
//     and a shard taken over starts cold.

// annotationWantedBy, on a shard's Lease, names the replica that asked its
// holder for it.
const annotationWantedBy = "kube.humus.z5labs.dev/wanted-by"

// shardState is what one look at the Leases says of one shard, for plan.
type shardState struct {
	holder   string // "" when the Lease is free by this replica's observation
	wantedBy string
	free     time.Time // when this replica first saw the Lease free as it is
	blocked  bool      // a held Lease of another shard count covers some of its objects
	running  bool      // this replica has a term of the shard, running or ending
}

// plan says how many more shards this replica (self) takes now, which
// free ones, in the order to try them (more than it takes: another
// replica can take one first), and which shard's holder it asks for one
// (-1: none), from one look at the Leases. wantedFor is how long a free
// Lease wanted by another replica is left to it.
func plan(self string, shards []shardState, now time.Time, wantedFor time.Duration) (more int, take []int, ask int) {
	members := map[string]int{} // each member's shards
	mine := 0
	for _, s := range shards {
		if s.running {
			mine++
			continue
		}
		if s.holder != "" {
			members[s.holder]++
		}
		if s.wantedBy != "" {
			if _, ok := members[s.wantedBy]; !ok {
				members[s.wantedBy] = 0
			}
		}
	}
	members[self] = mine
	n, r := len(shards), len(members)
	most, least := (n+r-1)/r, n/r

	var wanted, others []int
	for i, s := range shards {
		switch {
		case s.running || s.holder != "" || s.blocked:
		case s.wantedBy == self:
			wanted = append(wanted, i)
		case s.wantedBy == "" || now.Sub(s.free) >= wantedFor:
			others = append(others, i)
		}
	}
	rand.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	take = append(wanted, others...)
	more = min(max(most-mine, 0), len(take))
	if mine == 0 {
		// A replica holding none takes one first, and the rest of its
		// share once it sees the Leases again: replicas that start
		// together see each other by then, and share the shards without
		// handing any over.
		more = min(more, 1)
	}
	if more > 0 {
		return more, take, -1
	}
	if mine >= least {
		return 0, nil, -1
	}
	for _, s := range shards {
		if s.wantedBy == self {
			return 0, nil, -1 // asked already
		}
	}
	// Ask the member holding the most, if it holds more than its share.
	donor, held := "", least
	for m, k := range members {
		if m == self || k <= least {
			continue
		}
		if k > held || (k == held && m < donor) {
			donor, held = m, k
		}
	}
	if donor == "" {
		return 0, nil, -1
	}
	for i, s := range shards {
		if s.holder == donor && s.wantedBy == "" {
			return 0, nil, i
		}
	}
	return 0, nil, -1
}

// shardManager runs a sharded controller's terms: one for each shard this
// replica holds.
type shardManager struct {
	c         *Controller
	ctx       context.Context // Serve's
	stopping  context.Context
	informing context.Context
	watch     *servedWatch
	running   *sync.WaitGroup // the informers'
	electors  []*elector      // one for each shard, kept across its terms
	foreign   *foreignLeases
	ended     chan int // each term's shard, once it has ended
	// workerTokens are the replica's Settings.Workers, shared by the shards
	// it holds: each shard runs that many workers, and a reconcile takes a
	// token.
	workerTokens chan struct{}
	honoured     sync.Once
	refusal      refusal // of the Lease list's answers

	mu      sync.Mutex
	terms   map[int]*shardTerm
	closed  bool           // Shutdown waits for the workers: no more start
	workers sync.WaitGroup // every term's
}

// seenLease is when this replica first saw a Lease's version.
type seenLease struct {
	version string
	at      time.Time
}

// shardTerm is one term of holding one shard.
type shardTerm struct {
	sh        *shard
	informers []cache.SharedIndexInformer
	el        *elector
	synced    atomic.Bool
	asked     chan struct{} // closed when another replica asks for the shard, or the term is to end
	askOnce   sync.Once
	over      chan struct{} // closed when the term has ended
	workers   sync.WaitGroup
	finished  chan struct{} // closed once the workers have returned
}

// serveShards runs steps 4 and 5 of a sharded controller: it takes shards
// and reconciles each while holding it, until shutdown begins.
func (c *Controller) serveShards(ctx, stopping, informing context.Context, watch *servedWatch, running *sync.WaitGroup) error {
	n := c.settings.Shards
	m := &shardManager{
		c: c, ctx: ctx, stopping: stopping, informing: informing, watch: watch, running: running,
		foreign: newForeignLeases(c), ended: make(chan int, n), terms: map[int]*shardTerm{},
		workerTokens: make(chan struct{}, c.settings.Workers),
	}
	campaigning := klog.NewContext(context.WithoutCancel(ctx), c.tel.logr)
	for i := range n {
		el := c.newElector(campaigning)
		el.name = shardLeaseName(c.name, i, n)
		el.log = klog.FromContext(campaigning).WithValues("lock", c.settings.LeaderElection.Namespace+"/"+el.name)
		m.electors = append(m.electors, el)
	}
	idle := m.waitWorkers
	c.idle.Store(&idle)
	c.shards.Store(m)
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
// read or write is an error.
func (m *shardManager) look() (time.Time, error) {
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
	more, take, ask := plan(le.Identity, states, time.Now(), le.LeaseDuration)
	var taken []int
	for _, i := range take {
		if len(taken) == more {
			break
		}
		el := m.electors[i]
		if el.take(m.campaigning()) {
			taken = append(taken, i)
		}
		if err := el.deniedErr(); err != nil {
			return next, err
		}
	}
	if len(taken) > 0 {
		// Of two replicas with different shard counts taking overlapping
		// shards at once, at least one sees the other's Lease now.
		leases, ok, err := m.list()
		if err != nil {
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

func (m *shardManager) campaigning() context.Context {
	return klog.NewContext(context.WithoutCancel(m.ctx), m.c.tel.logr)
}

// list lists the Leases in the Lease's namespace. It returns false and no
// error when the list failed and may succeed next time.
func (m *shardManager) list() ([]coordinationv1.Lease, bool, error) {
	le := m.c.settings.LeaderElection
	ctx, cancel := context.WithTimeout(m.campaigning(), le.RenewDeadline)
	defer cancel()
	list, err := m.c.clients.leases.Leases(le.Namespace).List(ctx, metav1.ListOptions{})
	switch {
	case m.refusal.final(err, incurable(err, false)):
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
func (m *shardManager) states(leases []coordinationv1.Lease) (states []shardState, expiry time.Time) {
	byName := map[string]*coordinationv1.Lease{}
	for i := range leases {
		byName[leases[i].Name] = &leases[i]
	}
	blocked := m.blockedShards(leases)
	m.mu.Lock()
	defer m.mu.Unlock()
	states = make([]shardState, len(m.electors))
	for i, el := range m.electors {
		s := &states[i]
		s.blocked = blocked[i]
		if _, ok := m.terms[i]; ok {
			s.running = true
			continue
		}
		el.saw(byName[el.name])
		if free, at := el.free(); !free {
			s.holder = el.holder() // the Lease may be missing, and count as held still
			if expiry.IsZero() || at.Before(expiry) {
				expiry = at
			}
		}
		s.free = el.seenAt
		if el.seen != nil {
			s.wantedBy = el.seen.Annotations[annotationWantedBy]
		}
	}
	return states, expiry
}

// blockedShards says which shards a held Lease of another shard count
// covers some of: the unsharded controller's one Lease, named Name,
// covers all.
func (m *shardManager) blockedShards(leases []coordinationv1.Lease) map[int]bool {
	return m.foreign.blocked(leases, len(m.electors))
}

// foreignLeases are the Leases of a controller's other shard counts, as one
// replica sees them: each version from when it first saw it, by its own
// clock, as an elector sees its own Lease.
type foreignLeases struct {
	name     string        // the controller's
	duration time.Duration // a Lease's, when it doesn't say
	seen     map[string]seenLease
}

func newForeignLeases(c *Controller) *foreignLeases {
	return &foreignLeases{name: c.name, duration: c.settings.LeaderElection.LeaseDuration, seen: map[string]seenLease{}}
}

// blocked says which of n shards a held Lease among leases, of a shard
// count other than n, covers some of: the unsharded controller's one
// Lease, named Name, covers all.
func (f *foreignLeases) blocked(leases []coordinationv1.Lease, n int) map[int]bool {
	blocked := map[int]bool{}
	now := time.Now()
	seen := map[string]bool{}
	for _, l := range leases {
		j, k, ok := parseShardLease(f.name, l.Name)
		if l.Name == f.name {
			j, k, ok = 0, 1, true
		}
		if !ok || k == n {
			continue
		}
		seen[l.Name] = true
		if s, ok := f.seen[l.Name]; !ok || s.version != l.ResourceVersion {
			f.seen[l.Name] = seenLease{version: l.ResourceVersion, at: now}
		}
		if !heldAt(&l, f.seen[l.Name].at, now, f.duration) {
			continue
		}
		theirs := newShardRange(j, k)
		for i := range n {
			if overlaps(newShardRange(i, n), theirs) {
				blocked[i] = true
			}
		}
	}
	for name := range f.seen {
		if !seen[name] {
			delete(f.seen, name)
		}
	}
	return blocked
}

// heldAt reports whether a Lease first seen as it is at seen is held at
// now: it names a holder, and hasn't gone unrenewed for its duration.
func heldAt(l *coordinationv1.Lease, seen, now time.Time, fallback time.Duration) bool {
	if ptr.Deref(l.Spec.HolderIdentity, "") == "" {
		return false
	}
	d := fallback
	if s := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); s > 0 {
		d = time.Duration(s) * time.Second
	}
	return now.Before(seen.Add(d))
}

// askFor asks the holder of the i-th shard for it: an update of its Lease,
// conditioned on the version this replica saw, naming this replica.
func (m *shardManager) askFor(i int) {
	el := m.electors[i]
	if el.seen == nil {
		return
	}
	lease := el.seen.DeepCopy()
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[annotationWantedBy] = el.identity
	ctx, cancel := context.WithTimeout(m.campaigning(), el.timing.RenewDeadline)
	defer cancel()
	if _, err := el.leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		el.log.V(4).Info("Failed to ask for the shard", "err", err)
		return
	}
	el.log.Info("Asked the holder for the shard", "holder", ptr.Deref(lease.Spec.HolderIdentity, ""))
}

// start begins a term of the i-th shard, whose Lease this replica has just
// taken: it renews the Lease, starts the shard's informers and, once they
// have synced, its workers.
func (m *shardManager) start(i int) {
	c := m.c
	sh := c.newShard(newShardRange(i, len(m.electors)))
	sh.workers = m.workerTokens
	t := &shardTerm{sh: sh, el: m.electors[i], asked: make(chan struct{}), over: make(chan struct{}), finished: make(chan struct{})}
	t.el.asked = t.ask
	m.mu.Lock()
	m.terms[i] = t
	m.mu.Unlock()
	m.markSynced()
	go m.run(t)
}

// run is one term of a shard, until it is lost, handed to the replica
// that asked for it, or shutdown begins.
func (m *shardManager) run(t *shardTerm) {
	c, el, sh := m.c, t.el, t.sh
	le := c.settings.LeaderElection
	defer func() {
		sh.later.stop()
		m.forgetKeys(sh)
		close(t.over)
		m.ended <- sh.r.index
	}()

	// Renew the Lease from now on; a renewal that finds the shard wanted by
	// another replica closes asked.
	holding, stopHolding := context.WithCancel(m.campaigning())
	defer stopHolding()
	held := make(chan struct{})
	go func() {
		defer close(held)
		el.hold(holding)
	}()
	lost := c.watchProof(el, held, t.over)

	// The shard's caches, from cold.
	informing, stopInformers := context.WithCancel(m.informing)
	defer stopInformers()
	informers, err := c.informers(sh, m.watch, m.notHonoured(sh.r))
	if err != nil {
		c.tel.log.ErrorContext(m.ctx, "starting a shard's informers", "shard", sh.r.String(), "error", err.Error())
		sh.stopTaking()
		stopHolding()
		<-held
		c.release(el)
		return
	}
	sh.store = informers[0].GetIndexer()
	m.mu.Lock()
	t.informers = informers
	m.mu.Unlock()
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		m.running.Go(func() { inf.RunWithContext(informing) })
		synced = append(synced, inf.HasSynced)
	}
	syncing, stopSyncing := context.WithCancel(m.stopping)
	go func() {
		select {
		case <-lost:
		case <-t.asked:
		case <-syncing.Done():
		}
		stopSyncing()
	}()
	if cache.WaitForNamedCacheSyncWithContext(syncing, synced...) {
		t.synced.Store(true)
		m.markSynced()
	}
	stopSyncing()

	// Lead the shard: the reconciles of this term end with it.
	term, endTerm := context.WithCancel(c.work)
	defer endTerm()
	work := withProof(klog.NewContext(term, c.tel.logr), &proof{elector: el, renewDeadline: le.RenewDeadline})
	if t.synced.Load() && !m.startWorkers(t, work) {
		sh.stopTaking()
	}
	go func() {
		t.workers.Wait()
		close(t.finished)
	}()

	select {
	case <-m.stopping.Done():
	case <-t.asked:
	case <-lost:
	}
	sh.stopTaking()
	select {
	case <-lost:
	default:
		select {
		case <-t.finished:
			m.handOver(t, stopHolding, held)
			return
		case <-lost:
		}
	}

	// The Lease can't be proven: stop at once, and end the term by the
	// lost deadline whether or not every Reconciler has.
	endTerm()
	stopHolding()
	c.clients.abort()
	c.tel.log.WarnContext(m.ctx, "lost the lease", "lease", el.describe(), "renewed", el.renewedAt(), "shard", sh.r.String())
	deadline := time.NewTimer(time.Until(el.renewedAt().Add(lostDeadline(le))))
	defer deadline.Stop()
	select {
	case <-t.finished:
	case <-deadline.C:
		c.tel.log.ErrorContext(m.ctx, "a reconcile ignored its cancelled context: the shard isn't taken again until it returns", "lease", el.describe())
		<-t.finished
	}
	<-held
}

// forgetKeys drops what the controller keeps of each key of a term that
// has ended, once its workers have returned: its writes and its backoff,
// which another replica's term of the shard makes stale; and whatever is
// left in its queue, so the queue's depth goes back to none.
func (m *shardManager) forgetKeys(sh *shard) {
	if sh.store != nil {
		for _, k := range sh.store.ListKeys() {
			m.c.versions.forget(k)
			m.c.retry.Forget(k)
		}
	}
	for sh.q.Len() > 0 {
		item, _ := sh.q.Get()
		sh.q.Done(item.Key)
	}
}

// ask ends the term as a handover does: asked for by another replica, or
// by the manager.
func (t *shardTerm) ask() { t.askOnce.Do(func() { close(t.asked) }) }

// handOver ends a term whose reconciles in flight have finished, on
// shutdown or because another replica asked for the shard: it stops
// renewing the Lease and releases it.
func (m *shardManager) handOver(t *shardTerm, stopHolding context.CancelFunc, held <-chan struct{}) {
	stopHolding()
	<-held
	m.c.release(t.el)
	if m.stopping.Err() == nil {
		t.el.log.Info("Released the shard", "wantedBy", t.el.seen.Annotations[annotationWantedBy])
	}
}

// startWorkers starts the term's workers, unless Shutdown is waiting for
// every worker already.
func (m *shardManager) startWorkers(t *shardTerm, ctx context.Context) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	t.sh.lead(m.c.settings.LeaderElection)
	for range m.c.settings.Workers {
		t.workers.Add(1)
		m.workers.Go(func() {
			defer t.workers.Done()
			m.c.worker(ctx, t.sh)
		})
	}
	return true
}

// waitWorkers is Shutdown's wait for every term's workers, once it has
// cancelled their reconciles: no worker starts after it.
func (m *shardManager) waitWorkers() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.workers.Wait()
}

// forget drops the i-th shard's term, which has ended.
func (m *shardManager) forget(i int) {
	m.mu.Lock()
	delete(m.terms, i)
	m.mu.Unlock()
	m.markSynced()
}

// current is the terms running or ending now.
func (m *shardManager) current() []*shardTerm {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Values(m.terms))
}

// awaitTerms waits for every term to end, once shutdown has begun.
func (m *shardManager) awaitTerms() {
	for _, t := range m.current() {
		<-t.over
	}
}

// stopAll ends every term, as shutdown does, and returns once they have
// ended.
func (m *shardManager) stopAll() {
	for _, t := range m.current() {
		t.ask()
		<-t.over
	}
}

// markSynced makes Synced healthy when the caches of every shard this
// replica holds have synced, holding none included.
func (m *shardManager) markSynced() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, t := range m.terms {
		if !t.synced.Load() {
			m.c.synced.MarkUnhealthy(fmt.Errorf("kube: controller %s: the caches of shard %s haven't synced", m.c.name, newShardRange(i, len(m.electors))))
			return
		}
	}
	m.c.synced.MarkHealthy()
}

// notHonoured returns what the shard's filter calls when the API server
// sends an object of another shard: it doesn't filter by shard, such as
// without the ShardedListAndWatch feature gate. It says so once.
func (m *shardManager) notHonoured(r shardRange) func() {
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
func (c *Controller) shardInformers(r shardRange, foreign func()) []cache.SharedIndexInformer {
	ns, by := c.settings.Namespace, c.settings.ShardBy
	field := func(o metav1.Object) (string, bool) { return string(o.GetUID()), true }
	ownerField := c.ownerUID
	if by == ShardByNamespace {
		field = func(o metav1.Object) (string, bool) { return o.GetNamespace(), true }
		ownerField = field
	}
	res := c.clients.dynamic.Resource(c.gvr).Namespace(ns)
	lw := &listWatch{
		list:     listing(res.List),
		watch:    res.Watch,
		filter:   shardFilter{r: r, key: field, foreign: foreign},
		selector: r.selector(by),
	}
	infs := []cache.SharedIndexInformer{shardInformer(lw, c.clients.dynamic, c.gvr, &unstructured.Unstructured{}, c.settings.Resync)}
	for _, gvr := range c.owned {
		md := c.clients.metadata.Resource(gvr).Namespace(ns)
		lw := &listWatch{
			list:   listing(md.List),
			watch:  md.Watch,
			filter: shardFilter{r: r, key: ownerField, foreign: func() {}},
		}
		if by == ShardByNamespace {
			lw.selector, lw.filter.foreign = r.selector(by), foreign
		}
		inf := shardInformer(lw, c.clients.metadata, gvr, &metav1.PartialObjectMetadata{}, 0)
		lw.known = func(obj any) (any, bool) {
			o, ok, err := inf.GetStore().Get(obj)
			return o, ok && err == nil
		}
		infs = append(infs, inf)
	}
	return infs
}

// shardInformer is an informer of what lw lists and watches, through
// client.
func shardInformer(lw *listWatch, client any, gvr schema.GroupVersionResource, example runtime.Object, resync time.Duration) cache.SharedIndexInformer {
	return newInformer(cache.ListWatch{ListWithContextFunc: lw.ListWithContext, WatchFuncWithContext: lw.WatchWithContext}, client, gvr, example, resync)
}

// ownerUID is the UID of o's controller owner when it is of the
// controller's kind: the field an owned object's shard is hashed from.
func (c *Controller) ownerUID(o metav1.Object) (string, bool) {
	if ref := c.controllerRef(o); ref != nil {
		return string(ref.UID), true
	}
	return "", false
}
