package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/z5labs/humus/kube/clustertest"
)

// The scenarios of the cache the controllers of an App share, each App
// (cacheapps_cluster_test.go) in a process of its own: a related
// object's change reaching the objects that name it (Related), two
// controllers owning one resource (SharedOwns), and a Reader's label
// selector (Selector).

// siteAccount is the ServiceAccount the scenarios' Apps run as.
const siteAccount = "site-controller"

// siteGrants is what the scenarios' Apps need in ns: their controllers'
// own rights on Websites and Blogs and their Leases, and list and watch
// on the ConfigMaps they read and the Deployments they own.
func siteGrants(ns string) []clustertest.Grant {
	return []clustertest.Grant{{Namespace: ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{websites.Group}, Resources: []string{websites.Plural, blogs.Plural}, Verbs: []string{"list", "watch", "patch"}},
		{APIGroups: []string{websites.Group}, Resources: []string{websites.Plural + "/status", blogs.Plural + "/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}},
	}}}
}

// installSites installs the Website and Blog CRDs.
func (bn *bench) installSites(b *testing.B) {
	b.Helper()
	w, err := websites.CRD()
	if err != nil {
		b.Fatal(err)
	}
	bn.c.InstallCRD(b, w)
	bl, err := blogs.CRD()
	if err != nil {
		b.Fatal(err)
	}
	bn.c.InstallCRD(b, bl)
}

// prepareApp starts the process of the App named app (benchApps), as pod
// in ns under siteAccount, with 4 workers and env on top of the pod's,
// ready for p.start to start it.
func (bn *bench) prepareApp(b *testing.B, ns, pod, app string, env map[string]string) *controller {
	b.Helper()
	host := bn.c.PodHost(b, ns, pod, siteAccount, siteGrants(ns)...)
	probes := host.Env["PROBES_ADDR"]
	host.Env["WATCH_NAMESPACE"] = ns
	host.Env["WORKERS"] = "4"
	maps.Copy(host.Env, env)
	return &controller{p: spawnApp(b, host, app), probes: probes, user: "system:serviceaccount:" + ns + ":" + siteAccount}
}

// siteName and configMapName name the scenarios' objects.
func siteName(i int) string      { return fmt.Sprintf("site-%05d", i) }
func configMapName(i int) string { return fmt.Sprintf("content-%03d", i) }

// createSites creates Websites site-<0> to site-<n-1> in ns, the i-th
// naming the ConfigMap from(i) ("" for none), 16 at once, and returns
// their UIDs.
func (bn *bench) createSites(b *testing.B, ns string, n int, from func(i int) string) []types.UID {
	b.Helper()
	uids := make([]types.UID, n)
	sites := bn.dyn.Resource(websites.GVR()).Namespace(ns)
	if err := each(n, 16, func(i int) error {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": websites.Group + "/" + websites.Version,
			"kind":       websites.Kind,
			"metadata":   map[string]any{"name": siteName(i)},
			"spec":       map[string]any{"contentFrom": from(i)},
		}}
		created, err := sites.Create(context.Background(), u, metav1.CreateOptions{})
		if err == nil {
			uids[i] = created.GetUID()
		}
		return err
	}); err != nil {
		b.Fatalf("creating Websites: %v", err)
	}
	return uids
}

// createConfigMaps creates n ConfigMaps in ns, content-<0> to
// content-<n-1>, 16 at once, each with data and the labels labels(i)
// returns.
func (bn *bench) createConfigMaps(b *testing.B, ns string, n int, data map[string]string, labels func(i int) map[string]string) {
	b.Helper()
	if err := each(n, 16, func(i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configMapName(i), Labels: labels(i)}, Data: data}
		_, err := bn.kc.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("creating ConfigMaps: %v", err)
	}
}

// contents tracks, from an informer of ns's Websites, each one's
// status.content and when it last changed, as the benchmark's own watch
// sees it.
type contents struct {
	mu      sync.Mutex
	content map[string]string
	at      map[string]time.Time
	stop    context.CancelFunc
	done    sync.WaitGroup
}

func (bn *bench) watchContents(b *testing.B, ns string) *contents {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &contents{content: map[string]string{}, at: map[string]time.Time{}, stop: cancel}
	inf := dynamicinformer.NewFilteredDynamicInformer(bn.dyn, websites.GVR(), ns, 0, cache.Indexers{}, nil).Informer()
	see := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		now := time.Now()
		content, _, _ := unstructured.NestedString(u.Object, "status", "content")
		c.mu.Lock()
		defer c.mu.Unlock()
		if old, seen := c.content[u.GetName()]; !seen || old != content {
			c.content[u.GetName()], c.at[u.GetName()] = content, now
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    see,
		UpdateFunc: func(_, obj any) { see(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	c.done.Go(func() { inf.RunWithContext(ctx) })
	return c
}

// await waits up to within, looking every poll, until each of names has
// the content want, and returns when the first and the last of them got
// it.
func (c *contents) await(b *testing.B, names []string, want string, within, poll time.Duration) (first, last time.Time) {
	b.Helper()
	deadline := time.Now().Add(within)
	for {
		c.mu.Lock()
		first, last = time.Time{}, time.Time{}
		missing := 0
		for _, name := range names {
			if c.content[name] != want {
				missing++
				continue
			}
			at := c.at[name]
			if at.After(last) {
				last = at
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
		}
		c.mu.Unlock()
		if missing == 0 {
			return first, last
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d Websites don't serve %q after %v", missing, len(names), want, within)
		}
		time.Sleep(poll)
	}
}

// longestGap is the longest time between two of names' last changes, in
// the order they came, and when it began.
func (c *contents) longestGap(names []string) (gap time.Duration, from time.Time) {
	c.mu.Lock()
	times := make([]time.Time, 0, len(names))
	for _, name := range names {
		times = append(times, c.at[name])
	}
	c.mu.Unlock()
	slices.SortFunc(times, time.Time.Compare)
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d > gap {
			gap, from = d, times[i-1]
		}
	}
	return gap, from
}

func (c *contents) close() {
	c.stop()
	c.done.Wait()
}

// BenchmarkClusterRelated is a related object's change reaching every
// object that names it: N Websites (10,000), each naming one of 100
// ConfigMaps (N/100 each), followed by kube.References' index, each
// reconcile reading its ConfigMap from the cache and writing its content
// into the Website's status. Once the cold start has settled (every
// Website serving its ConfigMap's content, as the benchmark's watch of
// the Websites sees it), each ConfigMap is changed once, one after
// another: a change's latency runs from just before its write to the
// benchmark's watch seeing the last of its referrers' statuses carry the
// new content.
//
// It runs with 4 workers, as the other scenarios, and with 16: the
// referrers' reconciles, 100 status writes, are most of a change's
// latency, and more workers make more of them at once.
func BenchmarkClusterRelated(b *testing.B) {
	n := scaled(10000)
	for _, workers := range []int{4, 16} {
		b.Run(fmt.Sprintf("N=%d/workers=%d", n, workers), func(b *testing.B) {
			for range b.N {
				relatedChanges(b, n, 100, workers)
			}
		})
	}
}

func relatedChanges(b *testing.B, n, m, workers int) {
	bn := newBench(b)
	bn.installSites(b)
	ns := bn.c.Namespace(b)
	progress(b, "creating %d ConfigMaps and %d Websites naming them", m, n)
	bn.createConfigMaps(b, ns, m, map[string]string{contentKey: "v0"}, func(int) map[string]string { return nil })
	bn.createSites(b, ns, n, func(i int) string { return configMapName(i % m) })
	c := bn.watchContents(b, ns)
	defer c.close()
	all := make([]string, n)
	for i := range all {
		all[i] = siteName(i)
	}

	progress(b, "starting the App, %d workers", workers)
	ctrl := bn.prepareApp(b, ns, "site-controller-0", "related", map[string]string{"WORKERS": strconv.Itoa(workers)})
	start := time.Now()
	ctrl.p.start(b)
	syncedAt := ctrl.synced(b)
	_, settled := c.await(b, all, "v0", patience(n), 100*time.Millisecond)
	settle := settled.Sub(start)
	progress(b, "synced in %s, settled in %s", syncedAt.Sub(start).Round(time.Millisecond), settle.Round(time.Millisecond))
	idle(b, ctrl, uint64(n))
	before, cold := ctrl.reconciles(b), ctrl.p.usage(b)

	progress(b, "changing each of the %d ConfigMaps, one after another", m)
	ch := bn.changeEach(b, c, ns, n, m)
	idle(b, ctrl, before+uint64(n))
	after, use := ctrl.reconciles(b), ctrl.p.usage(b)
	latencies, firsts := ch.latencies, ch.firsts
	progress(b, "a change reached its %d referrers in %.3f s at the median, %.3f s at the most; the longest gap between two of a change's referrers, %s at %s",
		n/m, latencies[len(latencies)/2], latencies[len(latencies)-1], ch.gap.Round(time.Millisecond), ch.gapAt.Format("15:04:05.000"))

	b.ReportMetric(settle.Seconds(), "settle-s")
	b.ReportMetric(syncedAt.Sub(start).Seconds(), "synced-s")
	b.ReportMetric(latencies[len(latencies)/2], "change-latency-p50-s")
	b.ReportMetric(latencies[len(latencies)*99/100], "change-latency-p99-s")
	b.ReportMetric(latencies[len(latencies)-1], "change-latency-max-s")
	b.ReportMetric(firsts[len(firsts)/2], "first-referrer-p50-s")
	b.ReportMetric(firsts[len(firsts)*99/100], "first-referrer-p99-s")
	b.ReportMetric(ch.gap.Seconds(), "longest-gap-s")
	b.ReportMetric(float64(n/m), "referrers/change")
	b.ReportMetric(float64(after-before)/float64(m), "reconciles/change")
	b.ReportMetric((use.CPU-cold.CPU)*1000/float64(m), "cpu-ms/change")
	b.ReportMetric(float64(before)/float64(n), "reconciles/object")
	b.ReportMetric(cold.HeapBytes/float64(n), "heap-B/object")
	bn.drop(b, ns, ctrl)
}

// changes is what changeEach measured, each change's latency in seconds,
// sorted.
type changes struct {
	// latencies run to the last referrer's status, firsts to the first's:
	// the first is the change's event, mapped and queued, and one
	// reconcile; the rest is the other referrers' reconciles, as many at
	// once as the App has workers.
	latencies, firsts []float64
	// gap is the longest time, in any change, between two of its
	// referrers' statuses, in the order they came: a stall of the
	// reconciles, or of the API server's answers to their writes; gapAt
	// is when it began.
	gap   time.Duration
	gapAt time.Time
}

// changeEach changes each of ns's m ConfigMaps once, one after another,
// each change's n/m referrers serving the new content before the next,
// as c sees them.
func (bn *bench) changeEach(b *testing.B, c *contents, ns string, n, m int) changes {
	b.Helper()
	ch := changes{latencies: make([]float64, 0, m), firsts: make([]float64, 0, m)}
	patch := []byte(`{"data":{"` + contentKey + `":"v1"}}`)
	for k := range m {
		j := k * 37 % m // every ConfigMap once, not in the order created
		var names []string
		for i := j; i < n; i += m {
			names = append(names, siteName(i))
		}
		written := time.Now()
		if _, err := bn.kc.CoreV1().ConfigMaps(ns).Patch(context.Background(), configMapName(j), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			b.Fatalf("changing %s: %v", configMapName(j), err)
		}
		first, last := c.await(b, names, "v1", time.Minute, 2*time.Millisecond)
		ch.latencies = append(ch.latencies, last.Sub(written).Seconds())
		ch.firsts = append(ch.firsts, first.Sub(written).Seconds())
		if g, at := c.longestGap(names); g > ch.gap {
			ch.gap, ch.gapAt = g, at
		}
	}
	slices.Sort(ch.latencies)
	slices.Sort(ch.firsts)
	return ch
}

// BenchmarkClusterSharedOwns is two controllers in one App that both own
// Deployments, the second's own resource (Blogs) with no objects: N
// Websites (10,000) exist, each the controller of a Deployment of its
// own, and the App runs three times, each in a process of its own: the
// Websites' controller alone ("one"), with the Blogs' controller on the
// same Client ("both"), and with it on a Client of its own ("apart",
// which shares no cache: what "both" would cost without sharing). Each
// reconciles nothing. For each: the App's heap once it has reconciled
// every Website and is idle, and the watches of Deployments it opened,
// by kube-apiserver's apiserver_longrunning_requests.
func BenchmarkClusterSharedOwns(b *testing.B) {
	n := scaled(10000)
	b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
		for range b.N {
			sharedOwns(b, n)
		}
	})
}

func sharedOwns(b *testing.B, n int) {
	bn := newBench(b)
	bn.installSites(b)
	ns := bn.c.Namespace(b)
	progress(b, "creating %d Websites, each the controller of a Deployment", n)
	uids := bn.createSites(b, ns, n, func(int) string { return "" })
	if err := each(n, 16, func(i int) error {
		_, err := bn.kc.AppsV1().Deployments(ns).Create(context.Background(), ownedDeployment(siteName(i), uids[i]), metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("creating Deployments: %v", err)
	}
	heap := map[string]float64{}
	for _, second := range []string{"", "shared", "apart"} {
		variant := map[string]string{"": "one", "shared": "both", "apart": "apart"}[second]
		progress(b, "the App, %s", variant)
		watches := bn.steadyWatches(b, "deployments")
		ctrl := bn.prepareApp(b, ns, "owners-"+variant, "owners", map[string]string{
			"OWNERS_SECOND": second, "CONTROLLER_NAME": "sites-" + variant,
		})
		ctrl.p.start(b)
		ctrl.synced(b)
		idle(b, ctrl, uint64(n))
		opened := bn.steadyWatches(b, "deployments") - watches
		use := ctrl.p.usage(b)
		ctrl.stop(b)
		heap[variant] = use.HeapBytes
		progress(b, "%s: heap %.1f MiB, %d watches of Deployments", variant, use.HeapBytes/(1<<20), opened)
		b.ReportMetric(use.HeapBytes/(1<<20), variant+"-heap-MiB")
		b.ReportMetric(float64(opened), variant+"-deployment-watches")
	}
	b.ReportMetric(heap["both"]/heap["one"], "both-vs-one")
	b.ReportMetric(heap["apart"]/heap["one"], "apart-vs-one")
	// What sharing saves: a second cache of the Deployments, and a second
	// Client's fixed costs.
	b.ReportMetric((heap["apart"]-heap["both"])/float64(n), "saved-B/object")
	bn.drop(b, ns)
}

// ownedDeployment is a Deployment of no replicas whose controller is the
// Website named owner.
func ownedDeployment(owner string, uid types.UID) *appsv1.Deployment {
	lbls := map[string]string{"app": owner}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: owner, Labels: lbls, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: websites.Group + "/" + websites.Version, Kind: websites.Kind, Name: owner, UID: uid, Controller: ptr.To(true),
		}}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
}

// steadyWatches is how many watches of resource kube-apiserver serves, by
// its apiserver_longrunning_requests gauge, once two readings a second
// apart agree.
func (bn *bench) steadyWatches(b *testing.B, resource string) int {
	b.Helper()
	var n int
	clustertest.Eventually(b, time.Minute, func(ctx context.Context) error {
		a := bn.watches(ctx, b, resource)
		time.Sleep(time.Second)
		if n = bn.watches(ctx, b, resource); n != a {
			return fmt.Errorf("%s's watches went from %d to %d", resource, a, n)
		}
		return nil
	})
	return n
}

// watches is how many watches of resource kube-apiserver serves now.
func (bn *bench) watches(ctx context.Context, b *testing.B, resource string) int {
	raw, err := bn.kc.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatalf("kube-apiserver's metrics: %v", err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `resource="`+resource+`"`) || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			n += int(v)
		}
	}
	return n
}

// BenchmarkClusterSelector is a Reader's label selector keeping objects
// out of the cache: N ConfigMaps (10,000) in a namespace, 10 of them
// labelled tier=web, read by a controller's Reader, once with the
// selector tier=web ("selected") and once without ("all"), each App in a
// process of its own. For each: the App's heap once synced, the
// ConfigMaps its cache holds, and the bytes it received; the benchmark
// fails unless the App's list of ConfigMaps carried the selector, as its
// Client's spans record the request.
func BenchmarkClusterSelector(b *testing.B) {
	n := scaled(10000)
	b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
		for range b.N {
			selected(b, n, 10)
		}
	})
}

func selected(b *testing.B, n, web int) {
	bn := newBench(b)
	bn.installSites(b)
	ns := bn.c.Namespace(b)
	progress(b, "creating %d ConfigMaps, %d of them tier=web", n, web)
	// A page of a kilobyte or so, as a Website's content might be.
	data := map[string]string{contentKey: strings.Repeat("<p>Hello, world.</p>\n", 50)}
	bn.createConfigMaps(b, ns, n, data, func(i int) map[string]string {
		if i%(n/web) == 0 {
			return map[string]string{"tier": "web"}
		}
		return map[string]string{"tier": "other"}
	})
	heap := map[string]float64{}
	for _, sel := range []string{"tier=web", ""} {
		variant := map[string]string{"tier=web": "selected", "": "all"}[sel]
		progress(b, "the App, %s", variant)
		ctrl := bn.prepareApp(b, ns, "selector-"+variant, "selector", map[string]string{
			"CONFIGMAP_LABELS": sel, "CONTROLLER_NAME": "selector-" + variant,
		})
		ctrl.p.start(b)
		ctrl.synced(b)
		var seen seenReport
		clustertest.Eventually(b, time.Minute, func(ctx context.Context) error {
			return getJSON(ctx, "http://"+ctrl.probes+"/seen", &seen)
		})
		use := ctrl.p.usage(b)
		ctrl.stop(b)
		if len(seen.Lists) == 0 {
			b.Fatalf("%s: the App's Client recorded no list of ConfigMaps", variant)
		}
		for _, u := range seen.Lists {
			progress(b, "%s: the App asked for %s", variant, u)
			if sel != "" && !strings.Contains(u, "labelSelector=tier%3Dweb") {
				b.Fatalf("%s: the App's request %s doesn't carry its selector %s", variant, u, sel)
			}
		}
		heap[variant] = use.HeapBytes
		progress(b, "%s: heap %.1f MiB, %d ConfigMaps cached, %.1f MiB received", variant, use.HeapBytes/(1<<20), seen.Cached, float64(use.Received)/(1<<20))
		b.ReportMetric(use.HeapBytes/(1<<20), variant+"-heap-MiB")
		b.ReportMetric(float64(seen.Cached), variant+"-cached-objects")
		b.ReportMetric(float64(use.Received)/(1<<20), variant+"-received-MiB")
	}
	b.ReportMetric(heap["selected"]/heap["all"], "selected-vs-all")
	b.ReportMetric((heap["all"]-heap["selected"])/float64(n-web), "kept-out-B/object")
	bn.drop(b, ns)
}

// getJSON decodes the answer to GET url into v.
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(v)
}
