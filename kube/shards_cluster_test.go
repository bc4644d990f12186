package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/control"
	"github.com/z5labs/humus/kube/internal/shard"
)

// The sharded replica processes report on their stdout each reconcile, and
// the objects in the caches of each shard they hold.
const (
	procReconciled = "replica process: reconciled"
	procShards     = "replica process: shards"
)

// shardRBAC is what a sharded controller needs on top of controllerRBAC:
// to list the Leases, to share them out.
func shardRBAC(ns string) clustertest.Grant {
	return clustertest.Grant{Namespace: ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list"}},
	}}
}

// reportReconciles prints each reconcile's object, start and end.
func reportReconciles(rec Reconciler[cacheSpec, cacheStatus]) Reconciler[cacheSpec, cacheStatus] {
	return ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
		start := time.Now()
		defer func() { fmt.Printf("%s %s %d %d\n", procReconciled, m.Name, start.UnixNano(), time.Now().UnixNano()) }()
		return rec.Reconcile(ctx, m)
	})
}

// reportShards prints, every 200ms, each synced shard the controller holds
// with the number of objects in its resource's cache and its owned one's:
// index:objects:owned.
func reportShards(ctx context.Context, ctrl *Controller) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		m, ok := ctrl.engine.Leader.(*control.ShardManager)
		if !ok {
			continue
		}
		var held []string
		m.Mu.Lock()
		for i, t := range m.Terms {
			if t.Synced.Load() && len(t.Informers) == 2 {
				held = append(held, fmt.Sprintf("%d:%d:%d", i, len(t.Informers[0].GetStore().ListKeys()), len(t.Informers[1].GetStore().ListKeys())))
			}
		}
		m.Mu.Unlock()
		slices.Sort(held)
		fmt.Printf("%s %s\n", procShards, strings.Join(held, " "))
	}
}

// reconcileRecord is one reconcile a replica reported.
type reconcileSpan struct {
	replica    string
	start, end time.Time
}

// reconciles is every reconcile the replicas reported, by object name.
func reconciles(reps []*replicaProc) map[string][]reconcileSpan {
	out := map[string][]reconcileSpan{}
	for _, p := range reps {
		for line := range strings.Lines(p.out.String()) {
			rest, ok := strings.CutPrefix(line, procReconciled+" ")
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			if len(f) != 3 {
				continue
			}
			start, err1 := strconv.ParseInt(f[1], 10, 64)
			end, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			out[f[0]] = append(out[f[0]], reconcileSpan{replica: p.name, start: time.Unix(0, start), end: time.Unix(0, end)})
		}
	}
	return out
}

// cachedShards is what a replica last reported of its shards' caches: each
// shard's objects and owned objects.
func cachedShards(p *replicaProc) map[int][2]int {
	var last string
	for line := range strings.Lines(p.out.String()) {
		if rest, ok := strings.CutPrefix(line, procShards); ok {
			last = rest
		}
	}
	out := map[int][2]int{}
	for f := range strings.FieldsSeq(last) {
		var i, objects, owned int
		if _, err := fmt.Sscanf(f, "%d:%d:%d", &i, &objects, &owned); err == nil {
			out[i] = [2]int{objects, owned}
		}
	}
	return out
}

// shardHolders reads the holder of each of the n shards' Leases of the
// test controller ("" for none), by uid.
func shardHolders(ctx context.Context, w *workload, n int) ([]string, error) {
	return shardHoldersBy(ctx, w, ShardByUID, n)
}

// shardHoldersBy reads the holder of each of the n shards' Leases of the
// test controller, by key ("" for none).
func shardHoldersBy(ctx context.Context, w *workload, by ShardKey, n int) ([]string, error) {
	holders := make([]string, n)
	leases, err := w.kube.CoordinationV1().Leases(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, l := range leases.Items {
		if i, k, key, ok := shard.ParseLease(testSettings().Name, l.Name); ok && k == n && key == string(by) && l.Spec.HolderIdentity != nil {
			holders[i] = *l.Spec.HolderIdentity
		}
	}
	return holders, nil
}

// awaitShares waits until the n shards are held as want says: how many
// each replica holds. It returns the holders.
func awaitShares(t *testing.T, w *workload, n int, want map[string]int, within time.Duration) []string {
	t.Helper()
	var holders []string
	clustertest.Eventually(t, within, func(ctx context.Context) error {
		var err error
		if holders, err = shardHolders(ctx, w, n); err != nil {
			return err
		}
		got := map[string]int{}
		for _, h := range holders {
			got[h]++
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("the shards' holders are %q, want %v of each", holders, want)
		}
		return nil
	})
	return holders
}

// shardsOfObjects lists the Memcacheds, and returns each one's shard of n by
// its UID.
func shardsOfObjects(t *testing.T, w *workload, n int) map[string]int {
	t.Helper()
	list, err := w.admin.Resource(clusterCaches.GVR()).Namespace(w.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, u := range list.Items {
		out[u.GetName()] = shard.Of(shard.Hash(string(u.GetUID())), n)
	}
	return out
}

// resizeAll sets every Memcached's size, a few at once.
func resizeAll(t *testing.T, w *workload, n int, size int64) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)
	eachCache(t, n, func(i int) error {
		_, err := w.admin.Resource(clusterCaches.GVR()).Namespace(w.ns).Patch(t.Context(), fmt.Sprintf("m-%d", i), types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// awaitSettled waits until every one of the n Memcacheds has the
// controller's finalizer and reports size ready replicas: its Deployment
// was applied with that size.
func awaitSettled(t *testing.T, w *workload, n int, size int64, within time.Duration) {
	t.Helper()
	clustertest.Eventually(t, within, func(ctx context.Context) error {
		list, err := w.admin.Resource(clusterCaches.GVR()).Namespace(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		settled := 0
		for _, u := range list.Items {
			ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			if ready == size && slices.Contains(u.GetFinalizers(), "cache.example.com/finalizer") {
				settled++
			}
		}
		if settled != n {
			return fmt.Errorf("%d of %d Memcacheds settled at size %d", settled, n, size)
		}
		return nil
	})
}

// checkCaches checks that each replica's caches hold exactly the objects,
// and the Deployments, of the shards it holds.
func checkCaches(t *testing.T, w *workload, n int, reps []*replicaProc) {
	t.Helper()
	perShard := map[int]int{}
	for _, i := range shardsOfObjects(t, w, n) {
		perShard[i]++
	}
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		holders, err := shardHolders(ctx, w, n)
		if err != nil {
			return err
		}
		for _, p := range reps {
			got := cachedShards(p)
			want := map[int][2]int{}
			for i, h := range holders {
				if h == p.name {
					want[i] = [2]int{perShard[i], perShard[i]}
				}
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("%s caches (shard: objects, Deployments) %v, want %v", p.name, got, want)
			}
		}
		return nil
	})
}

// checkOneWriterAtATime checks that no object was reconciled by two
// replicas at once, and returns how many objects each replica reconciled.
func checkOneWriterAtATime(t *testing.T, spans map[string][]reconcileSpan) map[string]int {
	t.Helper()
	by := map[string]int{}
	for name, ss := range spans {
		slices.SortFunc(ss, func(a, b reconcileSpan) int { return a.start.Compare(b.start) })
		seen := map[string]bool{}
		for i, s := range ss {
			if !seen[s.replica] {
				seen[s.replica] = true
				by[s.replica]++
			}
			for _, o := range ss[:i] {
				if o.replica != s.replica && o.end.After(s.start) {
					t.Errorf("%s was reconciled by %s from %s to %s and by %s from %s", name, o.replica, stamp(o.start), stamp(o.end), s.replica, stamp(s.start))
				}
			}
		}
	}
	return by
}

// TestClusterFaultShardsWithTheAPIServersFilter shares 6 shards of 600
// Memcacheds among 3 replica processes, with the API server filtering
// their lists and watches (ShardedListAndWatch).
func TestClusterFaultShardsWithTheAPIServersFilter(t *testing.T) {
	w := newWorkload(t)
	w.c.FeatureGates(t, "ShardedListAndWatch=true")
	testShards(t, w)
}

// TestClusterFaultShardsFilteredByTheReplicas is the same without the
// feature gate: the API server sends every object to every replica, and
// each keeps its shards' only.
func TestClusterFaultShardsFilteredByTheReplicas(t *testing.T) {
	testShards(t, newWorkload(t))
}

// testShards: 3 replicas share 6 shards, 2 each, before 600 Memcacheds
// are created: every one settles, reconciled by the replica holding its
// shard only, and each replica's caches hold its shards' objects and
// Deployments only. One replica SIGKILLed: its shards are taken by the
// other two within LeaseDuration, RetryPeriod and a second, and a change
// to every object converges. A fourth replica started: it asks for its
// share, the others hand it over, and a change to every object converges
// again. Throughout, no object is reconciled by two replicas at once.
func testShards(t *testing.T, w *workload) {
	const (
		objects = 600 // about 100 a shard: enough to tell every shard's caches apart
		shards  = 6
	)
	le := testSettings().LeaderElection
	l := newProcLauncher(w, le, 0)
	l.shards = shards
	reps := []*replicaProc{l.start("r-1"), l.start("r-2"), l.start("r-3")}
	awaitShares(t, w, shards, map[string]int{"r-1": 2, "r-2": 2, "r-3": 2}, 2*time.Minute)

	createCaches(t, w, objects)
	began := time.Now()
	awaitSettled(t, w, objects, 1, 5*time.Minute)
	t.Logf("3 replicas settled %d objects in %s", objects, time.Since(began).Round(time.Millisecond))
	checkEachObjectReconciledByItsShardsHolder(t, w, shards, reps)
	checkCaches(t, w, shards, reps)

	// SIGKILL one: its shards move to the other two.
	killed := reps[2].signal(t, syscall.SIGKILL)
	bound := le.LeaseDuration + le.RetryPeriod + time.Second
	awaitShares(t, w, shards, map[string]int{"r-1": 3, "r-2": 3}, bound+10*time.Second)
	if took := time.Since(killed); took > bound {
		t.Errorf("the killed replica's shards were taken %s after the SIGKILL, want within %s", took.Round(time.Millisecond), bound)
	} else {
		t.Logf("the killed replica's shards were taken within %s of the SIGKILL (bound %s)", took.Round(time.Millisecond), bound)
	}
	resizeAll(t, w, objects, 2)
	awaitSettled(t, w, objects, 2, 5*time.Minute)
	checkCaches(t, w, shards, reps[:2])

	// A new replica: it gets its share, handed over.
	reps = append(reps, l.start("r-4"))
	began = time.Now()
	awaitShares(t, w, shards, map[string]int{"r-1": 2, "r-2": 2, "r-4": 2}, 2*time.Minute)
	t.Logf("the shards were shared again %s after the fourth replica started", time.Since(began).Round(time.Millisecond))
	resizeAll(t, w, objects, 3)
	awaitSettled(t, w, objects, 3, 5*time.Minute)
	checkCaches(t, w, shards, []*replicaProc{reps[0], reps[1], reps[3]})

	by := checkOneWriterAtATime(t, reconciles(reps))
	t.Logf("objects reconciled by each replica: %v", by)
	if by["r-4"] == 0 {
		t.Error("the fourth replica reconciled nothing")
	}

	checkEachReleasesItsShardsOnSIGTERM(t, w, shards, []*replicaProc{reps[0], reps[1], reps[3]})
}

// checkEachObjectReconciledByItsShardsHolder checks that each object was
// reconciled by one replica, the holder of its shard's Lease.
func checkEachObjectReconciledByItsShardsHolder(t *testing.T, w *workload, shards int, reps []*replicaProc) {
	t.Helper()
	holders, err := shardHolders(t.Context(), w, shards)
	if err != nil {
		t.Fatal(err)
	}
	spans := reconciles(reps)
	for name, i := range shardsOfObjects(t, w, shards) {
		replicas := map[string]bool{}
		for _, s := range spans[name] {
			replicas[s.replica] = true
		}
		if len(replicas) != 1 || !replicas[holders[i]] {
			t.Errorf("%s, of shard %d held by %s, was reconciled by %v", name, i, holders[i], slices.Sorted(maps.Keys(replicas)))
		}
	}
}

// checkEachReleasesItsShardsOnSIGTERM: on SIGTERM each replica releases
// its shards and exits 0, with no goroutine left (exit 3 otherwise).
func checkEachReleasesItsShardsOnSIGTERM(t *testing.T, w *workload, shards int, running []*replicaProc) {
	t.Helper()
	for _, p := range running {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range running {
		if code := p.exited(t, 30*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", p.name, code)
		}
	}
	if holders, err := shardHolders(t.Context(), w, shards); err != nil {
		t.Fatal(err)
	} else if !slices.Equal(holders, make([]string, shards)) {
		t.Errorf("the shards' holders after every replica exited = %q, want none: each released", holders)
	}
}
