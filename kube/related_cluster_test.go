package kube

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// siteRBAC is what a Website controller in ns needs: its own rights, and
// list and watch on the ConfigMaps it reads.
func siteRBAC(ns string) []clustertest.Grant {
	g := controllerRBAC(sitesGVR.Group, sitesGVR.Resource, ns)
	g[0].Rules = append(g[0].Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}})
	return g
}

// siteSettings is a controller of ns's Websites, named name.
func siteSettings(ns, name string) Settings {
	s := testSettings()
	s.Name, s.Namespace, s.LeaderElection.Namespace = name, ns, ns
	return s
}

// siteCluster is the Website controllers' fixture on the real control
// plane: the Websites' CRD, a namespace of the test's own, and in it a
// ServiceAccount site-controller with grants, and a Client as it; and the
// admin's clients, to write what the controller reads.
type siteCluster struct {
	ns        string
	setup     *humus.Setup
	client    *Client
	admin     dynamic.Interface
	adminKube kubernetes.Interface
}

// newSiteCluster is a siteCluster whose ServiceAccount has siteRBAC(ns),
// and what more extend adds (nil: nothing).
func newSiteCluster(t *testing.T, extend func(ns string, grants []clustertest.Grant) []clustertest.Grant) *siteCluster {
	t.Helper()
	c := clustertest.Get(t)
	installCRD(t, c, sites)
	ns := c.Namespace(t)
	grants := siteRBAC(ns)
	if extend != nil {
		grants = extend(ns, grants)
	}
	token := c.ServiceAccount(t, ns, "site-controller", grants...)
	setup, client := clientAs(t, c, humustest.NewTelemetry(), token)
	return &siteCluster{ns: ns, setup: setup, client: client,
		admin: dynamic.NewForConfigOrDie(c.AdminConfig()), adminKube: kubernetes.NewForConfigOrDie(c.AdminConfig())}
}

// configMaps is a Reader of the namespace's ConfigMaps, through sc's Client.
func (sc *siteCluster) configMaps() *Reader[corev1.ConfigMap] {
	return Read(sc.client, configMapKind, Selector{Namespace: sc.ns})
}

// serve builds a controller of the namespace's Websites with s (nil:
// siteSettings, named site-controller), rec and parts, and serves it until
// t ends: stop is served's.
func (sc *siteCluster) serve(t *testing.T, s *Settings, rec Reconciler[siteSpec, siteStatus], parts ...Part) (ctrl *Controller, stop func() error) {
	t.Helper()
	settings := siteSettings(sc.ns, "site-controller")
	if s != nil {
		settings = *s
	}
	ctrl, err := NewController(sc.setup, sc.client, settings, sites, rec, parts...)
	if err != nil {
		t.Fatal(err)
	}
	return ctrl, served(t, ctrl)
}

func createSite(t *testing.T, d dynamic.Interface, ns, name, contentFrom string) {
	t.Helper()
	u := siteObject(ns, name, contentFrom)
	unstructured.RemoveNestedField(u.Object, "metadata", "uid")
	unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
	if _, err := d.Resource(sitesGVR).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func putConfigMap(t *testing.T, k kubernetes.Interface, ns, name, content string, lbls map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls}, Data: map[string]string{"index.html": content}}
	_, err := k.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{})
	if err != nil {
		_, err = k.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// contentIs waits until the Website ns/name serves want.
func contentIs(t *testing.T, d dynamic.Interface, ns, name, want string) {
	t.Helper()
	clustertest.Eventually(t, 20*time.Second, func(ctx context.Context) error {
		u, err := d.Resource(sitesGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedString(u.Object, "status", "content"); got != want {
			return fmt.Errorf("%s's content = %q, want %q", name, got, want)
		}
		return nil
	})
}

// A Website follows the ConfigMap it names, read from the cache: its
// edits and its deletion reconcile every Website naming it, and a
// Website that names another ConfigMap no longer follows the first.
func TestClusterReferencesFollowTheConfigMapsTheyName(t *testing.T) {
	sc := newSiteCluster(t, nil)
	ns, admin, adminKube := sc.ns, sc.admin, sc.adminKube
	cms := sc.configMaps()
	var calls counter
	_, stop := sc.serve(t, nil, serveContent(cms, &calls), References(cms, contentFrom))
	putConfigMap(t, adminKube, ns, "c1", "one", nil)
	putConfigMap(t, adminKube, ns, "c2", "two", nil)
	createSite(t, admin, ns, "a", "c1")
	createSite(t, admin, ns, "b", "c1")
	contentIs(t, admin, ns, "a", "one")
	contentIs(t, admin, ns, "b", "one")

	edited := time.Now()
	putConfigMap(t, adminKube, ns, "c1", "one, edited", nil)
	contentIs(t, admin, ns, "a", "one, edited")
	contentIs(t, admin, ns, "b", "one, edited")
	t.Logf("c1's edit reached both Websites in %v", time.Since(edited).Round(time.Millisecond))

	if err := adminKube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	contentIs(t, admin, ns, "a", "")
	contentIs(t, admin, ns, "b", "")

	// a names c2 from now on: c1 comes back, and only b follows it.
	patch := []byte(`{"spec":{"contentFrom":"c2"}}`)
	if _, err := admin.Resource(sitesGVR).Namespace(ns).Patch(t.Context(), "a", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	contentIs(t, admin, ns, "a", "two")
	time.Sleep(time.Second)
	before := calls.Get("a")
	putConfigMap(t, adminKube, ns, "c1", "one, back", nil)
	contentIs(t, admin, ns, "b", "one, back")
	time.Sleep(2 * time.Second) // a reconcile of a would show
	if got := calls.Get("a") - before; got != 0 {
		t.Errorf("reconciles of a for c1's return, once a names c2 = %d, want 0", got)
	}
	if err := stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

// watchers is how many watches of resource kube-apiserver serves now, by
// its apiserver_longrunning_requests gauge.
func watchers(t *testing.T, k kubernetes.Interface, resource string) int {
	t.Helper()
	raw, err := k.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `resource="`+resource+`"`) || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			n += int(v)
		}
	}
	return n
}

// Two controllers on one Client that own Deployments and read ConfigMaps
// in one namespace open one watch of each on the API server: its count of
// the watches it serves grows by one for each, not two.
func TestClusterTwoControllersOnOneClientShareOneWatch(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, sites)
	installCRD(t, c, clusterCaches)
	ns := c.Namespace(t)
	grants := append(siteRBAC(ns), controllerRBAC(clusterCaches.GVR().Group, clusterCaches.GVR().Resource, ns)...)
	grants = append(grants, clustertest.Grant{Namespace: ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}},
	}})
	token := c.ServiceAccount(t, ns, "two-controllers", grants...)
	setup, client := clientAs(t, c, humustest.NewTelemetry(), token)
	adminKube := kubernetes.NewForConfigOrDie(c.AdminConfig())

	// Other tests' controllers come and go: wait for a moment when the
	// count holds still, before and after.
	steady := func(resource string) int {
		var n int
		clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
			a := watchers(t, adminKube, resource)
			time.Sleep(time.Second)
			if n = watchers(t, adminKube, resource); n != a {
				return fmt.Errorf("%s's watches went from %d to %d", resource, a, n)
			}
			return nil
		})
		return n
	}
	deps, cmsBefore := steady("deployments"), steady("configmaps")

	cms := Read(client, configMapKind, Selector{Namespace: ns})
	var calls counter
	sitesCtrl, err := NewController(setup, client, siteSettings(ns, "sites"), sites, serveContent(cms, &calls), Owns(deployments), References(cms, contentFrom))
	if err != nil {
		t.Fatal(err)
	}
	cachesSettings := siteSettings(ns, "caches")
	cachesCtrl, err := NewController(setup, client, cachesSettings, clusterCaches, readyReplicas(&calls), Owns(deployments), Reads(cms))
	if err != nil {
		t.Fatal(err)
	}
	served(t, sitesCtrl)
	served(t, cachesCtrl)
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		if !healthy(sitesCtrl) || !healthy(cachesCtrl) {
			return fmt.Errorf("the controllers haven't synced")
		}
		return nil
	})
	if got := steady("deployments") - deps; got != 1 {
		t.Errorf("watches of Deployments the two controllers opened = %d, want 1", got)
	}
	if got := steady("configmaps") - cmsBefore; got != 1 {
		t.Errorf("watches of ConfigMaps the two controllers opened = %d, want 1", got)
	}
}

// healthy reports whether ctrl's Synced is healthy.
func healthy(ctrl *Controller) bool { return ctrl.Synced().Healthy(context.Background()) == nil }

// A Reader's Selector is listed and watched with: the API server sends
// only the objects it keeps, so the cache holds no other.
func TestClusterAReadersSelectorKeepsOtherObjectsOut(t *testing.T) {
	sc := newSiteCluster(t, nil)
	ns := sc.ns
	for i := range 20 {
		putConfigMap(t, sc.adminKube, ns, fmt.Sprintf("other-%d", i), "not read", nil)
	}
	putConfigMap(t, sc.adminKube, ns, "web", "read", map[string]string{"tier": "web"})

	cms := Read(sc.client, configMapKind, Selector{Namespace: ns, Labels: "tier=web"})
	var calls counter
	ctrl, _ := sc.serve(t, nil, serveContent(cms, &calls), Reads(cms))
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		if !healthy(ctrl) {
			return fmt.Errorf("the controller hasn't synced")
		}
		return nil
	})
	got, err := cms.List(t.Context(), "", nil)
	if err != nil || len(got) != 1 || got[0].Name != "web" {
		var names []string
		for _, cm := range got {
			names = append(names, cm.Name)
		}
		t.Errorf("the cache holds %v (%v), want web alone", names, err)
	}
	if _, err := cms.Get(t.Context(), ns, "other-0"); err == nil {
		t.Error("Get of a ConfigMap outside the selector found it")
	}
}

// echoer writes a ConfigMap of its own for each Website, its data the
// Website's contentFrom, and reads it back from the cache at once, with
// the reconcile's context: each read must see the write just made.
type echoer struct {
	kube  kubernetes.Interface
	cms   *Reader[corev1.ConfigMap]
	calls counter
	stale chan string // a read that missed its own write
}

func (e *echoer) Reconcile(ctx context.Context, w website) (Result[siteStatus], error) {
	e.calls.Inc(w.Name)
	name := w.Name + "-echo"
	cm := corev1ac.ConfigMap(name, w.Namespace).WithData(map[string]string{"echo": w.Spec.ContentFrom})
	if _, err := e.kube.CoreV1().ConfigMaps(w.Namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: "site-controller", Force: true}); err != nil {
		return Result[siteStatus]{}, err
	}
	got, err := e.cms.Get(ctx, w.Namespace, name)
	if err != nil {
		return Result[siteStatus]{}, err
	}
	if got.Data["echo"] != w.Spec.ContentFrom {
		e.stale <- fmt.Sprintf("read %q right after writing %q", got.Data["echo"], w.Spec.ContentFrom)
	}
	st := siteStatus{Content: got.Data["echo"]}
	return Result[siteStatus]{Status: &st}, nil
}

// A Reader's Get, with the reconcile's context, sees the reconcile's own
// write made just before it, each time, though the watch event that
// brings it to the cache comes after the write's answer.
func TestClusterAReadAfterTheReconcilesOwnWriteSeesIt(t *testing.T) {
	sc := newSiteCluster(t, func(_ string, grants []clustertest.Grant) []clustertest.Grant {
		grants[0].Rules = append(grants[0].Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "patch"}})
		return grants
	})
	ns, admin := sc.ns, sc.admin
	cms := sc.configMaps()
	rec := &echoer{kube: kubernetes.NewForConfigOrDie(sc.client.Config()), cms: cms, stale: make(chan string, 100)}
	sc.serve(t, nil, rec, Reads(cms))
	createSite(t, admin, ns, "a", "v0")
	contentIs(t, admin, ns, "a", "v0")
	for i := 1; i <= 10; i++ {
		patch := fmt.Appendf(nil, `{"spec":{"contentFrom":"v%d"}}`, i)
		if _, err := admin.Resource(sitesGVR).Namespace(ns).Patch(t.Context(), "a", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		contentIs(t, admin, ns, "a", fmt.Sprintf("v%d", i))
	}
	close(rec.stale)
	for s := range rec.stale {
		t.Errorf("a reconcile's read missed its own write: %s", s)
	}
}

// A Reader's Get, with any context, sees the App's own writes and
// deletes made through its Client just before, each time, on the real
// control plane: a ConfigMap created, then patched, then deleted, read at
// once after each, from outside any reconcile (issue 44, point 2: before,
// only a reconcile's own writes, with its context, were waited for, and
// no delete).
func TestClusterAReadAfterTheAppsOwnWriteOrDeleteSeesIt(t *testing.T) {
	sc := newSiteCluster(t, func(_ string, grants []clustertest.Grant) []clustertest.Grant {
		grants[0].Rules = append(grants[0].Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "patch", "delete"}})
		return grants
	})
	ns := sc.ns
	cms := sc.configMaps()
	var calls counter
	ctrl, _ := sc.serve(t, nil, serveContent(cms, &calls), Reads(cms))
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		if !healthy(ctrl) {
			return fmt.Errorf("the controller hasn't synced")
		}
		return nil
	})
	kube := kubernetes.NewForConfigOrDie(sc.client.Config())
	ctx := t.Context()
	var stale []string
	for i := range 10 {
		name := fmt.Sprintf("x-%d", i)
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "created"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, err := cms.Get(ctx, ns, name); err != nil || got.Data["v"] != "created" {
			stale = append(stale, fmt.Sprintf("%s after its create: %v, %v", name, got.Data, err))
		}
		patch := []byte(`{"data":{"v":"patched"}}`)
		if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, err := cms.Get(ctx, ns, name); err != nil || got.Data["v"] != "patched" {
			stale = append(stale, fmt.Sprintf("%s after its patch: %v, %v", name, got.Data, err))
		}
		if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, err := cms.Get(ctx, ns, name); !apierrors.IsNotFound(err) {
			stale = append(stale, fmt.Sprintf("%s after its delete: %v, %v", name, got.Data, err))
		}
	}
	for _, s := range stale {
		t.Errorf("a read missed the App's own write: %s", s)
	}
}

// A Reconciler that hangs is ended by Settings.ReconcileTimeout: the
// status it returns then is applied, and it is retried with backoff.
func TestClusterAHungReconcileTimesOut(t *testing.T) {
	sc := newSiteCluster(t, nil)
	ns, admin := sc.ns, sc.admin
	s := siteSettings(ns, "site-controller")
	s.ReconcileTimeout = 2 * time.Second
	var calls counter
	sc.serve(t, &s, ReconcilerFunc[siteSpec, siteStatus](
		func(ctx context.Context, w website) (Result[siteStatus], error) {
			calls.Inc(w.Name)
			<-ctx.Done() // hangs, until the bound ends it
			st := siteStatus{Content: "timed out"}
			return Result[siteStatus]{Status: &st}, ctx.Err()
		}))
	started := time.Now()
	createSite(t, admin, ns, "hung", "c1")
	contentIs(t, admin, ns, "hung", "timed out")
	if took := time.Since(started); took < 2*time.Second {
		t.Errorf("the status was applied %v after the create, before the 2s bound", took)
	}
	clustertest.Eventually(t, 20*time.Second, func(context.Context) error {
		if n := calls.Get("hung"); n < 2 {
			return fmt.Errorf("reconciles of hung = %d, want it retried", n)
		}
		return nil
	})
}
