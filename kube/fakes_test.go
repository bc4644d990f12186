package kube

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
	"github.com/z5labs/humus/kube/internal/control"
)

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
	f.applies = append(f.applies, applied{gvr: gvr, key: control.Key(u), subresource: pa.GetSubresource(), fieldOwner: opts.FieldManager, body: body})
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

// holder is the Lease's holder, or "" for none.
func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// use replaces c's clients with the fakes: the package's seam for them.
func (f *fakeCluster) use(c *Controller) *Controller {
	c.engine.API = control.API{Clients: cache.Clients{Dynamic: f.dyn, Metadata: f.meta}, Leases: f.kube.CoordinationV1()}.OrNoop()
	return c
}

// fakeSetup is a Setup on a test host, recording into tel, or into no
// telemetry when tel is nil.
func fakeSetup(tel *humustest.Telemetry) *humus.Setup {
	s := &humus.Setup{Host: humustest.NewHost().Host()}
	if tel != nil {
		s.Telemetry = tel.Telemetry()
	}
	return s
}

// newTestController is a controller of caches on f's fakes, recording no
// telemetry.
func newTestController(t *testing.T, f *fakeCluster, s Settings, rec Reconciler[cacheSpec, cacheStatus], parts ...Part) *Controller {
	t.Helper()
	return observedController(t, f, nil, s, rec, parts...)
}

// observedController is a controller of caches on f's fakes, recording
// into tel (nil: no telemetry).
func observedController(t *testing.T, f *fakeCluster, tel *humustest.Telemetry, s Settings, rec Reconciler[cacheSpec, cacheStatus], parts ...Part) *Controller {
	t.Helper()
	setup := fakeSetup(tel)
	ctrl, err := NewController(setup, testClient(t, setup), s, caches, rec, parts...)
	return f.built(t, ctrl, err)
}

// observedKindController is a controller of Namespaces on f's fakes,
// recording into tel (nil: no telemetry).
func observedKindController(t *testing.T, f *fakeCluster, tel *humustest.Telemetry, s Settings, rec KindReconciler[corev1.Namespace], parts ...Part) *Controller {
	t.Helper()
	setup := fakeSetup(tel)
	ctrl, err := NewKindController(setup, testClient(t, setup), s, namespaces, rec, parts...)
	return f.built(t, ctrl, err)
}

// built is the controller a constructor returned, on f's fakes; its
// error fails t.
func (f *fakeCluster) built(t testing.TB, ctrl *Controller, err error) *Controller {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return f.use(ctrl)
}

// testClient is a Client that opens no connection; a controller built with
// it has its clients replaced by a fakeCluster's.
func testClient(t testing.TB, s *humus.Setup) *Client {
	t.Helper()
	c, err := NewClient(s, Connection{Server: "127.0.0.1:6443", TLS: &tls.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testWork is the work of a term of leading, on q.
func testWork(q control.Queue) *control.Work {
	return &control.Work{Q: q, Later: control.NewLater(q), Stop: make(chan struct{})}
}

// proven is ctx with a proof of the Lease that holds for two hours: for
// writes made outside a term of leading.
func proven(ctx context.Context) context.Context {
	until := time.Now().Add(2 * time.Hour)
	return control.WithProof(ctx, func() time.Time { return until })
}

// testSettings are DefaultSettings named for a test.
func testSettings() Settings {
	s := DefaultSettings()
	s.Name = "memcached-controller"
	s.LeaderElection.Namespace = "kube-system"
	s.LeaderElection.Identity = "replica-1"
	return s
}

// testFinalizer is the finalizer of the tests' controllers of Memcacheds,
// the fault suite's included.
const testFinalizer = "cache.example.com/finalizer"

// deleting marks u as being deleted, held by finalizer.
func deleting(u *unstructured.Unstructured, finalizer string) *unstructured.Unstructured {
	u.SetFinalizers([]string{finalizer})
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	return u
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

// countingQueue counts the keys added to it, and keeps their priorities.
type countingQueue struct {
	control.Queue
	added      []string
	priorities []control.Priority
}

// newCountingQueue is a countingQueue shut down when t ends.
func newCountingQueue(t testing.TB) *countingQueue {
	q := &countingQueue{Queue: control.NewQueue("test", time.Minute, nil)}
	t.Cleanup(q.ShutDown)
	return q
}

func (q *countingQueue) Add(key string, p control.Priority, changed time.Time) {
	q.added = append(q.added, key)
	q.priorities = append(q.priorities, p)
	q.Queue.Add(key, p, changed)
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

// served runs ctrl's Serve in the background, in a synctest bubble or on
// the real control plane, until stop is called or t ends. stop cancels
// Serve's context and returns what Serve returned, at once when Serve
// already has, as often as it is called; it gives up after 30s. To see
// Serve return by itself, wait on ctrl.done, or call awaitServe.
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

// awaitServe waits up to d for ctrl's Serve, run by served, to return by
// itself, and reports whether it did, and what it returned; stop is
// served's.
func awaitServe(ctrl *Controller, stop func() error, d time.Duration) (returned bool, err error) {
	select {
	case <-ctrl.engine.Done:
		return true, stop()
	case <-time.After(d):
		return false, nil
	}
}

// cached is u as the cache keeps it.
func cached(t testing.TB, u *unstructured.Unstructured) *cache.Object {
	t.Helper()
	o, err := cache.Compact(u.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return o.(*cache.Object)
}

// sleepUntil sleeps until d after start, and lets the bubble settle.
func sleepUntil(start time.Time, d time.Duration) {
	time.Sleep(time.Until(start.Add(d)))
	synctest.Wait()
}
