package control

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/internal/fakeapi"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

func cacheObject(ns, name string, size int64) *unstructured.Unstructured {
	return object("cache.example.com/v1alpha1", "Memcached", ns, name, map[string]any{"size": size})
}

// counter counts calls by key, safely across workers.
type counter = fakeapi.Counter

// object is an object of apiVersion and kind, with a uid of its name's.
func object(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return fakeapi.Object(apiVersion, kind, ns, name, spec)
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
	b.cfg.API = apiOf(f)
	return New(b.cfg)
}

// sharedCache is a Client's cache, logging to tel's LoggerProvider, as
// kube.NewClient builds it.
func sharedCache(tel humus.Telemetry) *cache.Shared {
	log := slog.New(otelslog.NewHandler(InstrumentationScope, otelslog.WithLoggerProvider(tel.Resolved().LoggerProvider)))
	return cache.NewShared(func(k cache.Key) logr.Logger { return InformerLogger(log.Handler(), k) })
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
	u := f.Get(t, cachesGVR, "default", name)
	if err := unstructured.SetNestedField(u.Object, size, "spec", "size"); err != nil {
		t.Fatal(err)
	}
	f.Update(t, cachesGVR, u)
}

// readyReplicas reports the object's size as its ready replicas: a
// reconcile whose status settles after one apply.
func readyReplicas(calls *counter) reconcileFunc {
	return func(ctx context.Context, m memcached) (result, error) {
		calls.Inc(m.Name)
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
	return fakeapi.Served(t, ctx, ctrl)
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

// fakeCluster is the API server's stand-in the engine's tests and kube's
// share, kube/internal/fakeapi's.
type fakeCluster = fakeapi.Cluster

var (
	newFakeCluster = fakeapi.New
	holder         = fakeapi.Holder
)

// apiOf is the API clients of f's fakes.
func apiOf(f *fakeCluster) API {
	return API{Clients: cache.Clients{Dynamic: f.Dyn, Metadata: f.Meta}, Leases: f.Kube.CoordinationV1()}.OrNoop()
}
