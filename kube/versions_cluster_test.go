package kube_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/webhook"
)

// versioned is memcachedVersions in a group of its own, so its CRD stands
// beside the other tests' Memcacheds.
func versioned() kube.Versions[MemcachedSpecV1beta1, MemcachedStatus] {
	v := memcachedVersions()
	alpha := Memcached
	alpha.Group = "versioned.example.com"
	v.Hub.Group = alpha.Group
	v.Others = []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{
		kube.VersionOf(alpha, memcachedToV1beta1, memcachedFromV1beta1).Deprecated("versioned.example.com/v1alpha1 Memcached is deprecated; use v1beta1"),
	}
	return v
}

type (
	alphaObject = kube.Object[MemcachedSpec, MemcachedStatus]
	betaObject  = kube.Object[MemcachedSpecV1beta1, MemcachedStatus]
)

// serveWebhook serves v's Handler as an App serves it: a webhook.Service,
// the core's HTTPS Service, listening on 127.0.0.1 through a humustest
// Host whose files hold a serving certificate of a CA of its own, as a
// cert-manager Secret volume would. It returns v with its Webhook's URL
// and CABundle set to the Service's.
func serveWebhook[Spec, Status any](t *testing.T, tel *humustest.Telemetry, v kube.Versions[Spec, Status]) kube.Versions[Spec, Status] {
	t.Helper()
	caPEM, certPEM, keyPEM := loopbackServing(t)
	host := humustest.NewHost()
	host.Files["etc/webhook/tls/tls.crt"] = &fstest.MapFile{Data: certPEM}
	host.Files["etc/webhook/tls/tls.key"] = &fstest.MapFile{Data: keyPEM}
	// The Handler doesn't depend on the Webhook's URL, which is the
	// Service's, known once it listens.
	v.Webhook = kube.ConversionWebhook{URL: "https://127.0.0.1/convert", CABundle: caPEM}
	h, err := v.Handler(tel.Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /convert", h)
	hook, err := webhook.NewService(&humus.Setup{Host: host.Host(), Telemetry: tel.Telemetry()},
		webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/etc/webhook/tls"}, mux)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- hook.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("the webhook's Serve = %v", err)
		}
		_ = hook.Shutdown(context.Background())
	})
	addr, err := hook.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v.Webhook.URL = "https://" + addr.String() + "/convert"
	return v
}

// TestClusterVersions runs the Memcached of two versions on the real
// control plane, converted by the webhook: objects written at each
// version are read, listed and shown by kubectl at the other, a write at
// v1alpha1 keeps v1beta1's port, and a controller of v1beta1 settles an
// object written at v1alpha1.
func TestClusterVersions(t *testing.T) {
	c := clustertest.Get(t)
	tel := humustest.NewTelemetry()
	v := serveWebhook(t, tel, versioned())
	c.Install(t, v)
	ns := c.Namespace(t)
	d := dynamic.NewForConfigOrDie(c.AdminConfig())
	betaRes := v.Hub
	alphaR := Memcached
	alphaR.Group = v.Hub.Group
	alphas := kube.NewTypedClientOn(d, alphaR)
	betas := kube.NewTypedClientOn(d, betaRes)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	if _, err := alphas.Create(ctx, alphaObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Spec: MemcachedSpec{Size: 2, Image: "memcached:1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := betas.Create(ctx, betaObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}, Spec: MemcachedSpecV1beta1{Replicas: 3, Image: "memcached:1", Port: 11211}}); err != nil {
		t.Fatal(err)
	}

	t.Run("read at the other version", func(t *testing.T) { checkReadAtTheOtherVersion(ctx, t, alphas, betas, ns) })

	t.Run("kubectl's table", func(t *testing.T) {
		alphaTable := table(t, c.AdminConfig(), "versioned.example.com/v1alpha1", ns, "memcacheds", "Name", "Size")
		if want := [][]string{{"a", "2"}, {"b", "3"}}; !slices.EqualFunc(alphaTable, want, slices.Equal) {
			t.Errorf("kubectl get memcacheds.v1alpha1.versioned.example.com: NAME and SIZE %v, want %v", alphaTable, want)
		}
		betaTable := table(t, c.AdminConfig(), "versioned.example.com/v1beta1", ns, "memcacheds", "Name", "Replicas", "Port")
		if want := [][]string{{"a", "2", "<nil>"}, {"b", "3", "11211"}}; !slices.EqualFunc(betaTable, want, slices.Equal) {
			t.Errorf("kubectl get memcacheds.v1beta1.versioned.example.com: NAME, REPLICAS and PORT %v, want %v", betaTable, want)
		}
	})

	t.Run("a write at v1alpha1 keeps v1beta1's port", func(t *testing.T) { checkAWriteAtV1alpha1KeepsThePort(ctx, t, d, betas, ns) })

	t.Run("a controller of v1beta1 settles an object written at v1alpha1", func(t *testing.T) { checkAControllerOfV1beta1Settles(ctx, t, c, betaRes, alphas, ns) })

	t.Run("the webhook's telemetry", func(t *testing.T) { checkTheWebhooksTelemetry(t, tel) })
}

func names[Spec, Status any](objs []kube.Object[Spec, Status]) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	slices.Sort(out)
	return out
}

// table asks the API server for the objects of plural at apiVersion in ns
// as a Table, as kubectl get does, and returns each row's cells of the
// columns named, sorted by the first, each as fmt prints it.
func table(t *testing.T, cfg *rest.Config, apiVersion, ns, plural string, columns ...string) [][]string {
	t.Helper()
	tab, body := getTable(t, cfg, apiVersion, ns, plural)
	var rows [][]string
	for _, r := range tab.Rows {
		var cells []string
		for _, name := range columns {
			i := slices.IndexFunc(tab.ColumnDefinitions, func(d metav1.TableColumnDefinition) bool { return d.Name == name })
			if i < 0 {
				t.Fatalf("the Table at %s has no column %s: %s", apiVersion, name, body)
			}
			cells = append(cells, fmt.Sprint(r.Cells[i]))
		}
		rows = append(rows, cells)
	}
	slices.SortFunc(rows, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return rows
}

// checkReadAtTheOtherVersion: a, written at v1alpha1, and b, at v1beta1,
// read and list at the other version through the typed clients.
func checkReadAtTheOtherVersion(ctx context.Context, t *testing.T, alphas *kube.TypedClient[alphaObject], betas *kube.TypedClient[betaObject], ns string) {
	t.Helper()
	a, err := betas.Get(ctx, ns, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a.APIVersion != "versioned.example.com/v1beta1" || a.Spec.Replicas != 2 || a.Spec.Image != "memcached:1" || a.Spec.Port != 0 {
		t.Errorf("a, written at v1alpha1, at v1beta1: %s %+v", a.APIVersion, a.Spec)
	}
	b, err := alphas.Get(ctx, ns, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.APIVersion != "versioned.example.com/v1alpha1" || b.Spec.Size != 3 {
		t.Errorf("b, written at v1beta1, at v1alpha1: %s %+v", b.APIVersion, b.Spec)
	}
	for _, list := range []func() ([]string, error){
		func() ([]string, error) { l, err := alphas.List(ctx, ns, nil, nil); return names(l), err },
		func() ([]string, error) { l, err := betas.List(ctx, ns, nil, nil); return names(l), err },
	} {
		got, err := list()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("listed %v, want a and b", got)
		}
	}
}

// checkAWriteAtV1alpha1KeepsThePort updates b at v1alpha1, through the
// dynamic client as kubectl edit would, and reads it at v1beta1.
func checkAWriteAtV1alpha1KeepsThePort(ctx context.Context, t *testing.T, d dynamic.Interface, betas *kube.TypedClient[betaObject], ns string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "versioned.example.com", Version: "v1alpha1", Resource: "memcacheds"}
	u, err := d.Resource(gvr).Namespace(ns).Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"].(map[string]any)["size"] = int64(1)
	if _, err := d.Resource(gvr).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := betas.Get(ctx, ns, "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.Replicas != 1 || b.Spec.Port != 11211 || len(b.Annotations) != 0 {
		t.Errorf("b, written at v1alpha1 with size 1, at v1beta1: %+v, annotations %v; want replicas 1, port 11211, no annotation", b.Spec, b.Annotations)
	}
}

// checkAControllerOfV1beta1Settles runs a controller of v1beta1, whose
// status applies must reach the objects written at v1alpha1.
func checkAControllerOfV1beta1Settles(ctx context.Context, t *testing.T, c *clustertest.Cluster, betaRes kube.Resource[MemcachedSpecV1beta1, MemcachedStatus], alphas *kube.TypedClient[alphaObject], ns string) {
	t.Helper()
	setup := &humus.Setup{Host: humustest.NewHost().Host(), Telemetry: humustest.NewTelemetry().Telemetry()}
	client, err := kube.NewClient(setup, kube.Connection{
		Server: c.Server(), TLS: &tls.Config{RootCAs: c.CA()},
		Token: func(context.Context) (string, error) { return c.AdminToken(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	s := kube.DefaultSettings()
	s.Name = "versioned-memcached"
	s.Namespace = ns
	s.LeaderElection.Namespace = ns
	s.LeaderElection.Identity = "replica-1"
	ctrl, err := kube.NewController(setup, client, s, betaRes, kube.ReconcilerFunc[MemcachedSpecV1beta1, MemcachedStatus](
		func(_ context.Context, m betaObject) (kube.Result[MemcachedStatus], error) {
			st := m.Status
			st.ReadyReplicas = m.Spec.Replicas
			return kube.Result[MemcachedStatus]{Status: &st}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Serve(sctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	}()
	if _, err := alphas.Create(ctx, alphaObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}, Spec: MemcachedSpec{Size: 3, Image: "memcached:1"}}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		for name, want := range map[string]int32{"a": 2, "b": 1, "c": 3} {
			m, err := alphas.Get(ctx, ns, name)
			if err != nil {
				return err
			}
			if m.Status.ReadyReplicas != want {
				return fmt.Errorf("%s's status at v1alpha1: readyReplicas %d, want %d", name, m.Status.ReadyReplicas, want)
			}
		}
		return nil
	})
}

// checkTheWebhooksTelemetry: conversions both ways, all successful.
func checkTheWebhooksTelemetry(t *testing.T, tel *humustest.Telemetry) {
	t.Helper()
	counts := conversionCounts(t, tel)
	var up, down int64
	for set, n := range counts {
		from, _ := set.Value("humus.kube.conversion.from")
		to, _ := set.Value("humus.kube.conversion.to")
		outcome, _ := set.Value("humus.kube.conversion.outcome")
		if outcome.AsString() != "success" {
			t.Errorf("%d conversions %s", n, set.Encoded(nil))
		}
		switch {
		case from.AsString() == "versioned.example.com/v1alpha1" && to.AsString() == "versioned.example.com/v1beta1":
			up += n
		case from.AsString() == "versioned.example.com/v1beta1" && to.AsString() == "versioned.example.com/v1alpha1":
			down += n
		}
	}
	if up == 0 || down == 0 {
		t.Errorf("converted %d objects up and %d down, want some of each: %v", up, down, counts)
	}
	t.Logf("converted %d objects up to v1beta1 and %d down to v1alpha1", up, down)
}

// TestClusterVersionsMigrate moves the storage version from v1alpha1 to
// v1beta1 with objects stored at v1alpha1, and migrates them: an
// Migrate run before the webhook serves fails and changes nothing; an
// interrupted Migrate resumes, writing only what is left; a finished one
// returns at once; and v1alpha1 can then leave the CRD.
func TestClusterVersionsMigrate(t *testing.T) {
	c := clustertest.Get(t)
	v := versioned()
	alpha := Memcached
	alpha.Group = "migrated.example.com"
	v.Hub.Group = alpha.Group
	v.Others = []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{kube.VersionOf(alpha, memcachedToV1beta1, memcachedFromV1beta1)}
	v.Storage = "v1alpha1"
	v = serveWebhook(t, humustest.NewTelemetry(), v)
	c.Install(t, v)
	ns := c.Namespace(t)
	d := dynamic.NewForConfigOrDie(c.AdminConfig())
	alphas := kube.NewTypedClientOn(d, alpha)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	const n = 600 // more than a page of 500
	createAlphas(ctx, t, alphas, ns, n)

	v.Storage = "v1beta1"
	c.Install(t, v)
	if got := storedVersions(t, d, v); !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
		t.Fatalf("storedVersions %v before the migration, want v1alpha1 and v1beta1", got)
	}

	// Where the docs say not to run it, the controller's Init, before the
	// pods' webhook serves (a first install, or every replica restarted):
	// nothing answers the conversions, and Migrate fails, naming the
	// webhook, having changed nothing; those pods would crash-loop. Run
	// once the webhook serves, as the docs say, it works (below).
	crds := d.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd, err := crds.Get(ctx, "memcacheds."+v.Hub.Group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(crd.Object, "https://"+unusedLoopback(t)+"/convert", "spec", "conversion", "webhook", "clientConfig", "url"); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	err = v.Migrate(dctx, d, nil)
	dcancel()
	if err == nil || !strings.Contains(err.Error(), "conversion webhook") {
		t.Fatalf("Migrate with no webhook serving = %v, want an error naming the conversion webhook", err)
	}
	t.Logf("Migrate with no webhook serving: %v", err)
	if got := storedVersions(t, d, v); !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
		t.Errorf("storedVersions %v after a migration with no webhook, want both still", got)
	}
	c.Install(t, v)

	// Interrupted after its first page.
	pctx, stop := context.WithCancel(ctx)
	var first []kube.Migration
	err = v.Migrate(pctx, d, func(m kube.Migration) {
		first = append(first, m)
		stop()
	})
	stop()
	if err == nil || len(first) != 1 || first[0].Rewritten != 500 || first[0].Done {
		t.Fatalf("Migrate cancelled after a page: %v, progress %+v; want an error after 500 rewritten", err, first)
	}
	if got := storedVersions(t, d, v); !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
		t.Errorf("storedVersions %v after an interrupted migration, want both still", got)
	}

	// Resumed: the first page's objects are stored at v1beta1 already.
	var progress []kube.Migration
	started := time.Now()
	if err := v.Migrate(ctx, d, func(m kube.Migration) { progress = append(progress, m) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed migration of %d objects took %v: %+v", n, time.Since(started).Round(time.Millisecond), progress)
	last := progress[len(progress)-1]
	if !last.Done || last.Rewritten != n-500 || last.Stored != 500 || len(progress) != 2 || progress[0].Remaining != n-500 {
		t.Errorf("resumed Migrate's progress %+v, want a page and its end: 100 rewritten and 500 stored already, done", progress)
	}
	if got := storedVersions(t, d, v); !slices.Equal(got, []string{"v1beta1"}) {
		t.Errorf("storedVersions %v after the migration, want v1beta1 alone", got)
	}

	// Again: nothing to do.
	progress = nil
	if err := v.Migrate(ctx, d, func(m kube.Migration) { progress = append(progress, m) }); err != nil || len(progress) != 1 || progress[0] != (kube.Migration{Done: true}) {
		t.Errorf("Migrate once migrated: %v, progress %+v; want done at once", err, progress)
	}

	// Every object reads the same at v1beta1, and v1alpha1 can go.
	checkMigrated(ctx, t, kube.NewTypedClientOn(d, v.Hub), ns, n)
	v.Others = nil
	c.Install(t, v)
}

// createAlphas creates n objects at v1alpha1, m-000 and on, of sizes 1 to
// 3, 8 at a time.
func createAlphas(ctx context.Context, t *testing.T, alphas *kube.TypedClient[alphaObject], ns string, n int) {
	t.Helper()
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := alphas.Create(ctx, alphaObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%03d", i)}, Spec: MemcachedSpec{Size: 1 + int32(i%3), Image: "memcached:1"}})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

}

// checkMigrated checks that the n objects createAlphas made read the same
// at v1beta1.
func checkMigrated(ctx context.Context, t *testing.T, betas *kube.TypedClient[betaObject], ns string, n int) {
	t.Helper()
	list, err := betas.List(ctx, ns, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		var i int
		_, _ = fmt.Sscanf(m.Name, "m-%d", &i)
		if m.Spec.Replicas != 1+int32(i%3) {
			t.Errorf("%s at v1beta1: replicas %d, want %d", m.Name, m.Spec.Replicas, 1+i%3)
		}
	}
	if len(list) != n {
		t.Errorf("%d objects at v1beta1, want %d", len(list), n)
	}
}

// storedVersions is the CRD of v's status.storedVersions.
func storedVersions(t *testing.T, d dynamic.Interface, v kube.Versions[MemcachedSpecV1beta1, MemcachedStatus]) []string {
	t.Helper()
	crd, err := d.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
		Get(t.Context(), v.Hub.Plural+"."+v.Hub.Group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	return got
}

// unusedLoopback is a loopback address nothing listens on.
func unusedLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
