package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/cache"
)

// cacheSpec and cacheStatus are the test resource's, Memcached's.
type cacheSpec struct {
	Size  int32  `json:"size"`
	Image string `json:"image,omitempty"`
}

type cacheStatus struct {
	ReadyReplicas int32              `json:"readyReplicas,omitempty"`
	Conditions    []metav1.Condition `json:"conditions,omitempty"`
}

// memcached is one object of the test resource, as its reconcile is
// handed it.
type memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   cacheSpec   `json:"spec"`
	Status cacheStatus `json:"status,omitempty"`
}

// result is what a reconcile returns: the status to apply (nil: none),
// and when to reconcile again.
type result struct {
	Status *cacheStatus
	After  time.Duration
}

// reconciler reconciles one Memcached, as a kube.Reconciler does.
type reconciler interface {
	Reconcile(ctx context.Context, m memcached) (result, error)
}

// reconcileFunc is a reconciler.
type reconcileFunc func(ctx context.Context, m memcached) (result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, m memcached) (result, error) { return f(ctx, m) }

// finalizeFunc cleans up after a Memcached being deleted.
type finalizeFunc func(ctx context.Context, m memcached) error

// cachesType is the test resource's Type: a status equal to the one
// decoded is no status to apply, as kube's resources do.
type cachesType struct {
	rec reconciler
	fin finalizeFunc
}

func (c cachesType) Decode(u *cache.Object) (Decoded, error) {
	d := &cachesObject{typ: c, u: u}
	if err := Decode(u, &d.obj); err != nil {
		return nil, err
	}
	return d, nil
}

type cachesObject struct {
	typ cachesType
	u   *cache.Object
	obj memcached
}

func (d *cachesObject) Reconcile(ctx context.Context) ([]byte, time.Duration, error) {
	before, err := json.Marshal(d.obj.Status)
	if err != nil {
		return nil, 0, err
	}
	res, err := d.typ.rec.Reconcile(ctx, d.obj)
	if res.Status == nil {
		return nil, res.After, err
	}
	after, encErr := json.Marshal(res.Status)
	if encErr != nil {
		return nil, res.After, errors.Join(err, encErr)
	}
	if string(before) == string(after) {
		return nil, res.After, err
	}
	return after, res.After, err
}

func (d *cachesObject) Finalize(ctx context.Context) error { return d.typ.fin(ctx, d.obj) }

func (d *cachesObject) StatusErr() error { return nil }

// namespacesType is a Kind's Type, of Namespaces: it applies no status.
type namespacesType func(ctx context.Context, ns corev1.Namespace) (time.Duration, error)

func (n namespacesType) Decode(u *cache.Object) (Decoded, error) {
	d := &namespaceObject{rec: n}
	if err := Decode(u, &d.obj); err != nil {
		return nil, err
	}
	return d, nil
}

type namespaceObject struct {
	rec namespacesType
	obj corev1.Namespace
}

func (d *namespaceObject) Reconcile(ctx context.Context) ([]byte, time.Duration, error) {
	after, err := d.rec(ctx, d.obj)
	return nil, after, err
}

func (d *namespaceObject) Finalize(context.Context) error { return nil }

func (d *namespaceObject) StatusErr() error { return nil }

// testFinalizer is the finalizer of the tests' controllers of Memcacheds.
const testFinalizer = "cache.example.com/finalizer"

// build is what newTestController builds a Controller from; its options
// change it.
type build struct {
	tel    *humustest.Telemetry
	fin    finalizeFunc
	cfg    Config
	shared *cache.Shared
}

type option func(*build)

// fakeCluster is client-go's fakes standing in for the API server: the
// dynamic client for the controller's objects, the metadata client for
// the owned ones, and a clientset for the Lease. The fake dynamic client
// can't apply an unstructured object, so an apply reactor of the test's
// own does what server-side apply would for the controller's two writes:
// the status, and the finalizer.
type fakeCluster struct {
	dyn  *dynamicfake.FakeDynamicClient
	meta *metadatafake.FakeMetadataClient
	kube *kubefake.Clientset

	mu      sync.Mutex
	rv      int
	applies []applied
	// statusLag delays the status apply's effect on the tracker, and so
	// its watch event, while the apply returns at once: a watch that
	// lags behind the controller's own write.
	statusLag time.Duration
}

type applied struct {
	gvr         schema.GroupVersionResource
	key         string
	subresource string
	fieldOwner  string
	body        map[string]any
}

// api is the API clients of f's fakes.
func (f *fakeCluster) api() API {
	return API{Clients: cache.Clients{Dynamic: f.dyn, Metadata: f.meta}, Leases: f.kube.CoordinationV1()}.OrNoop()
}

func (f *fakeCluster) nextRV() string {
	f.rv++
	return strconv.Itoa(f.rv)
}

// apply handles a server-side apply of a status or of metadata.finalizers.
func (f *fakeCluster) apply(a k8stesting.Action) (bool, runtime.Object, error) {
	pa := a.(k8stesting.PatchAction)
	if pa.GetPatchType() != types.ApplyPatchType {
		return false, nil, nil
	}
	gvr, ns, name := pa.GetResource(), pa.GetNamespace(), pa.GetName()
	obj, err := f.dyn.Tracker().Get(gvr, ns, name)
	if err != nil {
		return true, nil, err
	}
	u := obj.(*unstructured.Unstructured).DeepCopy()
	var body map[string]any
	if err := utiljson.Unmarshal(pa.GetPatch(), &body); err != nil {
		return true, nil, err
	}
	opts := a.(k8stesting.PatchActionImpl).GetPatchOptions()
	f.mu.Lock()
	f.applies = append(f.applies, applied{gvr: gvr, key: Key(u), subresource: pa.GetSubresource(), fieldOwner: opts.FieldManager, body: body})
	u.SetResourceVersion(f.nextRV())
	lag := f.statusLag
	f.mu.Unlock()

	switch pa.GetSubresource() {
	case "status":
		u.Object["status"] = body["status"]
		if lag > 0 {
			time.AfterFunc(lag, func() { _ = f.dyn.Tracker().Update(gvr, u.DeepCopy(), ns) })
			return true, u, nil
		}
	case "":
		meta, _ := body["metadata"].(map[string]any)
		var fins []string
		if list, ok := meta["finalizers"].([]any); ok {
			for _, s := range list {
				fins = append(fins, s.(string))
			}
		}
		u.SetFinalizers(fins)
		if u.GetDeletionTimestamp() != nil && len(fins) == 0 {
			// The last finalizer is gone: the deletion completes.
			return true, u, f.dyn.Tracker().Delete(gvr, ns, name)
		}
	default:
		return true, nil, fmt.Errorf("fake: no apply to %s", pa.GetSubresource())
	}
	return true, u, f.dyn.Tracker().Update(gvr, u, ns)
}

// createObject adds u, and update stores it, as the API server would
// after a write: with a new resourceVersion.
func (f *fakeCluster) createObject(t testing.TB, gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	t.Helper()
	if err := f.dyn.Tracker().Create(gvr, f.stamped(u), u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeCluster) update(t testing.TB, gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	t.Helper()
	if err := f.dyn.Tracker().Update(gvr, f.stamped(u), u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
}

// stamped gives u a new resourceVersion, and returns it.
func (f *fakeCluster) stamped(u *unstructured.Unstructured) *unstructured.Unstructured {
	f.mu.Lock()
	defer f.mu.Unlock()
	u.SetResourceVersion(f.nextRV())
	return u
}

func (f *fakeCluster) get(t testing.TB, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := f.dyn.Tracker().Get(gvr, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured).DeepCopy()
}

func (f *fakeCluster) appliesTo(subresource string) []applied {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []applied
	for _, a := range f.applies {
		if a.subresource == subresource {
			out = append(out, a)
		}
	}
	return out
}

func (f *fakeCluster) lease(t testing.TB, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := f.kube.CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// object returns an unstructured object of the test's resource.
func object(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "uid": "uid-" + name},
	}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func cacheObject(ns, name string, size int64) *unstructured.Unstructured {
	return object("cache.example.com/v1alpha1", "Memcached", ns, name, map[string]any{"size": size})
}

// counter counts calls by key, safely across workers.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return c.n[key]
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *counter) keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ks []string
	for k := range c.n {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// countingQueue counts the keys added to it, and keeps their priorities.
type countingQueue struct {
	Queue
	added      []string
	priorities []Priority
}

func (q *countingQueue) Add(key string, p Priority, changed time.Time) {
	q.added = append(q.added, key)
	q.priorities = append(q.priorities, p)
	q.Queue.Add(key, p, changed)
}

var (
	cachesGVR     = schema.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"}
	namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")
	listKinds     = map[schema.GroupVersionResource]string{cachesGVR: "MemcachedList", namespacesGVR: "NamespaceList"}
	deployments   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	deploymentsGR = deployments.GroupResource()
)

// testSettings are kube's DefaultSettings named for a test.
func testSettings() Settings {
	return Settings{
		Name:               "memcached-controller",
		Workers:            1,
		Shards:             1,
		ShardBy:            ShardByUID,
		Resync:             10 * time.Hour,
		RetryBaseDelay:     5 * time.Millisecond,
		RetryMaxDelay:      1000 * time.Second,
		LowPriorityMaxWait: time.Minute,
		LeaderElection: LeaderElection{
			Namespace:     "kube-system",
			Identity:      "replica-1",
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
	}
}

// observed records the controller's telemetry into tel.
func observed(tel *humustest.Telemetry) option { return func(b *build) { b.tel = tel } }

// finalizing gives the controller the finalizer testFinalizer, run by f.
func finalizing(f finalizeFunc) option {
	return func(b *build) { b.cfg.Finalizer, b.fin = testFinalizer, f }
}

// ofNamespaces makes the controller one of a Kind, Namespaces, reconciled
// by rec, in place of Memcacheds.
func ofNamespaces(rec namespacesType) option {
	return func(b *build) {
		b.cfg.GVR, b.cfg.Group, b.cfg.Kind, b.cfg.Scope, b.cfg.Type = namespacesGVR, "", "Namespace", Cluster, rec
	}
}

// newTestController is a controller of Memcacheds on f's fakes, with
// settings s, reconciling with rec.
func newTestController(t testing.TB, f *fakeCluster, s Settings, rec reconciler, opts ...option) *Controller {
	t.Helper()
	b := &build{cfg: Config{
		Settings: s,
		GVR:      cachesGVR,
		Group:    cachesGVR.Group,
		Kind:     "Memcached",
		Scope:    Namespaced,
	}}
	for _, o := range opts {
		o(b)
	}
	var tel humus.Telemetry
	if b.tel != nil {
		tel = b.tel.Telemetry()
	}
	if b.cfg.Type == nil {
		b.cfg.Type = cachesType{rec: rec, fin: b.fin}
	}
	var err error
	b.cfg.Telemetry, err = NewTelemetry(tel, s.Name, b.cfg.GVR.GroupResource())
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.Cache = b.shared
	if b.cfg.Cache == nil {
		b.cfg.Cache = sharedCache(tel)
	}
	b.cfg.API = f.api()
	return New(b.cfg)
}

// sharedCache is a Client's cache, logging to tel's LoggerProvider, as
// kube.NewClient builds it.
func sharedCache(tel humus.Telemetry) *cache.Shared {
	log := slog.New(otelslog.NewHandler(InstrumentationScope, otelslog.WithLoggerProvider(tel.Resolved().LoggerProvider)))
	return cache.NewShared(func(k cache.Key) logr.Logger { return InformerLogger(log.Handler(), k) })
}

func newFakeCluster(t testing.TB, listKinds map[schema.GroupVersionResource]string, objs ...runtime.Object) *fakeCluster {
	t.Helper()
	f := &fakeCluster{}
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			u.SetResourceVersion(f.nextRV())
		}
	}
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f.meta = metadatafake.NewSimpleMetadataClient(scheme)
	f.kube = kubefake.NewClientset()
	f.dyn.PrependReactor("patch", "*", f.apply)
	return f
}

// holder is the Lease's holder, or "" for none.
func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// deleting marks u as being deleted, held by finalizer.
func deleting(u *unstructured.Unstructured, finalizer string) *unstructured.Unstructured {
	u.SetFinalizers([]string{finalizer})
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	return u
}

// resize changes the object's spec in the fake cluster, as an edit would.
func resize(t *testing.T, f *fakeCluster, name string, size int64) {
	t.Helper()
	u := f.get(t, cachesGVR, "default", name)
	if err := unstructured.SetNestedField(u.Object, size, "spec", "size"); err != nil {
		t.Fatal(err)
	}
	f.update(t, cachesGVR, u)
}

// readyReplicas reports the object's size as its ready replicas: a
// reconcile whose status settles after one apply.
func readyReplicas(calls *counter) reconcileFunc {
	return func(ctx context.Context, m memcached) (result, error) {
		calls.inc(m.Name)
		st := m.Status
		st.ReadyReplicas = m.Spec.Size
		return result{Status: &st}, nil
	}
}

// served runs ctrl's Serve in the background, in a synctest bubble,
// until stop is called or t ends. stop cancels Serve's context and
// returns what Serve returned, at once when Serve already has, as often
// as it is called; it gives up after 30s. To see Serve return by itself,
// wait on ctrl.Done, or call awaitServe.
func served(t testing.TB, ctrl *Controller) (stop func() error) {
	t.Helper()
	return servedIn(t, context.Background(), ctrl)
}

// servedIn is served with Serve's context made from ctx.
func servedIn(t testing.TB, ctx context.Context, ctrl *Controller) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = ctrl.Serve(ctx)
	}()
	stop = func() error {
		cancel()
		select {
		case <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("served: Serve didn't return within 30s of its context being cancelled")
		}
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// newCountingQueue is a countingQueue shut down when t ends.
func newCountingQueue(t testing.TB) *countingQueue {
	q := &countingQueue{Queue: NewQueue("test", time.Minute, nil)}
	t.Cleanup(q.ShutDown)
	return q
}

// testWork is the work of a term of leading, on q.
func testWork(q Queue) *Work {
	return &Work{Q: q, Later: NewLater(q), Stop: make(chan struct{})}
}

// settle lets the bubble's controllers work for d.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// answerStatusAppliesAt makes f answer every status apply of a Memcached
// with the resourceVersion rv, whatever the version it stored.
func (f *fakeCluster) answerStatusAppliesAt(rv string) {
	f.dyn.PrependReactor("patch", "memcacheds", func(a k8stesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := f.apply(a)
		if a.GetSubresource() != "status" || err != nil || obj == nil {
			return handled, obj, err
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		u.SetResourceVersion(rv)
		return handled, u, nil
	})
}

// owning has the controller own gvr's objects, of its namespace, that
// labels select ("": all).
func owning(gvr schema.GroupVersionResource, labels string) option {
	return func(b *build) {
		b.cfg.Owned = append(b.cfg.Owned, cache.Key{GVR: gvr, Namespace: b.cfg.Settings.Namespace, Labels: labels})
	}
}

// awaitServe waits up to d for ctrl's Serve, run by served, to return by
// itself, and reports whether it did, and what it returned; stop is
// served's.
func awaitServe(ctrl *Controller, stop func() error, d time.Duration) (returned bool, err error) {
	select {
	case <-ctrl.Done:
		return true, stop()
	case <-time.After(d):
		return false, nil
	}
}

// beginDeletion marks the object ns/name of gvr as being deleted, as the
// API server does when an object with a finalizer is deleted.
func (f *fakeCluster) beginDeletion(t testing.TB, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	u := f.get(t, gvr, ns, name)
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	f.update(t, gvr, u)
}
