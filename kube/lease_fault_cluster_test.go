package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/shard"
)

// shortLease are Lease timings for a scenario that isn't about the
// defaults: a takeover in seconds keeps the suite short.
func shortLease(s Settings) Settings {
	s.LeaderElection.LeaseDuration, s.LeaderElection.RenewDeadline, s.LeaderElection.RetryPeriod = 6*time.Second, 4*time.Second, time.Second
	return s
}

// churn resizes the first n Memcacheds every 0.1 s until the returned
// stop is called, which returns once the last resize is done.
func (w *workload) churn(n int) (stop func()) {
	ctx, cancel := context.WithCancel(w.t.Context())
	var churned sync.WaitGroup
	churned.Go(func() {
		for size := int64(2); ctx.Err() == nil; size = size%3 + 1 {
			patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)
			for i := range n {
				_, err := w.admin.Resource(clusterCaches.GVR()).Namespace(w.ns).Patch(ctx, fmt.Sprintf("m-%d", i), types.MergePatchType, patch, metav1.PatchOptions{})
				if err != nil && ctx.Err() == nil {
					w.t.Errorf("resizing m-%d: %v", i, err) // not Fatal: this isn't the test's goroutine
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return func() {
		cancel()
		churned.Wait()
	}
}

// writerChanges sorts writes by when each was received, and counts the
// changes of writer, and the writes still in flight (not complete) when a
// write of another writer's that follows them was received.
func writerChanges(writes []clustertest.AuditEvent) (changes, overlapping int) {
	slices.SortFunc(writes, func(a, b clustertest.AuditEvent) int { return a.RequestReceived.Compare(b.RequestReceived) })
	for i := 1; i < len(writes); i++ {
		if writes[i].User == writes[i-1].User {
			continue
		}
		changes++
		for _, e := range writes[:i] {
			if e.User != writes[i].User && !e.StageTime.Before(writes[i].RequestReceived) {
				overlapping++
			}
		}
	}
	return changes, overlapping
}

// TestClusterFaultTheLeaseDeletedUnderTwoReplicasKeepsOneWriterAtATime: the
// Lease deleted while one replica holds it and another stands by, three
// times at varied phases of the holder's renewals, with every object
// changing all the while. The holder's next renewal finds the Lease gone
// and stops it; the standby, which saw the Lease held, counts it held for
// LeaseDuration from when it first saw it missing, and takes it only then.
// So the audit log shows the replicas' writes in one run per term: no two
// writers' writes interleave. Before the fix, the standby created the
// Lease at its next read while the holder wrote on until a renewal found
// it: both replicas' writes interleaved, 15 to 141 changes of writer.
func TestClusterFaultTheLeaseDeletedUnderTwoReplicasKeepsOneWriterAtATime(t *testing.T) {
	t.Parallel() // a namespace of its own: it runs beside the other parallel scenarios
	const (
		objects = 20 // enough for writes all the while; more prove nothing more
		phases  = 3
	)
	w := newWorkload(t)
	s := shortLease(testSettings())
	le := s.LeaderElection
	w.create(objects)
	replicas := map[string]*faultReplica{"replica-a": w.replica("replica-a", s)}
	w.holds(s.Name, "replica-a", 30*time.Second)
	replicas["replica-b"] = w.replica("replica-b", s)
	w.converged(time.Minute)

	// Every object changes all the while, so the leader is always writing.
	stopChurn := w.churn(objects)
	users := []string{replicas["replica-a"].user, replicas["replica-b"].user}
	holder, standby := "replica-a", "replica-b"
	var stopped, taken []time.Duration
	for phase := range phases {
		time.Sleep(2*time.Second + time.Duration(phase)*330*time.Millisecond)
		if err := w.kube.CoordinationV1().Leases(w.ns).Delete(t.Context(), s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		old := replicas[holder]
		select {
		case <-old.ctrl.engine.Done:
			stopped = append(stopped, time.Since(deleted))
		case <-time.After(le.RetryPeriod + le.RenewDeadline):
			t.Fatalf("phase %d: %s's Serve still runs %s after its Lease was deleted", phase, holder, le.RetryPeriod+le.RenewDeadline)
		}
		if err := old.stop(); !errors.Is(err, ErrLostLeadership) {
			t.Errorf("phase %d: %s's Serve = %v, want ErrLostLeadership", phase, holder, err)
		}
		w.holds(s.Name, standby, le.LeaseDuration+le.RetryPeriod+5*time.Second)
		taken = append(taken, time.Since(deleted))
		// The replica that stopped comes back, as its pod would, and
		// stands by.
		replicas[holder] = w.replica(holder, s)
		holder, standby = standby, holder
	}
	time.Sleep(2 * time.Second) // the last term writes
	stopChurn()
	w.converged(time.Minute)
	time.Sleep(time.Second) // for any late write to reach the log

	writes := w.writes(w.c.Audit(t), users...)
	changes, overlapping := writerChanges(writes)
	t.Logf("%d writes; %d changes of writer over %d deletions; %d writes overlapping the next writer's first; the holder stopped %v after each deletion, the standby took the Lease %v after",
		len(writes), changes, phases, overlapping, stopped, taken)
	if changes != phases {
		t.Errorf("the writer changed %d times over %d deletions of the Lease, want %d: two writers' writes interleaved", changes, phases, phases)
	}
	if overlapping != 0 {
		t.Errorf("%d writes were still in flight when the next writer's first was received, want 0", overlapping)
	}
	for _, r := range replicas {
		if err := r.stop(); err != nil {
			t.Errorf("%s's Serve = %v, want nil", r.name, err)
		}
	}
}

// TestClusterFaultLosingOneShardKeepsTheOthers: a replica holding both
// shards of two loses one (its Lease deleted). Losing a shard aborts every
// connection of the process, since the Client's transport is one for all
// shards (HTTP/2 carries them all on one connection), so nothing queued
// for the lost shard is sent late. The other shard's requests in flight
// are cut with it: its renewal, if one was on the wire, fails and is tried
// again RetryPeriod later; its writes fail and are retried with backoff;
// its watches are opened again. This measures that the other shard's term
// goes on: never lost, its renewals never further apart than
// RenewDeadline, and every object converges.
func TestClusterFaultLosingOneShardKeepsTheOthers(t *testing.T) {
	t.Parallel() // a namespace of its own: it runs beside the other parallel scenarios
	const objects = 20
	w := newWorkload(t)
	s := shortLease(testSettings())
	s.Shards = 2
	le := s.LeaderElection
	w.create(objects)
	w.c.ServiceAccount(t, w.ns, "replica-a", shardRBAC(w.ns))
	r := w.replica("replica-a", s)
	lost, kept := shard.LeaseName(s.Name, shard.DefaultKey, 0, 2), shard.LeaseName(s.Name, shard.DefaultKey, 1, 2)
	w.holds(lost, "replica-a", 30*time.Second)
	w.holds(kept, "replica-a", 30*time.Second)
	w.converged(time.Minute)

	w.resize(objects, 2) // work in flight in both shards
	if err := w.kube.CoordinationV1().Leases(w.ns).Delete(t.Context(), lost, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	w.converged(le.LeaseDuration + time.Minute)
	w.holds(lost, "replica-a", 30*time.Second) // taken again, once it counted as expired
	time.Sleep(le.RenewDeadline)

	var lostShards []string
	for _, rec := range recordsWithBody(r.tel, "lost the lease") {
		lostShards = append(lostShards, recordAttrs(rec)["lease"])
	}
	if !slices.Equal(lostShards, []string{w.ns + "/" + lost}) {
		t.Errorf("shards lost = %q, want only %s/%s", lostShards, w.ns, lost)
	}
	renewals := []time.Time{}
	for _, e := range w.c.Audit(t) {
		if e.Namespace == w.ns && e.Resource == "leases" && e.Name == kept && e.User == r.user && e.Code < 300 && e.RequestReceived.After(deleted.Add(-5*time.Second)) {
			renewals = append(renewals, e.RequestReceived)
		}
	}
	var gap time.Duration
	for i := 1; i < len(renewals); i++ {
		gap = max(gap, renewals[i].Sub(renewals[i-1]))
	}
	t.Logf("the kept shard: %d renewals from 5s before the other's Lease was deleted, the longest gap %s (RetryPeriod %s, RenewDeadline %s)",
		len(renewals), gap.Round(time.Millisecond), le.RetryPeriod, le.RenewDeadline)
	if len(renewals) < 2 || gap >= le.RenewDeadline {
		t.Errorf("the kept shard's renewals: %d, the longest gap %s; want them on, never RenewDeadline (%s) apart", len(renewals), gap, le.RenewDeadline)
	}
	if err := r.stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}
