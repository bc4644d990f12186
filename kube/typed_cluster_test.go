package kube

import (
	"context"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// TestClusterTypedClientReadsAndWritesItsResource runs a TypedClient of
// the Memcached resource through the Client's transport, as a service
// account with only the rights it needs, and checks what the API server
// holds and answers.
func TestClusterTypedClientReadsAndWritesItsResource(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	ns := c.Namespace(t)
	gvr := clusterCaches.GVR()
	token := c.ServiceAccount(t, ns, "typed", clustertest.Grant{Namespace: ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource + "/status"}, Verbs: []string{"patch"}},
	}})
	_, client := clientAs(t, c, humustest.NewTelemetry(), token)
	memcacheds := NewTypedClient(client, clusterCaches)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	web := map[string]string{"app": "web"}
	if _, err := memcacheds.Create(ctx, memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m", Labels: web}, Spec: cacheSpec{Size: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := memcacheds.Create(ctx, memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "n"}, Spec: cacheSpec{Size: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err := memcacheds.Create(ctx, memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "Not_A_Name"}, Spec: cacheSpec{Size: 1}})
	if !apierrors.IsInvalid(err) {
		t.Errorf("Create of a name the API server refuses = %v, want Invalid", err)
	}
	m, err := memcacheds.Get(ctx, ns, "m")
	if err != nil {
		t.Fatal(err)
	}
	if m.Spec.Size != 1 || m.UID == "" || m.Labels["app"] != "web" {
		t.Errorf("Get = %+v, want size 1, a UID and label app=web", m)
	}
	checkTypedList(ctx, t, memcacheds, ns, labels.SelectorFromSet(web), nil, "m")
	checkTypedList(ctx, t, memcacheds, ns, nil, fields.OneTermEqualSelector("metadata.name", "n"), "n")
	checkTypedList(ctx, t, memcacheds, ns, nil, nil, "m", "n")

	checkTypedApplyIsWatched(ctx, t, memcacheds, ns, web)
	checkTypedStatusApply(ctx, t, memcacheds, ns)

	if err := memcacheds.Delete(ctx, ns, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := memcacheds.Get(ctx, ns, "m"); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete = %v, want NotFound", err)
	}
	if err := memcacheds.Delete(ctx, ns, "m"); !apierrors.IsNotFound(err) {
		t.Errorf("second Delete = %v, want NotFound", err)
	}
}

func checkTypedList(ctx context.Context, t *testing.T, c *TypedClient[memcached], ns string, l labels.Selector, f fields.Selector, want ...string) {
	t.Helper()
	got, err := c.List(ctx, ns, l, f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range got {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("List(%s, %v, %v) = %v, want %v", ns, l, f, names, want)
	}
}

// checkTypedApplyIsWatched watches m, which has labels web and is
// there, and applies a new size, which Create's manager owns: a conflict,
// until forced, whose change the watch sees.
func checkTypedApplyIsWatched(ctx context.Context, t *testing.T, memcacheds *TypedClient[memcached], ns string, web map[string]string) {
	t.Helper()
	events := make(chan WatchEvent[memcached])
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		defer close(events)
		for e, err := range memcacheds.Watch(watchCtx, ns, labels.SelectorFromSet(web), nil) {
			if err != nil {
				t.Errorf("Watch: %v", err)
				return
			}
			select {
			case events <- e:
			case <-watchCtx.Done():
				return
			}
		}
	}()
	if e := <-events; e.Type != watch.Added || e.Object.Name != "m" {
		t.Errorf("first event = %s %s, want ADDED m, the object there when the watch began", e.Type, e.Object.Name)
	}

	// Create's manager (humus-kube, the Client's user agent) owns
	// spec.size: an apply of another value conflicts, unless forced.
	want := memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m", Labels: web}, Spec: cacheSpec{Size: 3}}
	opts := metav1.ApplyOptions{FieldManager: "typed-test"}
	if _, err := memcacheds.Apply(ctx, want, opts); !apierrors.IsConflict(err) {
		t.Errorf("Apply of a field Create's manager owns = %v, want Conflict", err)
	}
	opts.Force = true
	applied, err := memcacheds.Apply(ctx, want, opts)
	if err != nil {
		t.Fatal(err)
	}
	if applied.Spec.Size != 3 {
		t.Errorf("Apply = size %d, want 3", applied.Spec.Size)
	}
	seen := false
	for e := range events {
		if seen = e.Type == watch.Modified && e.Object.Spec.Size == 3; seen {
			break
		}
	}
	if !seen {
		t.Error("the watch ended without the apply's change: MODIFIED m, size 3")
	}
	stopWatch()
	for range events { //nolint:revive // drained, so the watch's goroutine ends
	}
}

// checkTypedStatusApply applies m's status, to the status subresource,
// and checks both applies in its managed fields.
func checkTypedStatusApply(ctx context.Context, t *testing.T, memcacheds *TypedClient[memcached], ns string) {
	t.Helper()
	opts := metav1.ApplyOptions{FieldManager: "typed-test"}
	applied, err := memcacheds.ApplyStatus(ctx, memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"}, Status: cacheStatus{ReadyReplicas: 3}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if applied.Status.ReadyReplicas != 3 || applied.Spec.Size != 3 {
		t.Errorf("ApplyStatus = size %d, readyReplicas %d; want 3, 3", applied.Spec.Size, applied.Status.ReadyReplicas)
	}
	var mainApply, statusApply bool
	for _, f := range applied.ManagedFields {
		if f.Manager == "typed-test" && f.Operation == metav1.ManagedFieldsOperationApply {
			mainApply = mainApply || f.Subresource == ""
			statusApply = statusApply || f.Subresource == "status"
		}
	}
	if !mainApply || !statusApply {
		t.Errorf("managedFields %+v: want typed-test's Apply of the object and of its status", applied.ManagedFields)
	}
}

// A TypedClient's Update and UpdateStatus replace what they write whole,
// as a test that created an object means to when it writes it again with
// a list item fewer (an apply by another manager keeps the item, which
// the creator still owns); a resourceVersion no longer the object's is a
// Conflict. Checked from what the API server holds.
func TestClusterTypedClientUpdatesReplaceWhatTheyWrite(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	ns := c.Namespace(t)
	gvr := clusterCaches.GVR()
	token := c.ServiceAccount(t, ns, "typed-update", clustertest.Grant{Namespace: ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource + "/status"}, Verbs: []string{"update"}},
	}})
	_, client := clientAs(t, c, humustest.NewTelemetry(), token)
	memcacheds := NewTypedClient(client, clusterCaches)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	created, err := memcacheds.Create(ctx, memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "u"}, Spec: cacheSpec{Size: 1, Image: "memcached:1"}})
	if err != nil {
		t.Fatal(err)
	}
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}
	}
	created.Status.Conditions = []metav1.Condition{cond("Available"), cond("Progressing")}
	withTwo, err := memcacheds.UpdateStatus(ctx, created)
	if err != nil {
		t.Fatal(err)
	}
	withTwo.Status.Conditions = withTwo.Status.Conditions[:1]
	if _, err := memcacheds.UpdateStatus(ctx, withTwo); err != nil {
		t.Fatal(err)
	}
	withTwo.Spec.Size = 2
	if _, err := memcacheds.Update(ctx, withTwo); !apierrors.IsConflict(err) {
		t.Errorf("Update at a resourceVersion the object has moved past = %v, want Conflict", err)
	}
	now, err := memcacheds.Get(ctx, ns, "u")
	if err != nil {
		t.Fatal(err)
	}
	now.Spec = cacheSpec{Size: 2}
	if _, err := memcacheds.Update(ctx, now); err != nil {
		t.Fatal(err)
	}
	got, err := memcacheds.Get(ctx, ns, "u")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Available" || got.Spec.Size != 2 || got.Spec.Image != "" {
		t.Errorf("held: spec %+v, conditions %+v; want size 2 without an image, and Available alone", got.Spec, got.Status.Conditions)
	}
}
