package kube

import (
	"context"
	"crypto/tls"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/internal/fakeapi"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"
)

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
	return built(t, f, ctrl, err)
}

// observedKindController is a controller of Namespaces on f's fakes,
// recording into tel (nil: no telemetry).
func observedKindController(t *testing.T, f *fakeCluster, tel *humustest.Telemetry, s Settings, rec KindReconciler[corev1.Namespace], parts ...Part) *Controller {
	t.Helper()
	setup := fakeSetup(tel)
	ctrl, err := NewKindController(setup, testClient(t, setup), s, namespaces, rec, parts...)
	return built(t, f, ctrl, err)
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
// a Recorder's writes made outside a term of leading.
func proven(ctx context.Context) context.Context {
	until := time.Now().Add(2 * time.Hour)
	return control.WithProof(ctx, func() time.Time { return until })
}

// proof is a proof of the Lease that holds for two hours: for the
// controller's own writes made outside a term of leading.
func proof() *control.Proof {
	until := time.Now().Add(2 * time.Hour)
	return control.NewProof(func() time.Time { return until })
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

// counter counts calls by key, safely across workers.
type counter = fakeapi.Counter

// object is an object of apiVersion and kind, with a uid of its name's.
func object(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return fakeapi.Object(apiVersion, kind, ns, name, spec)
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
	return fakeapi.Served(t, ctx, ctrl)
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

// fakeCluster is the API server's stand-in kube's tests and the engine's
// share, kube/internal/fakeapi's.
type fakeCluster = fakeapi.Cluster

var (
	newFakeCluster = fakeapi.New
	holder         = fakeapi.Holder
)

// use replaces c's clients with f's fakes: the package's seam for them.
func use(f *fakeCluster, c *Controller) *Controller {
	c.engine.API = control.API{Clients: cache.Clients{Dynamic: f.Dyn, Metadata: f.Meta}, Leases: f.Kube.CoordinationV1()}.OrNoop()
	return c
}

// built is the controller a constructor returned, on f's fakes; its
// error fails t.
func built(t testing.TB, f *fakeCluster, ctrl *Controller, err error) *Controller {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return use(f, ctrl)
}
