package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus/humustest"

	"github.com/z5labs/humus/kube/internal/elector/electortest"
	"github.com/z5labs/humus/kube/internal/shard"
)

// shardObjects are n Memcacheds in default, m-0 to m-(n-1).
func shardObjects(n int) []runtime.Object {
	objs := make([]runtime.Object, n)
	for i := range objs {
		objs[i] = cacheObject("default", fmt.Sprintf("m-%d", i), 1)
	}
	return objs
}

// shardedController is a controller of 4 shards on f, as replica id,
// recording into tel.
func shardedController(t *testing.T, f *fakeCluster, id string, tel *humustest.Telemetry, rec reconciler) *Controller {
	t.Helper()
	return shardedControllerOf(t, f, id, tel, rec, 20) // every object of a shard in flight at once
}

// shardedControllerOf is shardedController with workers Workers.
func shardedControllerOf(t *testing.T, f *fakeCluster, id string, tel *humustest.Telemetry, rec reconciler, workers int) *Controller {
	t.Helper()
	s := testSettings()
	s.Shards, s.Workers = 4, workers
	s.LeaderElection.Identity = id
	return newTestController(t, f, s, rec, observed(tel))
}

// shardedControllerBy is shardedController dividing the objects by key.
func shardedControllerBy(t *testing.T, f *fakeCluster, id string, by ShardKey, rec reconciler) *Controller {
	t.Helper()
	s := testSettings()
	s.Shards, s.ShardBy, s.Workers = 4, by, 20
	s.LeaderElection.Identity = id
	return newTestController(t, f, s, rec, observed(humustest.NewTelemetry()))
}

// shardHoldersOf is the holder of each of the 4 shards' Leases in f.
func shardHoldersOf(t *testing.T, f *fakeCluster) []string {
	t.Helper()
	holders := make([]string, 4)
	for i := range holders {
		holders[i] = holder(f.Lease(t, "kube-system", shard.LeaseName("memcached-controller", shard.DefaultKey, i, 4)))
	}
	return holders
}

// A replica alone takes every shard, and reconciles each object once, in
// its shard's term: its span carries the shard. client-go's fakes ignore
// the shard selector, as an API server without the feature gate does: the
// replica keeps each shard's objects only, and says so once.
func TestAShardedReplicaAloneTakesEveryShardAndReconcilesEachObjectOnce(t *testing.T) {
	resetErrorBackoff(t) // a shard's term ended before its caches synced reaches HandleError
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, shardObjects(40)...)
		electortest.CheckVersions(f.Kube)
		tel := humustest.NewTelemetry()
		var calls counter
		ctrl := shardedController(t, f, "replica-1", tel, readyReplicas(&calls))
		stop := served(t, ctrl)

		time.Sleep(time.Minute)
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Errorf("the shards' holders = %q, want replica-1 for each", got)
		}
		if err := ctrl.Ready.Healthy(t.Context()); err != nil {
			t.Errorf("Synced with every shard's caches synced: %v", err)
		}
		for i := range 40 {
			if got := calls.Get(fmt.Sprintf("m-%d", i)); got != 1 {
				t.Errorf("m-%d reconciled %d times, want 1", i, got)
			}
		}
		for _, s := range tel.Spans() {
			name := attrStrings(s.Attributes())[AttrObjectName]
			want := shard.NewRange(shard.Of(shard.Hash("uid-"+name), 4), 4).String()
			if got := attrStrings(s.Attributes())[attrShard]; got != want {
				t.Errorf("the span of %s has %s %q, want %q", name, attrShard, got, want)
			}
		}
		warnings := 0
		for _, r := range tel.Records() {
			if strings.HasPrefix(r.Body().AsString(), "the API server doesn't filter lists and watches by shard") {
				warnings++
			}
		}
		if warnings != 1 {
			t.Errorf("warnings that the API server doesn't filter = %d, want 1", warnings)
		}

		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"", "", "", ""}) {
			t.Errorf("the shards' holders after shutdown = %q, want none: each released", got)
		}
		// Each shard's queue reports its oldest waits with its shard, and 0
		// once its term ended.
		oldest, ok := instrumentsOf(t, tel)[p+"queue.oldest_wait"].Data.(metricdata.Gauge[float64])
		if !ok || len(oldest.DataPoints) != 8 {
			t.Fatalf("queue.oldest_wait = %+v, want a point for each shard and priority", oldest)
		}
		for _, dp := range oldest.DataPoints {
			shard, _ := dp.Attributes.Value(attrShard)
			pr, _ := dp.Attributes.Value(attrPriority)
			if dp.Value != 0 || shard.AsString() == "" || pr.AsString() == "" {
				t.Errorf("a queue.oldest_wait point = %v with %v, want 0 with a shard and a priority", dp.Value, dp.Attributes.ToSlice())
			}
		}
	})
}

// A replica that starts after another took every shard asks for its share,
// and is handed it once the reconciles in flight of each shard handed over
// have finished: no object is reconciled by both at once, and each shard
// ends up with one of them.
func TestAReplicaThatJoinsIsHandedItsShareOnceTheReconcilesInFlightFinish(t *testing.T) {
	resetErrorBackoff(t) // a shard's term ended before its caches synced reaches HandleError
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, shardObjects(40)...)
		electortest.CheckVersions(f.Kube)

		// Each reconcile takes longer than a handover does, and is recorded
		// by replica.
		var mu sync.Mutex
		type span struct {
			replica    string
			start, end time.Time
		}
		spans := map[string][]span{}
		slow := func(id string) reconciler {
			return reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
				start := time.Now()
				time.Sleep(30 * time.Second)
				mu.Lock()
				spans[m.Name] = append(spans[m.Name], span{id, start, time.Now()})
				mu.Unlock()
				st := m.Status
				st.ReadyReplicas = m.Spec.Size
				return result{Status: &st}, nil
			})
		}
		first := shardedController(t, f, "replica-1", humustest.NewTelemetry(), slow("replica-1"))
		served(t, first)
		time.Sleep(5 * time.Second) // it takes every shard, and reconciles every object
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Fatalf("the shards' holders = %q, want replica-1 for each", got)
		}

		second := shardedController(t, f, "replica-2", humustest.NewTelemetry(), slow("replica-2"))
		served(t, second)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		holders := shardHoldersOf(t, f)
		count := map[string]int{}
		for _, h := range holders {
			count[h]++
		}
		if !maps.Equal(count, map[string]int{"replica-1": 2, "replica-2": 2}) {
			t.Errorf("the shards' holders = %q, want two each", holders)
		}

		mu.Lock()
		defer mu.Unlock()
		for name, ss := range spans {
			for i, s := range ss {
				for _, o := range ss[:i] {
					if o.replica != s.replica && o.end.After(s.start) && s.end.After(o.start) {
						t.Errorf("%s was reconciled by %s and %s at once", name, o.replica, s.replica)
					}
				}
			}
			want := holders[shard.Of(shard.Hash("uid-"+name), 4)]
			if last := ss[len(ss)-1].replica; last != want {
				t.Errorf("%s was last reconciled by %s, want %s, its shard's holder", name, last, want)
			}
		}
	})
}

// runUntilCancelled's first reconcile of each object runs until its
// context ends, which cancelled counts, and returns a status after it; the
// next ones return one at once.
func runUntilCancelled(cancelled *atomic.Int32) reconciler {
	var calls counter
	return reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
		if calls.Inc(m.Name) == 1 {
			<-ctx.Done()
			cancelled.Add(1)
		}
		st := m.Status
		st.ReadyReplicas = m.Spec.Size
		return result{Status: &st}, nil
	})
}

// A sharded replica that can't renew its Leases stops each shard's workers
// by the shard's renew deadline, as one Lease does, and makes no write
// after it; unlike one Lease, Serve goes on, and the replica takes the
// shards again once the API server answers.
func TestAShardedReplicaThatCannotRenewStopsItsShardsAndTakesThemAgain(t *testing.T) {
	resetErrorBackoff(t) // a shard's term ended before its caches synced reaches HandleError
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, shardObjects(8)...)
		electortest.CheckVersions(f.Kube)
		applies := applyTimes(f)
		var cancelled atomic.Int32
		ctrl := shardedController(t, f, "replica-1", humustest.NewTelemetry(), runUntilCancelled(&cancelled))
		leases := hangLeases(ctrl)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- ctrl.Serve(ctx) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Fatalf("the shards' holders = %q, want replica-1 for each", got)
		}

		// Every renewal hangs from now on.
		leases.hung.Store(true)
		renewed := leases.lastRenewal()
		le := testSettings().LeaderElection
		time.Sleep(time.Until(renewed.Add(lostDeadline(LeaderElection(le)))))
		synctest.Wait()
		if n := cancelled.Load(); n != 8 {
			t.Errorf("reconciles cancelled by the lost deadline = %d, want all 8", n)
		}
		for _, at := range applies() {
			if !at.Before(renewed.Add(le.RenewDeadline)) {
				t.Errorf("an apply reached the API server %s after the last renewal, past the renew deadline", at.Sub(renewed))
			}
		}
		select {
		case err := <-errc:
			t.Fatalf("Serve returned %v on losing its shards, want it to go on", err)
		default:
		}

		// The API server answers again: the shards are taken again, and
		// every object reconciled.
		leases.hung.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Errorf("the shards' holders once the API server answers = %q, want replica-1 for each", got)
		}
		if n := len(f.AppliesTo("status")); n != 8 {
			t.Errorf("status applies = %d, want 8: every object reconciled once the shards were taken again", n)
		}
		if err := ctrl.Ready.Healthy(t.Context()); err != nil {
			t.Errorf("Synced: %v", err)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// Settings.Workers bounds a replica's reconciles in flight across every
// shard it holds, as it does with one shard.
func TestAShardedReplicaReconcilesAtMostWorkersObjectsAtOnce(t *testing.T) {
	resetErrorBackoff(t) // a shard's term ended before its caches synced reaches HandleError
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, shardObjects(40)...)
		electortest.CheckVersions(f.Kube)
		var mu sync.Mutex
		var now, most int
		var calls counter
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			calls.Inc(m.Name)
			mu.Lock()
			now++
			most = max(most, now)
			mu.Unlock()
			time.Sleep(time.Second)
			mu.Lock()
			now--
			mu.Unlock()
			st := m.Status
			st.ReadyReplicas = m.Spec.Size
			return result{Status: &st}, nil
		})
		served(t, shardedControllerOf(t, f, "replica-1", humustest.NewTelemetry(), rec, 3))
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Errorf("the shards' holders = %q, want replica-1 for each", got)
		}
		if len(calls.Keys()) != 40 {
			t.Errorf("objects reconciled = %d, want 40", len(calls.Keys()))
		}
		mu.Lock()
		defer mu.Unlock()
		if most != 3 {
			t.Errorf("reconciles in flight at most = %d, want Workers, 3, across the 4 shards", most)
		}
	})
}

// A shard's Lease deleted while its replica holds it: the replica's term of
// that shard ends at once (its renewal finds the Lease gone), the shard is
// taken again once the Lease, which it had seen held, counts as expired,
// LeaseDuration after it was first seen missing, and the other shards'
// terms go on. (Before the fix, a missing Lease that counted as held had
// no holder to name, and the look at the Leases panicked.)
func TestAShardWhoseLeaseIsDeletedIsTakenAgainOnceItCountsAsExpired(t *testing.T) {
	resetErrorBackoff(t) // a shard's term ended before its caches synced reaches HandleError
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, shardObjects(8)...)
		electortest.CheckVersions(f.Kube)
		tel := humustest.NewTelemetry()
		var calls counter
		ctrl := shardedController(t, f, "replica-1", tel, readyReplicas(&calls))
		stop := served(t, ctrl)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Fatalf("the shards' holders = %q, want replica-1 for each", got)
		}
		le := testSettings().LeaderElection
		name := shard.LeaseName("memcached-controller", shard.DefaultKey, 0, 4)
		if err := f.Kube.CoordinationV1().Leases("kube-system").Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		time.Sleep(le.LeaseDuration - le.RetryPeriod)
		synctest.Wait()
		if l, err := f.Kube.CoordinationV1().Leases("kube-system").Get(t.Context(), name, metav1.GetOptions{}); err == nil {
			t.Errorf("the deleted shard's Lease was taken again %s after the deletion, holder %q: before it counted as expired", time.Since(deleted), holder(l))
		}
		time.Sleep(2*le.RetryPeriod + time.Second)
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Errorf("the shards' holders LeaseDuration+RetryPeriod after the deletion = %q, want replica-1 for each", got)
		}
		var lost []string
		for _, r := range recordsWithBody(tel, "lost the lease") {
			lost = append(lost, recordAttrs(r)["lease"])
		}
		if !slices.Equal(lost, []string{"kube-system/" + name}) {
			t.Errorf("shards lost = %q, want only kube-system/%s", lost, name)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// foreignLease is the unsharded controller's one Lease, held by holder and
// renewed at renewed: it covers every shard.
func foreignLease(holder string, renewed time.Time) *coordinationv1.Lease {
	now := metav1.NewMicroTime(renewed)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "memcached-controller"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: new(holder), LeaseDurationSeconds: new(int32(15)), AcquireTime: &now, RenewTime: &now,
		},
	}
}

// A rollout from one shard to four: while the unsharded controller's Lease
// is held (renewed), a sharded replica takes no shard, so the two never
// write at once; once it is no longer renewed, it takes every shard
// LeaseDuration after it last saw it renewed.
func TestAShardedReplicaTakesNoShardWhileTheUnshardedLeaseIsHeld(t *testing.T) {
	resetErrorBackoff(t) // a shard's term ended before its caches synced reaches HandleError
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, shardObjects(8)...)
		electortest.CheckVersions(f.Kube)
		leases := f.Kube.CoordinationV1().Leases("kube-system")
		if _, err := leases.Create(t.Context(), foreignLease("old", time.Now()), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		renewing, stopRenewing := context.WithCancel(t.Context())
		defer stopRenewing()
		go func() {
			for sleep(renewing, 2*time.Second) {
				l, err := leases.Get(renewing, "memcached-controller", metav1.GetOptions{})
				if err != nil {
					return
				}
				l.Spec = foreignLease("old", time.Now()).Spec
				_, _ = leases.Update(renewing, l, metav1.UpdateOptions{})
			}
		}()
		var calls counter
		ctrl := shardedController(t, f, "replica-1", humustest.NewTelemetry(), readyReplicas(&calls))
		stop := served(t, ctrl)
		time.Sleep(time.Minute)
		synctest.Wait()
		l, err := leases.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 {
			t.Errorf("Leases while the unsharded Lease is held = %d, want the unsharded one alone: no shard taken", len(l.Items))
		}
		if n := len(f.AppliesTo("status")); n != 0 {
			t.Errorf("status applies while the unsharded Lease is held = %d, want none", n)
		}
		stopRenewing()
		stopped := time.Now()
		time.Sleep(15*time.Second + 2*testSettings().LeaderElection.RetryPeriod + time.Second)
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Errorf("the shards' holders %s after the unsharded Lease's last renewal = %q, want replica-1 for each", time.Since(stopped), got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// Of an unsharded replica and a sharded one taking their Leases at once,
// the sharded one sees the other's Lease when it looks again just after
// its take, and gives the shard back before reconciling: it releases it,
// and starts no term.
func TestAShardTakenAsTheUnshardedLeaseIsTakenIsGivenBack(t *testing.T) {
	resetErrorBackoff(t) // a shard's term ended before its caches synced reaches HandleError
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, shardObjects(8)...)
		electortest.CheckVersions(f.Kube)
		var once sync.Once
		var taken string
		leasesGVR := coordinationv1.SchemeGroupVersion.WithResource("leases")
		f.Kube.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			once.Do(func() {
				// The unsharded replica takes its Lease as this one takes
				// its first shard.
				taken = a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).Name
				if err := f.Kube.Tracker().Create(leasesGVR, foreignLease("old", time.Now()), "kube-system"); err != nil {
					t.Error(err)
				}
			})
			return false, nil, nil
		})
		var calls counter
		ctrl := shardedController(t, f, "replica-1", humustest.NewTelemetry(), readyReplicas(&calls))
		stop := served(t, ctrl)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if taken == "" {
			t.Fatal("no shard was taken")
		}
		if h := holder(f.Lease(t, "kube-system", taken)); h != "" {
			t.Errorf("the holder of %s, taken as the unsharded Lease was = %q, want none: given back", taken, h)
		}
		if n := len(f.AppliesTo("status")); n != 0 {
			t.Errorf("status applies = %d, want none: the shard given back before reconciling", n)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// shardLease is a shard's Lease of a controller with n shards, held by
// holder and renewed at renewed.
func shardLease(i, n int, holder string, renewed time.Time) *coordinationv1.Lease {
	l := foreignLease(holder, renewed)
	l.Name = shard.LeaseName(l.Name, shard.DefaultKey, i, n)
	return l
}

// A rollout from two shards back to one: while a shard's Lease is held, a
// replica with one shard doesn't take the one Lease, so the two never
// write at once; it takes it LeaseDuration after it first saw that
// version of the shard's Lease. Before, a replica with one shard never
// looked at the shards' Leases.
func TestAReplicaWithOneShardWaitsForAHeldShardsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		leases := f.Kube.CoordinationV1().Leases("kube-system")
		if _, err := leases.Create(t.Context(), shardLease(1, 2, "old", time.Now()), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		stop := served(t, ctrl)
		time.Sleep(14 * time.Second) // the shard's Lease runs 15s from when it was first seen
		synctest.Wait()
		if got := calls.Get("m"); got != 0 {
			t.Errorf("reconciles while a shard's Lease is held = %d, want none", got)
		}
		if _, err := leases.Get(t.Context(), "memcached-controller", metav1.GetOptions{}); err == nil {
			t.Error("the one Lease exists while a shard's Lease is held, want it not taken")
		}
		time.Sleep(2*testSettings().LeaderElection.RetryPeriod + time.Second)
		synctest.Wait()
		if h := holder(f.Lease(t, "kube-system", "memcached-controller")); h != "replica-1" {
			t.Errorf("the one Lease's holder once the shard's expired = %q, want replica-1", h)
		}
		if got := calls.Get("m"); got != 1 {
			t.Errorf("reconciles once the shard's Lease expired = %d, want 1", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// Of a replica with one shard and a sharded one taking their Leases at
// once, the one with one shard sees the shard's Lease when it looks again
// just after its take, and gives the Lease back before reconciling.
func TestTheOneLeaseTakenAsAShardIsTakenIsGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		leasesGVR := coordinationv1.SchemeGroupVersion.WithResource("leases")
		var once sync.Once
		f.Kube.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			once.Do(func() {
				// A sharded replica takes a shard as this one takes the
				// one Lease.
				if err := f.Kube.Tracker().Create(leasesGVR, shardLease(0, 2, "old", time.Now()), "kube-system"); err != nil {
					t.Error(err)
				}
			})
			return false, nil, nil
		})
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		stop := served(t, ctrl)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if h := holder(f.Lease(t, "kube-system", "memcached-controller")); h != "" {
			t.Errorf("the one Lease's holder, taken as a shard's was = %q, want none: given back", h)
		}
		if got := calls.Get("m"); got != 0 {
			t.Errorf("reconciles = %d, want none: the Lease given back before reconciling", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// A rollout that changes ShardBy and not Shards: while a replica dividing
// by uid holds its four shards, a replica dividing by namespace takes no
// shard and asks for none, since an object of a uid shard can be in any
// namespace shard; once the old replica has released its Leases, the new
// one takes its four. Before, the shards' Leases were named name-i-of-n
// whatever the key: the new replica asked the old one for its share, took
// two of its Leases as its own, and from then on an object whose uid
// shard the old replica held and whose namespace shard the new one held
// was reconciled by both.
func TestAReplicaOfAnotherShardKeyTakesNoShardWhileTheOldKeysAreHeld(t *testing.T) {
	resetErrorBackoff(t) // a shard's term ended before its caches synced reaches HandleError
	synctest.Test(t, func(t *testing.T) {
		objs := make([]runtime.Object, 16)
		for i := range objs {
			objs[i] = cacheObject(fmt.Sprintf("ns-%d", i%8), fmt.Sprintf("m-%d", i), 1)
		}
		f := newFakeCluster(t, listKinds, objs...)
		electortest.CheckVersions(f.Kube)
		var oldCalls, newCalls counter
		stopOld := served(t, shardedControllerBy(t, f, "replica-1", ShardByUID, readyReplicas(&oldCalls)))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Fatalf("the uid shards' holders = %q, want replica-1 for each", got)
		}

		stopNew := served(t, shardedControllerBy(t, f, "replica-2", ShardByNamespace, readyReplicas(&newCalls)))
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := shardHoldersOf(t, f); !slices.Equal(got, []string{"replica-1", "replica-1", "replica-1", "replica-1"}) {
			t.Errorf("the uid shards' holders a minute after a replica by namespace started = %q, want replica-1 for each", got)
		}
		if got := len(newCalls.Keys()); got != 0 {
			t.Errorf("the replica by namespace reconciled %d times while the uid shards were held, want none", got)
		}
		leases, err := f.Kube.CoordinationV1().Leases("kube-system").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leases.Items {
			if h := holder(&l); h == "replica-2" {
				t.Errorf("replica-2 holds %s while the uid shards are held", l.Name)
			}
		}

		if err := stopOld(); err != nil {
			t.Errorf("the uid replica's Serve = %v, want nil", err)
		}
		stopped := time.Now()
		time.Sleep(2*testSettings().LeaderElection.RetryPeriod + time.Second)
		synctest.Wait()
		for i := range 4 {
			name := shard.LeaseName("memcached-controller", string(ShardByNamespace), i, 4)
			if h := holder(f.Lease(t, "kube-system", name)); h != "replica-2" {
				t.Errorf("%s's holder %s after the uid replica released its shards = %q, want replica-2", name, time.Since(stopped), h)
			}
		}
		if got := len(newCalls.Keys()); got == 0 {
			t.Error("the replica by namespace reconciled nothing once it held the shards")
		}
		if err := stopNew(); err != nil {
			t.Errorf("the namespace replica's Serve = %v, want nil", err)
		}
	})
}

// A take whose list just after fails with an answer no retry mends (a 400
// here) ends Serve with the list's error, and gives back the shard it
// just took: its Lease released, not left held by a replica that has
// stopped, for the others to wait out.
func TestAShardTakenWhenTheListAfterTheTakeFailsIsGivenBack(t *testing.T) {
	resetErrorBackoff(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, shardObjects(8)...)
		electortest.CheckVersions(f.Kube)
		var mu sync.Mutex
		var taken bool
		f.Kube.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			taken = true
			return false, nil, nil
		})
		f.Kube.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if taken {
				return true, nil, apierrors.NewBadRequest("the list is refused")
			}
			return false, nil, nil
		})
		var calls counter
		ctrl := shardedController(t, f, "replica-1", humustest.NewTelemetry(), readyReplicas(&calls))
		stop := served(t, ctrl)
		returned, err := awaitServe(ctrl, stop, 10*time.Second)
		if !returned {
			t.Fatalf("Serve didn't return within 10s of a list refused with a 400; Serve, cancelled = %v", stop())
		}
		const want = "kube: listing the Leases in kube-system: the list is refused"
		if err == nil || err.Error() != want {
			t.Errorf("Serve = %v, want %q", err, want)
		}
		mu.Lock()
		taken = false // the test's own list
		mu.Unlock()
		leases, err := f.Kube.CoordinationV1().Leases("kube-system").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(leases.Items) == 0 {
			t.Fatal("no shard was taken")
		}
		for _, l := range leases.Items {
			if h := holder(&l); h != "" {
				t.Errorf("%s's holder once Serve returned = %q, want none: the shard taken given back", l.Name, h)
			}
		}
	})
}

// A replica with one shard that may not list the Leases can't see a
// shard's Lease of a rollout from several shards back to one: the guard
// is off. It says so once, with a WARN record naming the missing rule,
// and leads as before, since a controller that never ran sharded needs no
// list. Before, it said so only at V(4) of its klog logger.
func TestAReplicaWithOneShardThatMayNotListTheLeasesSaysTheGuardIsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		f.Kube.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), "", errors.New("list not allowed"))
		})
		tel := humustest.NewTelemetry()
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls), observed(tel))
		stop := served(t, ctrl)
		time.Sleep(10 * time.Second) // the Lease taken, and renewed
		synctest.Wait()
		recs := recordsWithBody(tel, guardOff)
		if len(recs) != 1 {
			t.Fatalf("%q records = %d, want 1", guardOff, len(recs))
		}
		if r := recs[0]; r.Severity() != otellog.SeverityWarn {
			t.Errorf("the record's severity = %v, want WARN", r.Severity())
		}
		const rule = "list on leases.coordination.k8s.io in kube-system"
		if got := recordAttrs(recs[0]); got["missing"] != rule || !strings.Contains(got["error"], "list not allowed") {
			t.Errorf("the record's attributes = %v, want missing %q and the 403", got, rule)
		}
		if got := calls.Get("m"); got != 1 {
			t.Errorf("reconciles = %d, want 1: the replica leads as before", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}
