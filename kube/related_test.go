package kube

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/control"
	"github.com/z5labs/humus/kube/internal/transport"
)

// A Website serves the content of a ConfigMap it names: the controller
// of the docs, in miniature.
type siteSpec struct {
	ContentFrom string `json:"contentFrom"`
}

type siteStatus struct {
	Content string `json:"content"`
}

type website = Object[siteSpec, siteStatus]

var (
	sites = Resource[siteSpec, siteStatus]{
		Group: "web.example.com", Version: "v1", Kind: "Website", Plural: "websites", Scope: Namespaced,
	}
	sitesGVR      = sites.GVR()
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	configMapKind = Kind[corev1.ConfigMap]{GVR: configMapsGVR, Kind: "ConfigMap", Scope: Namespaced}
	siteKinds     = map[schema.GroupVersionResource]string{
		sitesGVR: "WebsiteList", configMapsGVR: "ConfigMapList", deployments: "DeploymentList",
	}
)

func siteObject(ns, name, contentFrom string) *unstructured.Unstructured {
	return object("web.example.com/v1", "Website", ns, name, map[string]any{"contentFrom": contentFrom})
}

func configMapObject(ns, name, content string, lbls map[string]string) *unstructured.Unstructured {
	u := object("v1", "ConfigMap", ns, name, nil)
	delete(u.Object, "spec")
	u.Object["data"] = map[string]any{"index.html": content}
	u.SetLabels(lbls)
	return u
}

// serveContent is a Website's Reconciler: its status is the content of the
// ConfigMap it names, read from the cache, or "" when there is none.
func serveContent(cms *Reader[corev1.ConfigMap], calls *counter) ReconcilerFunc[siteSpec, siteStatus] {
	return func(ctx context.Context, w website) (Result[siteStatus], error) {
		calls.Inc(w.Name)
		st := w.Status
		cm, err := cms.Get(ctx, w.Namespace, w.Spec.ContentFrom)
		switch {
		case apierrors.IsNotFound(err):
			st.Content = ""
		case err != nil:
			return Result[siteStatus]{}, err
		default:
			st.Content = cm.Data["index.html"]
		}
		return Result[siteStatus]{Status: &st}, nil
	}
}

// contentFrom is a Website's reference to its ConfigMap.
func contentFrom(w website) []types.NamespacedName {
	return []types.NamespacedName{{Namespace: w.Namespace, Name: w.Spec.ContentFrom}}
}

// siteController is a controller of Websites on f's fakes, built on
// client with parts, recording into tel (nil: none).
func siteController(t *testing.T, f *fakeCluster, client *Client, tel *humustest.Telemetry, s Settings, rec Reconciler[siteSpec, siteStatus], parts ...Part) *Controller {
	t.Helper()
	setup := fakeSetup(tel)
	ctrl, err := NewController(setup, client, s, sites, rec, parts...)
	return built(t, f, ctrl, err)
}

// settle lets the bubble's controllers work for d.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func content(t *testing.T, f *fakeCluster, name string) string {
	t.Helper()
	s, _, _ := unstructured.NestedString(f.Get(t, sitesGVR, "default", name).Object, "status", "content")
	return s
}

// References reconciles every object that names a related object when it
// changes or is deleted, and follows a reference that moves.
func TestReferencesReconcilesEveryReferrerOfARelatedChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds,
			siteObject("default", "a", "c1"), siteObject("default", "b", "c1"), siteObject("default", "x", "c2"),
			configMapObject("default", "c1", "one", nil), configMapObject("default", "c2", "two", nil),
		)
		client := testClient(t, fakeSetup(nil))
		cms := Read(client, configMapKind, Selector{})
		var calls counter
		stop := served(t, siteController(t, f, client, nil, testSettings(), serveContent(cms, &calls), References(cms, contentFrom)))
		settle(10 * time.Second)
		for name, want := range map[string]string{"a": "one", "b": "one", "x": "two"} {
			if got := content(t, f, name); got != want {
				t.Fatalf("%s's content at start = %q, want %q", name, got, want)
			}
		}

		count := func() map[string]int {
			return map[string]int{"a": calls.Get("a"), "b": calls.Get("b"), "x": calls.Get("x")}
		}
		expect := func(what string, before map[string]int, want map[string]int) {
			t.Helper()
			for name, n := range want {
				if got := calls.Get(name) - before[name]; got != n {
					t.Errorf("%s: reconciles of %s = %d, want %d", what, name, got, n)
				}
			}
		}

		before := count()
		f.Update(t, configMapsGVR, configMapObject("default", "c1", "one, edited", nil))
		settle(time.Second)
		expect("c1 edited", before, map[string]int{"a": 1, "b": 1, "x": 0})
		if got := content(t, f, "a") + "|" + content(t, f, "b"); got != "one, edited|one, edited" {
			t.Errorf("a's and b's content = %q, want c1's new content", got)
		}

		// a now names c2: c1's changes no longer reach it, c2's do.
		f.Update(t, sitesGVR, siteObject("default", "a", "c2"))
		settle(time.Second)
		before = count()
		f.Update(t, configMapsGVR, configMapObject("default", "c1", "one, again", nil))
		settle(time.Second)
		expect("c1 edited after a moved to c2", before, map[string]int{"a": 0, "b": 1, "x": 0})

		before = count()
		if err := f.Dyn.Tracker().Delete(configMapsGVR, "default", "c2"); err != nil {
			t.Fatal(err)
		}
		settle(time.Second)
		expect("c2 deleted", before, map[string]int{"a": 1, "b": 0, "x": 1})
		if got := content(t, f, "x"); got != "" {
			t.Errorf("x's content once c2 is deleted = %q, want none", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// Related maps a related object's change, before and after, to the keys
// its function names.
func TestRelatedReconcilesWhatItsFunctionNamesBeforeAndAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds,
			siteObject("default", "a", "c1"), siteObject("default", "b", "c1"),
			configMapObject("default", "c1", "one", map[string]string{"site": "a"}),
		)
		client := testClient(t, fakeSetup(nil))
		cms := Read(client, configMapKind, Selector{})
		bySiteLabel := func(cm corev1.ConfigMap) []types.NamespacedName {
			return []types.NamespacedName{{Namespace: cm.Namespace, Name: cm.Labels["site"]}}
		}
		var calls counter
		served(t, siteController(t, f, client, nil, testSettings(), serveContent(cms, &calls), Related(cms, bySiteLabel)))
		settle(10 * time.Second)

		a, b := calls.Get("a"), calls.Get("b")
		f.Update(t, configMapsGVR, configMapObject("default", "c1", "one", map[string]string{"site": "b"}))
		settle(time.Second)
		if got := [2]int{calls.Get("a") - a, calls.Get("b") - b}; got != [2]int{1, 1} {
			t.Errorf("reconciles of a and b when c1's label moved from a to b = %v, want [1 1]", got)
		}
	})
}

// Two controllers on one Client that own the same resource share one
// list and one watch of it; a Reader of it too, in the same namespace,
// turns that one informer into one of whole objects.
func TestControllersOnOneClientShareOneInformer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds, siteObject("default", "a", "c1"), configMapObject("default", "c1", "one", nil))
		client := testClient(t, fakeSetup(nil))
		cms := Read(client, configMapKind, Selector{})
		var calls counter
		first, second := testSettings(), testSettings()
		second.Name = "second"
		served(t, siteController(t, f, client, nil, first, serveContent(cms, &calls), Owns(deployments), References(cms, contentFrom)))
		served(t, siteController(t, f, client, nil, second, serveContent(cms, &calls), Owns(deployments), Reads(cms)))
		settle(10 * time.Second)

		// An informer lists once, at its start; each controller's check
		// that a resource is served lists it once too (the fakes don't
		// record its limit of 1), before its informers start; the rights
		// probes list by name.
		n := map[string]int{}
		informerLists := func(prefix string, actions []k8stesting.Action) {
			for _, a := range actions {
				l, ok := a.(interface{ GetListOptions() metav1.ListOptions })
				if ok && a.GetVerb() == "list" && !strings.Contains(l.GetListOptions().FieldSelector, control.ProbeName) {
					n[prefix+a.GetResource().Resource]++
				}
			}
		}
		informerLists("metadata ", f.Meta.Actions())
		informerLists("", f.Dyn.Actions())
		// Deployments: one informer and two checks; ConfigMaps, one
		// informer of whole objects (the checks list through the metadata
		// client); Websites, each controller's informer and check.
		want := map[string]int{"metadata deployments": 1 + 2, "configmaps": 1, "websites": 2 + 2}
		for k, w := range want {
			if n[k] != w {
				t.Errorf("informers' lists of %s = %d, want %d (all: %v)", k, n[k], w, n)
			}
		}
	})
}

// A Reader reads its own copy of each object, by name and by namespace
// and labels, and says why when it has no cache to read.
func TestAReaderReadsCopiesFromTheSharedCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds,
			siteObject("default", "a", "c1"),
			configMapObject("default", "c1", "one", map[string]string{"tier": "web"}),
			configMapObject("default", "c2", "two", nil),
			configMapObject("other", "c3", "three", map[string]string{"tier": "web"}),
		)
		client := testClient(t, fakeSetup(nil))
		cms := Read(client, configMapKind, Selector{})
		if _, err := cms.Get(t.Context(), "default", "c1"); err == nil || !strings.Contains(err.Error(), "hasn't synced") {
			t.Errorf("Get before any controller serves = %v, want an error saying the cache hasn't synced", err)
		}
		var calls counter
		served(t, siteController(t, f, client, nil, testSettings(), serveContent(cms, &calls), Reads(cms)))
		settle(10 * time.Second)

		cm, err := cms.Get(t.Context(), "default", "c1")
		if err != nil || cm.Data["index.html"] != "one" || cm.Name != "c1" || cm.Labels["tier"] != "web" {
			t.Fatalf("Get(default, c1) = %+v, %v; want c1 with its data and labels", cm, err)
		}
		cm.Data["index.html"] = "changed by the caller"
		if again, _ := cms.Get(t.Context(), "default", "c1"); again.Data["index.html"] != "one" {
			t.Errorf("a second Get sees the first caller's change: %q", again.Data["index.html"])
		}
		if _, err := cms.Get(t.Context(), "default", "missing"); !apierrors.IsNotFound(err) {
			t.Errorf("Get of a missing ConfigMap = %v, want NotFound", err)
		}
		web := labels.SelectorFromSet(labels.Set{"tier": "web"})
		for _, tc := range []struct {
			ns   string
			sel  labels.Selector
			want []string
		}{
			{"default", nil, []string{"c1", "c2"}},
			{"", web, []string{"c1", "c3"}},
			{"default", web, []string{"c1"}},
		} {
			got, err := cms.List(t.Context(), tc.ns, tc.sel)
			var names []string
			for _, cm := range got {
				names = append(names, cm.Name)
			}
			slices.Sort(names)
			if err != nil || strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("List(%q, %v) = %v, %v; want %v", tc.ns, tc.sel, names, err, tc.want)
			}
		}
	})
}

// A Reader with a Selector caches only the objects it keeps, listed and
// watched with its selectors.
func TestAReadersSelectorIsListedAndWatchedWith(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds, siteObject("default", "a", "c1"),
			configMapObject("default", "c1", "one", map[string]string{"tier": "web"}),
			configMapObject("default", "c2", "two", nil),
		)
		client := testClient(t, fakeSetup(nil))
		cms := Read(client, configMapKind, Selector{Namespace: "default", Labels: "tier=web"})
		var calls counter
		served(t, siteController(t, f, client, nil, testSettings(), serveContent(cms, &calls), Reads(cms)))
		settle(10 * time.Second)
		got, err := cms.List(t.Context(), "", nil)
		if err != nil || len(got) != 1 || got[0].Name != "c1" {
			t.Errorf("List = %v, %v; want c1 alone", got, err)
		}
		for _, a := range f.Dyn.Actions() {
			if a.GetResource() != configMapsGVR || (a.GetVerb() != "list" && a.GetVerb() != "watch") {
				continue
			}
			var sel string
			switch a := a.(type) {
			case k8stesting.ListAction:
				sel = a.GetListRestrictions().Labels.String()
			case k8stesting.WatchAction:
				sel = a.GetWatchRestrictions().Labels.String()
			}
			if sel != "tier=web" {
				t.Errorf("%s of configmaps with labels %q, want tier=web", a.GetVerb(), sel)
			}
			if ns := a.GetNamespace(); ns != "default" {
				t.Errorf("%s of configmaps in %q, want default", a.GetVerb(), ns)
			}
		}
	})
}

// NewController names every mistake in a controller's Readers at once.
func TestNewControllerNamesEveryMistakeInItsReaders(t *testing.T) {
	setup := fakeSetup(nil)
	client, other := testClient(t, setup), testClient(t, setup)
	bad := Read(client, Kind[corev1.ConfigMap]{GVR: schema.GroupVersionResource{Version: "v1"}, Scope: "Global"},
		Selector{Namespace: "Not_A_Label", Labels: "a in (", Fields: "x"})
	clusterWide := Read(client, namespaces, Selector{Namespace: "default"})
	elsewhere := Read(other, configMapKind, Selector{})
	good := Read(client, configMapKind, Selector{})
	_, err := NewController(setup, client, testSettings(), sites, ReconcilerFunc[siteSpec, siteStatus](
		func(context.Context, website) (Result[siteStatus], error) { return Result[siteStatus]{}, nil }),
		Reads(bad), Reads(clusterWide), Reads(elsewhere),
		References(good, func(m memcached) []types.NamespacedName { return nil }),
	)
	if err == nil {
		t.Fatal("NewController = nil error, want one naming every mistake")
	}
	for _, want := range []string{
		"Kind.GVR /v1, Resource=: the GVR has no Resource",
		"Kind.Kind is required",
		`Kind.Scope "Global" is neither`,
		`Selector.Namespace "Not_A_Label"`,
		`Selector.Labels "a in ("`,
		`Selector.Fields "x"`,
		`Selector.Namespace "default": the resource is cluster-scoped`,
		"reads another Client's cache",
		"refs takes a kube.Object[github.com/z5labs/humus/kube.cacheSpec,github.com/z5labs/humus/kube.cacheStatus], and the controller's objects are kube.Object[github.com/z5labs/humus/kube.siteSpec,github.com/z5labs/humus/kube.siteStatus]",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("NewController's error lacks %q:\n%v", want, err)
		}
	}
}

// A References function that panics is recovered and recorded once for
// its object, however often the object changes, and the informer goes
// on: the other objects' references still reconcile them.
func TestAPanickingReferencesIsRecordedOnceAndStopsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds,
			siteObject("default", "bad", "c1"), siteObject("default", "good", "c1"),
			configMapObject("default", "c1", "one", nil),
		)
		tel := humustest.NewTelemetry()
		client := testClient(t, fakeSetup(nil))
		cms := Read(client, configMapKind, Selector{})
		refs := func(w website) []types.NamespacedName {
			if w.Name == "bad" {
				panic("a bug in refs")
			}
			return contentFrom(w)
		}
		var calls counter
		served(t, siteController(t, f, client, tel, testSettings(), serveContent(cms, &calls), References(cms, refs)))
		settle(10 * time.Second)
		for i := range 3 {
			f.Update(t, sitesGVR, siteObject("default", "bad", "c1"+strings.Repeat(" ", i)))
			settle(time.Second)
		}
		good := calls.Get("good")
		f.Update(t, configMapsGVR, configMapObject("default", "c1", "edited", nil))
		settle(time.Second)
		if calls.Get("good")-good != 1 {
			t.Errorf("reconciles of good for c1's change = %d, want 1", calls.Get("good")-good)
		}
		panics := 0
		for _, r := range tel.Records() {
			if strings.HasPrefix(r.Body().AsString(), "mapping a related object panicked") {
				panics++
			}
		}
		if panics != 1 {
			t.Errorf("records of the panic = %d, want 1", panics)
		}
	})
}

// readingOwnWrites serves a controller of Websites on the fakes that reads
// the ConfigMaps sel keeps (the fakes hold Website a and ConfigMap c1),
// and returns its Reader, the Client's ledger of the App's writes, and a
// context to read with: any, not a reconcile's.
func readingOwnWrites(t *testing.T, sel Selector) (*fakeCluster, *Reader[corev1.ConfigMap], *control.Ledger, context.Context) {
	t.Helper()
	f := newFakeCluster(t, siteKinds, siteObject("default", "a", "c1"), configMapObject("default", "c1", "one", map[string]string{"tier": "web"}))
	client := testClient(t, fakeSetup(nil))
	cms := Read(client, configMapKind, sel)
	var calls counter
	ctrl := siteController(t, f, client, nil, testSettings(), serveContent(cms, &calls), Reads(cms))
	served(t, ctrl)
	settle(10 * time.Second)
	return f, cms, client.ledger, t.Context()
}

// wroteConfigMap records in l what the Client's transport would of a
// write of the ConfigMap ns/name that the API server answered with a.
func wroteConfigMap(l *control.Ledger, ns, name string, a transport.Answer) {
	l.RecordWrite(configMapsGVR.GroupResource(), ns, name, a)
}

// A Reader's Get reads the App's own write, made through its Client with
// any context (issue 44, point 2: only a reconcile's own, with its
// context, was read): it waits for the cache to bring the version the
// write answered, and fails, saying so, when the cache doesn't within its
// bound; after a delete, it waits for the cache to drop the object, and
// then reads NotFound (before, it read the deleted object from the cache).
func TestAReaderReadsTheAppsOwnWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cms, ledger, ctx := readingOwnWrites(t, Selector{})

		// The reconcile wrote c1, and the API server answered with the
		// version the fake's next write makes.
		next := f.UpcomingRV()
		wroteConfigMap(ledger, "default", "c1", transport.Answer{ResourceVersion: next})
		got := make(chan string, 1)
		go func() {
			cm, err := cms.Get(ctx, "default", "c1")
			if err != nil {
				got <- err.Error()
				return
			}
			got <- cm.Data["index.html"]
		}()
		settle(time.Second)
		select {
		case s := <-got:
			t.Fatalf("Get returned %q before the cache brought the write", s)
		default:
		}
		f.Update(t, configMapsGVR, configMapObject("default", "c1", "written", nil))
		settle(10 * time.Millisecond)
		if s := <-got; s != "written" {
			t.Errorf("Get after its own write = %q, want the written content", s)
		}

		// A write whose event never comes.
		wroteConfigMap(ledger, "default", "c1", transport.Answer{ResourceVersion: "100000"})
		_, err := cms.Get(ctx, "default", "c1")
		if err == nil || !strings.Contains(err.Error(), "hasn't brought the App's own write (resourceVersion 100000) within 5s") || !errors.Is(err, ErrCacheBehind) {
			t.Errorf("Get of a write the cache never brings = %v, want an error saying so, ErrCacheBehind", err)
		}

		// The App deleted c1.
		wroteConfigMap(ledger, "default", "c1", transport.Answer{Deleted: true, UID: string(f.Get(t, configMapsGVR, "default", "c1").GetUID())})
		gone := make(chan error, 1)
		go func() {
			_, err := cms.Get(ctx, "default", "c1")
			gone <- err
		}()
		settle(time.Second)
		select {
		case err := <-gone:
			t.Fatalf("Get = %v before the cache brought the App's delete, want it to wait", err)
		default:
		}
		if err := f.Dyn.Tracker().Delete(configMapsGVR, "default", "c1"); err != nil {
			t.Fatal(err)
		}
		settle(10 * time.Millisecond)
		if err := <-gone; !apierrors.IsNotFound(err) {
			t.Errorf("Get once the cache brought the App's delete = %v, want NotFound", err)
		}
	})
}

// An index of a Reader's objects lists them by its values, kept as they
// change; a panic in its function is recorded once and indexes that
// object by nothing.
func TestAnIndexListsAReadersObjectsByItsValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds, siteObject("default", "a", "c1"),
			configMapObject("default", "c1", "one", map[string]string{"tier": "web"}),
			configMapObject("default", "c2", "two", map[string]string{"tier": "web"}),
			configMapObject("other", "c3", "three", map[string]string{"tier": "db"}),
			configMapObject("default", "bad", "boom", map[string]string{"tier": "panic"}),
		)
		tel := humustest.NewTelemetry()
		client := testClient(t, fakeSetup(tel))
		cms := Read(client, configMapKind, Selector{})
		byTier := IndexBy(cms, func(cm corev1.ConfigMap) []string {
			if cm.Labels["tier"] == "panic" {
				panic("a bug in the index")
			}
			return []string{cm.Labels["tier"]}
		})
		var calls counter
		served(t, siteController(t, f, client, nil, testSettings(), serveContent(cms, &calls), Reads(cms)))
		settle(10 * time.Second)
		names := func(tier string) string {
			got, err := byTier.List(t.Context(), tier)
			if err != nil {
				t.Fatal(err)
			}
			var ns []string
			for _, cm := range got {
				ns = append(ns, cm.Name)
			}
			slices.Sort(ns)
			return strings.Join(ns, ",")
		}
		if got := names("web"); got != "c1,c2" {
			t.Errorf("web = %s, want c1,c2", got)
		}
		f.Update(t, configMapsGVR, configMapObject("default", "c2", "two", map[string]string{"tier": "db"}))
		settle(time.Second)
		if got := names("db"); got != "c2,c3" {
			t.Errorf("db once c2 moved = %s, want c2,c3", got)
		}
		f.Update(t, configMapsGVR, configMapObject("default", "bad", "boom again", map[string]string{"tier": "panic"}))
		settle(time.Second)
		panics := 0
		for _, r := range tel.Records() {
			if strings.HasPrefix(r.Body().AsString(), "indexing an object panicked") {
				panics++
			}
		}
		if panics != 1 {
			t.Errorf("records of the index's panic = %d, want 1", panics)
		}
	})
}

// Settings.LabelSelector limits the controller to the objects it selects,
// and OwnsSelected its owned resource's cache: each listed and watched
// with its selector. A bad selector is one of NewController's mistakes.
func TestSelectorsLimitTheOwnAndTheOwnedCaches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		web := siteObject("default", "web", "c1")
		web.SetLabels(map[string]string{"tier": "web"})
		f := newFakeCluster(t, siteKinds, web, siteObject("default", "other", "c1"))
		client := testClient(t, fakeSetup(nil))
		cms := Read(client, configMapKind, Selector{})
		s := testSettings()
		s.LabelSelector = "tier=web"
		var calls counter
		served(t, siteController(t, f, client, nil, s, serveContent(cms, &calls), Reads(cms),
			OwnsSelected(deployments, Selector{Labels: "app=web"})))
		settle(10 * time.Second)
		if calls.Get("web") != 1 || calls.Get("other") != 0 {
			t.Errorf("reconciles: web %d, other %d; want 1 and 0", calls.Get("web"), calls.Get("other"))
		}
		selectors := map[string]string{}
		for _, a := range append(f.Dyn.Actions(), f.Meta.Actions()...) {
			if l, ok := a.(k8stesting.ListAction); ok && !strings.Contains(l.GetListRestrictions().Fields.String(), control.ProbeName) {
				selectors[a.GetResource().Resource] = l.GetListRestrictions().Labels.String()
			}
		}
		if selectors["websites"] != "tier=web" || selectors["deployments"] != "app=web" {
			t.Errorf("lists' label selectors = %v, want websites tier=web, deployments app=web", selectors)
		}

		bad := testSettings()
		bad.LabelSelector, bad.FieldSelector = "tier in (", "x"
		_, err := NewController(fakeSetup(nil), client, bad, sites, serveContent(cms, &calls),
			OwnsSelected(deployments, Selector{Namespace: "default", Labels: "!!"}))
		for _, want := range []string{
			`kube: Settings.LabelSelector "tier in ("`,
			`kube: Settings.FieldSelector "x"`,
			`kube: OwnsSelected(apps/v1, Resource=deployments): Selector.Namespace "default" must be empty`,
			`Selector.Labels "!!"`,
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("NewController's error lacks %q:\n%v", want, err)
			}
		}
	})
}

// What a function of the user's failed for is forgotten once its object is
// deleted (issue 44, point 7): an IndexBy's, a Related's and a
// References' records of 300 failing objects, each recorded once, are
// all gone once the 300 are deleted. Before, all 300 were kept for the
// process's life.
func TestFailuresAreForgottenWithTheirObjects(t *testing.T) {
	const n = 300
	for _, tc := range []struct {
		name string
		gvr  schema.GroupVersionResource
		// failing is a failing object's, i of n.
		failing func(i int) *unstructured.Unstructured
		// parts declares the function on cms, and says what holds its
		// failures.
		parts func(cms *Reader[corev1.ConfigMap]) ([]Part, func(*Controller) *control.FailedOnce)
	}{
		{"IndexBy", configMapsGVR, failingConfigMap, func(cms *Reader[corev1.ConfigMap]) ([]Part, func(*Controller) *control.FailedOnce) {
			IndexBy(cms, func(corev1.ConfigMap) []string { panic("a bug in the index") })
			return []Part{Reads(cms)}, func(*Controller) *control.FailedOnce { return &cms.Failed }
		}},
		{"Related", configMapsGVR, failingConfigMap, func(cms *Reader[corev1.ConfigMap]) ([]Part, func(*Controller) *control.FailedOnce) {
			p := Related(cms, func(corev1.ConfigMap) []types.NamespacedName { panic("a bug in the mapping") })
			return []Part{p}, relationFailures
		}},
		{"References", sitesGVR, func(i int) *unstructured.Unstructured {
			return siteObject("default", "bad-"+strconv.Itoa(i), "c1")
		}, func(cms *Reader[corev1.ConfigMap]) ([]Part, func(*Controller) *control.FailedOnce) {
			p := References(cms, func(website) []types.NamespacedName { panic("a bug in the references") })
			return []Part{p}, relationFailures
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeCluster(t, siteKinds)
				client := testClient(t, fakeSetup(nil))
				cms := Read(client, configMapKind, Selector{})
				parts, failures := tc.parts(cms)
				nothing := ReconcilerFunc[siteSpec, siteStatus](func(context.Context, website) (Result[siteStatus], error) {
					return Result[siteStatus]{}, nil
				})
				ctrl := siteController(t, f, client, nil, testSettings(), nothing, parts...)
				failed := failures(ctrl)
				served(t, ctrl)
				settle(10 * time.Second)
				for i := range n {
					f.Create(t, tc.gvr, tc.failing(i))
					synctest.Wait() // the fake watch's channel holds 100 events
				}
				settle(10 * time.Second)
				if got := failed.Len(); got != n {
					t.Fatalf("failures kept of %d failing objects = %d, want %d", n, got, n)
				}
				for i := range n {
					u := tc.failing(i)
					if err := f.Dyn.Tracker().Delete(tc.gvr, u.GetNamespace(), u.GetName()); err != nil {
						t.Fatal(err)
					}
					synctest.Wait()
				}
				settle(10 * time.Second)
				if got := failed.Len(); got != 0 {
					t.Errorf("failures kept once the %d objects are deleted = %d, want 0", n, got)
				}
			})
		})
	}
}

// relationFailures is what holds the failures of ctrl's one Related or
// References.
func relationFailures(ctrl *Controller) *control.FailedOnce { return &ctrl.engine.Relations[0].Failed }

// failingConfigMap is the ConfigMap i of a test's failing ones.
func failingConfigMap(i int) *unstructured.Unstructured {
	return configMapObject("default", "bad-"+strconv.Itoa(i), "boom", nil)
}

// A Reader's Get with a reconcile's context reads past that reconcile's
// own write of an object its cache won't hold (issue 44, point 1): one
// deleted since (by anyone), or one outside the Reader's namespace or
// labels, is read at once, not after a 5s wait that then failed saying
// the cache hadn't brought the write.
func TestAReadersGetOfAnOwnWriteItsCacheWontHoldDoesntWait(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sel           Selector
		ns, cm        string
		labels        map[string]string
		deleteWritten bool
	}{
		{"deleted since", Selector{}, "default", "c1", nil, true},
		{"in another namespace", Selector{Namespace: "default"}, "other", "c9", nil, false},
		{"outside its labels", Selector{Labels: "tier=web"}, "default", "c9", map[string]string{"tier": "db"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, cms, ledger, ctx := readingOwnWrites(t, tc.sel)
				rv := "100000" // a version the cache never brings of it
				if tc.deleteWritten {
					f.Update(t, configMapsGVR, configMapObject("default", "c1", "written", nil))
					rv = f.Get(t, configMapsGVR, "default", "c1").GetResourceVersion()
				}
				wroteConfigMap(ledger, tc.ns, tc.cm, transport.Answer{ResourceVersion: rv, Labels: tc.labels})
				if tc.deleteWritten {
					if err := f.Dyn.Tracker().Delete(configMapsGVR, "default", "c1"); err != nil {
						t.Fatal(err)
					}
				}
				settle(10 * time.Millisecond)
				start := time.Now()
				_, err := cms.Get(ctx, tc.ns, tc.cm)
				if took := time.Since(start); took != 0 || !apierrors.IsNotFound(err) {
					t.Errorf("Get = %v after %v, want NotFound at once", err, took)
				}
			})
		})
	}
}

// A Reader declared after a controller that only owns its resource began
// serving reads a cache of the objects' owners only: its Get fails saying
// why and what to do, not naming a type of the engine's (issue 44,
// suspected: it said "the cache holds a *kube.ownedObject").
func TestALateReadOfAnOwnedOnlyCacheSaysWhatToDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, siteKinds, siteObject("default", "a", "c1"), configMapObject("default", "c1", "one", nil))
		client := testClient(t, fakeSetup(nil))
		nothing := ReconcilerFunc[siteSpec, siteStatus](func(context.Context, website) (Result[siteStatus], error) {
			return Result[siteStatus]{}, nil
		})
		cm := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "default"}}
		if _, err := f.Meta.Resource(configMapsGVR).Namespace("default").(metadataCreator).CreateFake(cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		served(t, siteController(t, f, client, nil, testSettings(), nothing, Owns(configMapsGVR)))
		settle(10 * time.Second)
		late := Read(client, configMapKind, Selector{})
		_, err := late.Get(t.Context(), "default", "c1")
		const want = "declare every Read before the first controller serves, and give the Reader to a controller that reads it (kube.Reads)"
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "*") {
			t.Errorf("a late Read's Get = %v, want an error saying %q, naming no Go type", err, want)
		}
	})
}

// One object a Reader's List can't decode is left out, recorded once, not
// a failure of every List (issue 44, suspected: every reconcile that
// listed failed); once it decodes it is listed again.
func TestAReadersListLeavesOutWhatDoesntDecode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := siteObject("default", "bad", "c1")
		bad.Object["spec"] = map[string]any{"contentFrom": int64(42)}
		f := newFakeCluster(t, siteKinds, siteObject("default", "a", "c1"), bad)
		tel := humustest.NewTelemetry()
		client := testClient(t, fakeSetup(tel))
		all := ReadResource(client, sites, Selector{})
		nothing := ReconcilerFunc[siteSpec, siteStatus](func(context.Context, website) (Result[siteStatus], error) {
			return Result[siteStatus]{}, nil
		})
		served(t, siteController(t, f, client, nil, testSettings(), nothing, Reads(all)))
		settle(10 * time.Second)
		names := func() string {
			got, err := all.List(t.Context(), "", nil)
			if err != nil {
				t.Fatalf("List = %v, want the objects that decode", err)
			}
			var ns []string
			for _, w := range got {
				ns = append(ns, w.Name)
			}
			slices.Sort(ns)
			return strings.Join(ns, ",")
		}
		for range 3 {
			if got := names(); got != "a" {
				t.Errorf("List = %s, want a alone", got)
			}
		}
		if n := len(recordsWithBody(tel, "reading an object failed: every List leaves it out until it changes")); n != 1 {
			t.Errorf("records of the object List left out = %d, want 1", n)
		}
		if _, err := all.Get(t.Context(), "default", "bad"); err == nil || !strings.Contains(err.Error(), "spec.contentFrom") {
			t.Errorf("Get of it = %v, want an error naming spec.contentFrom", err)
		}
		f.Update(t, sitesGVR, siteObject("default", "bad", "c2"))
		settle(time.Second)
		if got := names(); got != "a,bad" {
			t.Errorf("List once it decodes = %s, want a,bad", got)
		}
		if n := all.Unreadable.Len(); n != 0 {
			t.Errorf("objects kept as left out = %d, want 0", n)
		}
	})
}

// A Reader's List reads the App's own writes of the resource, as Get does
// (issue 44, point 2: List never waited): it waits for the cache to bring
// each, fails naming one it doesn't bring within 5 s, waits for none
// without a write pending, and forgets a write whose event never came
// 30 s after it was made.
func TestAReadersListReadsTheAppsOwnWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, cms, ledger, ctx := readingOwnWrites(t, Selector{})
		start := time.Now()
		if got, err := cms.List(ctx, "", nil); err != nil || len(got) != 1 || time.Since(start) != 0 {
			t.Fatalf("List with no write pending = %d objects, %v, after %v; want c1 at once", len(got), err, time.Since(start))
		}
		// The reconcile created c2; the API server answered with the
		// version the fake's next write makes.
		next := f.UpcomingRV()
		wroteConfigMap(ledger, "default", "c2", transport.Answer{ResourceVersion: next, Created: true})
		got := make(chan int, 1)
		go func() {
			l, err := cms.List(ctx, "default", nil)
			if err != nil {
				t.Error(err)
			}
			got <- len(l)
		}()
		settle(time.Second)
		select {
		case n := <-got:
			t.Fatalf("List returned %d objects before the cache brought the write", n)
		default:
		}
		f.Create(t, configMapsGVR, configMapObject("default", "c2", "two", nil))
		settle(10 * time.Millisecond)
		if n := <-got; n != 2 {
			t.Errorf("List after its own create = %d objects, want c1 and c2", n)
		}

		wroteConfigMap(ledger, "default", "c3", transport.Answer{ResourceVersion: "100000", Created: true})
		if _, err := cms.List(ctx, "", nil); err == nil || !strings.Contains(err.Error(), "hasn't brought the App's own write (resourceVersion 100000) of default/c3 within 5s") || !errors.Is(err, ErrCacheBehind) {
			t.Errorf("List with a write the cache never brings = %v, want an error naming it", err)
		}
		settle(30 * time.Second)
		if l, err := cms.List(ctx, "", nil); err != nil || len(l) != 2 {
			t.Errorf("List 30s after a write whose event never came = %d, %v; want what the cache holds", len(l), err)
		}
	})
}
