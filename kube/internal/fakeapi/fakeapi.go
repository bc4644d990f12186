// Package fakeapi is client-go's fakes standing in for the API server in
// the unit tests of kube and of its engine (kube/internal/control), which
// share it: the objects a controller reconciles, owns and reads, its
// Lease, and what server-side apply does with the controller's two
// writes, its status and its finalizer. It imports nothing of kube, so
// the engine's own tests can import it.
package fakeapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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
)

// Cluster is client-go's fakes standing in for the API server: the
// dynamic client for the controller's objects, the metadata client for
// the owned ones, and a clientset for the Lease. The fake dynamic client
// can't apply an unstructured object, so an apply reactor of its own does
// what server-side apply would for the controller's two writes: the
// status, and the finalizer.
type Cluster struct {
	Dyn  *dynamicfake.FakeDynamicClient
	Meta *metadatafake.FakeMetadataClient
	Kube *kubefake.Clientset

	mu        sync.Mutex
	rv        int
	applies   []Applied
	statusLag time.Duration
}

// Applied is one apply the Cluster was sent.
type Applied struct {
	GVR         schema.GroupVersionResource
	Key         string // namespace/name, or name
	Subresource string
	FieldOwner  string
	Body        map[string]any
}

// New is a Cluster holding objs, of the resources whose list kinds
// listKinds gives, each given a resourceVersion.
func New(t testing.TB, listKinds map[schema.GroupVersionResource]string, objs ...runtime.Object) *Cluster {
	t.Helper()
	f := &Cluster{}
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			u.SetResourceVersion(f.nextRV())
		}
	}
	f.Dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f.Meta = metadatafake.NewSimpleMetadataClient(scheme)
	f.Kube = kubefake.NewClientset()
	f.Dyn.PrependReactor("patch", "*", f.apply)
	return f
}

func (f *Cluster) nextRV() string {
	f.rv++
	return strconv.Itoa(f.rv)
}

// UpcomingRV is the resourceVersion the Cluster's next write makes.
func (f *Cluster) UpcomingRV() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strconv.Itoa(f.rv + 1)
}

// LagStatus delays a status apply's effect on the tracker, and so its
// watch event, by lag, while the apply returns at once: a watch that lags
// behind the controller's own write.
func (f *Cluster) LagStatus(lag time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statusLag = lag
}

// apply handles a server-side apply of a status or of metadata.finalizers.
func (f *Cluster) apply(a k8stesting.Action) (bool, runtime.Object, error) {
	pa := a.(k8stesting.PatchAction)
	if pa.GetPatchType() != types.ApplyPatchType {
		return false, nil, nil
	}
	gvr, ns, name := pa.GetResource(), pa.GetNamespace(), pa.GetName()
	obj, err := f.Dyn.Tracker().Get(gvr, ns, name)
	if err != nil {
		return true, nil, err
	}
	u := obj.(*unstructured.Unstructured).DeepCopy()
	var body map[string]any
	if err := utiljson.Unmarshal(pa.GetPatch(), &body); err != nil {
		return true, nil, err
	}
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	opts := a.(k8stesting.PatchActionImpl).GetPatchOptions()
	f.mu.Lock()
	f.applies = append(f.applies, Applied{GVR: gvr, Key: key, Subresource: pa.GetSubresource(), FieldOwner: opts.FieldManager, Body: body})
	u.SetResourceVersion(f.nextRV())
	lag := f.statusLag
	f.mu.Unlock()

	switch pa.GetSubresource() {
	case "status":
		u.Object["status"] = body["status"]
		if lag > 0 {
			time.AfterFunc(lag, func() { _ = f.Dyn.Tracker().Update(gvr, u.DeepCopy(), ns) })
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
			return true, u, f.Dyn.Tracker().Delete(gvr, ns, name)
		}
	default:
		return true, nil, fmt.Errorf("fake: no apply to %s", pa.GetSubresource())
	}
	return true, u, f.Dyn.Tracker().Update(gvr, u, ns)
}

// Create adds u, and Update stores it, as the API server would after a
// write: with a new resourceVersion.
func (f *Cluster) Create(t testing.TB, gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	t.Helper()
	if err := f.Dyn.Tracker().Create(gvr, f.stamped(u), u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
}

func (f *Cluster) Update(t testing.TB, gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	t.Helper()
	if err := f.Dyn.Tracker().Update(gvr, f.stamped(u), u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
}

// stamped gives u a new resourceVersion, and returns it.
func (f *Cluster) stamped(u *unstructured.Unstructured) *unstructured.Unstructured {
	f.mu.Lock()
	defer f.mu.Unlock()
	u.SetResourceVersion(f.nextRV())
	return u
}

// Get is a copy of the object ns/name of gvr.
func (f *Cluster) Get(t testing.TB, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := f.Dyn.Tracker().Get(gvr, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured).DeepCopy()
}

// AppliesTo are the applies sent to subresource ("": the object), in the
// order they came.
func (f *Cluster) AppliesTo(subresource string) []Applied {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Applied
	for _, a := range f.applies {
		if a.Subresource == subresource {
			out = append(out, a)
		}
	}
	return out
}

// Lease is the Lease ns/name.
func (f *Cluster) Lease(t testing.TB, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := f.Kube.CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Holder is the Lease's holder, or "" for none.
func Holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// BeginDeletion marks the object ns/name of gvr as being deleted, as the
// API server does when an object with a finalizer is deleted.
func (f *Cluster) BeginDeletion(t testing.TB, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	u := f.Get(t, gvr, ns, name)
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	f.Update(t, gvr, u)
}

// AnswerStatusAppliesAt makes f answer every status apply of resource
// with the resourceVersion rv, whatever the version it stored.
func (f *Cluster) AnswerStatusAppliesAt(resource, rv string) {
	f.Dyn.PrependReactor("patch", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := f.apply(a)
		if a.GetSubresource() != "status" || err != nil || obj == nil {
			return handled, obj, err
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		u.SetResourceVersion(rv)
		return handled, u, nil
	})
}

// Served runs s's Serve (a controller's) in the background, in a synctest
// bubble or on the real control plane, with a context made from ctx,
// until stop is called or t ends. stop cancels Serve's context and
// returns what Serve returned, at once when Serve already has, as often
// as it is called; it gives up after 30s.
func Served(t testing.TB, ctx context.Context, s interface{ Serve(context.Context) error }) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = s.Serve(ctx)
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

// Object is an object of apiVersion and kind named name, in namespace ns
// unless it is "", with a uid of its name's ("uid-" and the name) and spec,
// unless it is nil.
func Object(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
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

// Counter counts calls by key, safely across workers: a test's
// Reconciler counts its reconciles of each key with it.
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

// Inc counts one more call of key's, and returns how many there were.
func (c *Counter) Inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return c.n[key]
}

// Get is how many calls of key's were counted.
func (c *Counter) Get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// Keys is the keys counted, in order.
func (c *Counter) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ks := make([]string, 0, len(c.n))
	for k := range c.n {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
