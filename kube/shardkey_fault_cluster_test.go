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
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	r := newRollout(t)
	stopOld, oldUser := r.start("replica-uid", ShardByUID)
	r.holders(ShardByUID, "replica-uid", 30*time.Second)
	r.settled(time.Minute)

	// Every object changes all the while, so whoever holds its shard is
	// always writing.
	stopChurn := r.churn()
	le := r.s.LeaderElection
	stopNew, newUser := r.start("replica-namespace", ShardByNamespace)
	time.Sleep(le.LeaseDuration + 2*le.RetryPeriod) // long enough to take, or ask for, a shard
	leases, err := r.w.kube.CoordinationV1().Leases(r.w.ns).List(t.Context(), metav1.ListOptions{})
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
	r.holders(ShardByNamespace, "replica-namespace", 2*le.LeaseDuration)
	t.Logf("the replica by namespace held its four shards %s after the old replica released its own", time.Since(released).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // the new replica writes
	stopChurn()
	r.settled(time.Minute)
	time.Sleep(time.Second) // for any late write to reach the log

	var writes []clustertest.AuditEvent
	for _, e := range r.c.Audit(t) {
		if e.APIGroup == r.gvr.Group && e.Resource == r.gvr.Resource && (e.User == oldUser || e.User == newUser) && e.Code < 300 {
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

// rollout is the ShardBy rollout's cluster: rolloutCaches' objects, 2 in
// each of 8 namespaces of their own, and the Leases in w's.
type rollout struct {
	t     *testing.T
	c     *clustertest.Cluster
	w     *workload
	gvr   schema.GroupVersionResource
	admin dynamic.Interface
	names []types.NamespacedName
	s     Settings // the replicas', but ShardBy and the identity
}

func newRollout(t *testing.T) *rollout {
	t.Helper()
	const namespaces, each = 8, 2
	c := clustertest.Get(t)
	installCRD(t, c, rolloutCaches)
	r := &rollout{t: t, c: c, w: newWorkload(t), gvr: rolloutCaches.GVR(), admin: dynamic.NewForConfigOrDie(c.AdminConfig())}
	for range namespaces {
		ns := c.Namespace(t)
		for j := range each {
			name := fmt.Sprintf("m-%d", j)
			createCache(t, r.admin, r.gvr, ns, name, 1)
			r.names = append(r.names, types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	r.s = shortLease(testSettings())
	r.s.Namespace, r.s.Shards, r.s.Workers = "", 4, 4
	r.s.LeaderElection.Namespace = r.w.ns
	return r
}

// start starts replica id, of every namespace, sharding by by, with a
// ServiceAccount of its own; it returns its Serve's stop, and its user.
func (r *rollout) start(id string, by ShardKey) (stop func() error, user string) {
	t := r.t
	t.Helper()
	token := r.c.ServiceAccount(t, r.w.ns, id,
		clustertest.Grant{Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{r.gvr.Group}, Resources: []string{r.gvr.Resource}, Verbs: []string{"list", "watch", "patch"}},
			{APIGroups: []string{r.gvr.Group}, Resources: []string{r.gvr.Resource + "/status"}, Verbs: []string{"patch"}},
		}},
		clustertest.Grant{Namespace: r.w.ns, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "list"}},
		}})
	setup, client := clientAs(t, r.c, humustest.NewTelemetry(), token)
	s := r.s
	s.ShardBy, s.LeaderElection.Identity = by, id
	var calls counter
	ctrl, err := NewController(setup, client, s, rolloutCaches, readyReplicas(&calls))
	if err != nil {
		t.Fatal(err)
	}
	return served(t, ctrl), "system:serviceaccount:" + r.w.ns + ":" + id
}

// settled waits until every object's status reports its spec's size.
func (r *rollout) settled(within time.Duration) {
	r.t.Helper()
	clustertest.Eventually(r.t, within, func(ctx context.Context) error {
		for _, n := range r.names {
			u, err := r.admin.Resource(r.gvr).Namespace(n.Namespace).Get(ctx, n.Name, metav1.GetOptions{})
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

// holders waits until want holds each of the 4 shards by by.
func (r *rollout) holders(by ShardKey, want string, within time.Duration) {
	r.t.Helper()
	clustertest.Eventually(r.t, within, func(ctx context.Context) error {
		got, err := shardHoldersBy(ctx, r.w, by, 4)
		if err != nil {
			return err
		}
		if !slices.Equal(got, []string{want, want, want, want}) {
			return fmt.Errorf("the %s shards' holders = %q, want %s for each", by, got, want)
		}
		return nil
	})
}

// churn resizes every object every 0.1 s until the returned stop is
// called, which returns once the last resize is done.
func (r *rollout) churn() (stop func()) {
	ctx, cancel := context.WithCancel(r.t.Context())
	var churned sync.WaitGroup
	churned.Go(func() {
		for size := int64(2); ctx.Err() == nil; size = size%3 + 1 {
			patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)
			for _, n := range r.names {
				if _, err := r.admin.Resource(r.gvr).Namespace(n.Namespace).Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
					r.t.Errorf("resizing %s: %v", n, err) // not Fatal: this isn't the test's goroutine
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
