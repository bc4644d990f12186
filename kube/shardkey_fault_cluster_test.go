package kube

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// rolloutCaches is a Memcached of a group of its own: the replicas of the
// ShardBy rollout divide it by namespace, so watch every namespace, and
// see no other test's objects.
var rolloutCaches = Resource[cacheSpec, cacheStatus]{
	Group:   "rollout.test.example.com",
	Version: "v1alpha1",
	Kind:    "Memcached",
	Plural:  "memcacheds",
	Scope:   Namespaced,
}

// TestClusterFaultARolloutThatChangesShardByKeepsOneWriterAtATime: a
// rollout from ShardBy uid to ShardBy namespace, Shards 4 on both, under
// load (every object resized every 0.1 s). The old replica holds the four
// uid shards; the new one, dividing by namespace, takes none while they
// are held, since an object of a uid shard can be in any namespace shard,
// and takes its four once the old one has released its own on shutdown.
// So the audit log shows the old replica's writes, then the new one's: no
// write of the old one's still in flight when the new one's first was
// received. Before, both named their Leases name-i-of-4: the new replica
// took two of the old one's for its own, and both reconciled the objects
// whose uid shard the old one held and whose namespace shard the new one
// did.
func TestClusterFaultARolloutThatChangesShardByKeepsOneWriterAtATime(t *testing.T) {
	t.Parallel() // namespaces and a resource of its own: it runs beside the other parallel scenarios
	const (
		namespaces = 8
		objects    = 16 // 2 a namespace
	)
	c := clustertest.Get(t)
	installCRD(t, c, rolloutCaches)
	gvr := rolloutCaches.GVR()
	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	w := newWorkload(t) // the Leases' namespace
	var names []types.NamespacedName
	for range namespaces {
		ns := c.Namespace(t)
		for j := range objects / namespaces {
			name := fmt.Sprintf("m-%d", j)
			createCache(t, admin, gvr, ns, name, 1)
			names = append(names, types.NamespacedName{Namespace: ns, Name: name})
		}
	}

	s := shortLease(testSettings())
	s.Namespace, s.Shards, s.Workers = "", 4, 4
	s.LeaderElection.Namespace = w.ns
	start := func(id string, by ShardKey) (stop func() error, user string) {
		token := c.ServiceAccount(t, w.ns, id,
			clustertest.Grant{Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"list", "watch", "patch"}},
				{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource + "/status"}, Verbs: []string{"patch"}},
			}},
			clustertest.Grant{Namespace: w.ns, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "list"}},
			}})
		tel := humustest.NewTelemetry()
		setup, client := clientAs(t, c, tel, token)
		rs := s
		rs.ShardBy, rs.LeaderElection.Identity = by, id
		var calls counter
		ctrl, err := NewController(setup, client, rs, rolloutCaches, readyReplicas(&calls))
		if err != nil {
			t.Fatal(err)
		}
		return served(t, ctrl), "system:serviceaccount:" + w.ns + ":" + id
	}
	// settled waits until every object's status reports its spec's size.
	settled := func(within time.Duration) {
		t.Helper()
		clustertest.Eventually(t, within, func(ctx context.Context) error {
			for _, n := range names {
				u, err := admin.Resource(gvr).Namespace(n.Namespace).Get(ctx, n.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
				if got, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas"); got != size {
					return fmt.Errorf("%s's status.readyReplicas = %d, want its size, %d", n, got, size)
				}
			}
			return nil
		})
	}
	holders := func(by ShardKey, want string, within time.Duration) {
		t.Helper()
		clustertest.Eventually(t, within, func(ctx context.Context) error {
			got, err := shardHoldersBy(ctx, w, by, 4)
			if err != nil {
				return err
			}
			if !slices.Equal(got, []string{want, want, want, want}) {
				return fmt.Errorf("the %s shards' holders = %q, want %s for each", by, got, want)
			}
			return nil
		})
	}

	stopOld, oldUser := start("replica-uid", ShardByUID)
	holders(ShardByUID, "replica-uid", 30*time.Second)
	settled(time.Minute)

	// Every object changes all the while, so whoever holds its shard is
	// always writing.
	churning, stopChurning := context.WithCancel(t.Context())
	var churned sync.WaitGroup
	churned.Go(func() {
		for size := int64(2); churning.Err() == nil; size = size%3 + 1 {
			patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)
			for _, n := range names {
				if _, err := admin.Resource(gvr).Namespace(n.Namespace).Patch(churning, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && churning.Err() == nil {
					t.Errorf("resizing %s: %v", n, err) // not Fatal: this isn't the test's goroutine
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	le := s.LeaderElection
	stopNew, newUser := start("replica-namespace", ShardByNamespace)
	time.Sleep(le.LeaseDuration + 2*le.RetryPeriod) // long enough to take, or ask for, a shard
	leases, err := w.kube.CoordinationV1().Leases(w.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if holder(&l) == "replica-namespace" {
			t.Errorf("the replica by namespace holds %s while the uid shards are held", l.Name)
		}
	}

	// The old replica shuts down, as a rollout ends it, releasing its
	// shards: the new one takes its four.
	if err := stopOld(); err != nil {
		t.Errorf("the old replica's Serve = %v, want nil", err)
	}
	released := time.Now()
	holders(ShardByNamespace, "replica-namespace", 2*le.LeaseDuration)
	t.Logf("the replica by namespace held its four shards %s after the old replica released its own", time.Since(released).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // the new replica writes
	stopChurning()
	churned.Wait()
	settled(time.Minute)
	time.Sleep(time.Second) // for any late write to reach the log

	var writes []clustertest.AuditEvent
	for _, e := range c.Audit(t) {
		if e.APIGroup == gvr.Group && e.Resource == gvr.Resource && (e.User == oldUser || e.User == newUser) && e.Code < 300 {
			writes = append(writes, e)
		}
	}
	changes, overlapping := writerChanges(writes)
	t.Logf("%d writes; %d changes of writer; %d writes of one replica's in flight when the other's next was received", len(writes), changes, overlapping)
	if changes != 1 || overlapping != 0 {
		t.Errorf("the writer changed %d times with %d writes overlapping, want once and none: both replicas reconciled at once", changes, overlapping)
	}
	if err := stopNew(); err != nil {
		t.Errorf("the new replica's Serve = %v, want nil", err)
	}
}
