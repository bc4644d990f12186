// Package bench measures the Memcached example's controller, the same
// controller reconciling a version its objects aren't stored at, through
// a conversion webhook (conversion_cluster_test.go), and Apps of its own
// on the cache the controllers of a Client share (a Website that follows
// the ConfigMap it names, two owners of Deployments, a Reader's selector:
// cache_cluster_test.go), each App in a process of its own (this
// test binary started again), on the tests' real control plane: what
// `make bench` runs and kube/BENCHMARKS.md reports. Each benchmark is one run of a scenario (run them with
// -benchtime 1x and -count 3 for the median of three); its figures are
// custom metrics, and nothing here asserts a duration. With -profile, each
// App writes its CPU and heap profiles.
package bench_test

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/memcached/app"
	"github.com/z5labs/humus/kube/internal/procutil"
)

// The repository's tests build the control plane, never download it: its
// machines reach no download location.
func TestMain(m *testing.M) { os.Exit(clustertest.Run(m, clustertest.Fetch(clustertest.BuildOnly))) }

// scale multiplies every scenario's N, for a quick try of the benchmarks
// (-scale 0.05); BENCHMARKS.md's figures are at 1.
var scale = flag.Float64("scale", 1, "multiplies each scenario's object count")

func scaled(n int) int { return max(1, int(float64(n)**scale)) }

// progress says on stderr what a long benchmark is doing.
func progress(b *testing.B, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05"), b.Name(), fmt.Sprintf(format, args...))
}

type memcached = kube.Object[app.MemcachedSpec, app.MemcachedStatus]

// bench is one benchmark's view of the control plane: admin clients with
// no client-side rate limit, and the Memcached CRD installed.
type bench struct {
	c   *clustertest.Cluster
	dyn dynamic.Interface
	kc  kubernetes.Interface
	md  metadata.Interface
}

func newBench(b *testing.B) *bench {
	b.Helper()
	c := clustertest.Get(b)
	cfg := c.AdminConfig()
	dyn, kc := clients(b, cfg)
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	crd, err := app.Memcached.CRD()
	if err != nil {
		b.Fatal(err)
	}
	c.InstallCRD(b, crd)
	return &bench{c: c, dyn: dyn, kc: kc, md: md}
}

// asApp is clients under the App's own identity, in ns: its
// ServiceAccount, granted its RBAC (../deploy/rbac.yaml), as a pod's App
// is, and no client-side rate limit. The API server authenticates each of
// their requests by its token, authorizes it by RBAC and queues it by
// priority and fairness, which the admin's (system:masters) skip.
func (bn *bench) asApp(b *testing.B, ns string) (dynamic.Interface, kubernetes.Interface) {
	b.Helper()
	cfg := bn.c.AdminConfig()
	cfg.BearerToken = bn.c.ServiceAccount(b, ns, app.Name, clustertest.RBACGrants(b, "../deploy/rbac.yaml", ns)...)
	cfg.BearerTokenFile = ""
	return clients(b, cfg)
}

// clients is a dynamic client and a clientset for cfg, with no client-side
// rate limit.
func clients(b *testing.B, cfg *rest.Config) (dynamic.Interface, kubernetes.Interface) {
	b.Helper()
	cfg.QPS, cfg.Burst = -1, 0
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return dyn, kc
}

// create creates Memcacheds m-<from> to m-<to-1> in ns, 16 at once.
func (bn *bench) create(b *testing.B, ns string, from, to int) {
	b.Helper()
	memcacheds := bn.dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	if err := each(to-from, 16, func(i int) error {
		_, err := memcacheds.Create(context.Background(), newMemcached(from+i), metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("creating Memcacheds: %v", err)
	}
}

// each calls f for 0 to n-1, by workers goroutines at once, and returns
// the first error any call returned.
func each(n, workers int, f func(i int) error) error {
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func newMemcached(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": "m-" + strconv.Itoa(i)},
		"spec":       map[string]any{"size": int64(i%3 + 1)},
	}}
}

// settled tracks, from informers of ns's Memcacheds and Deployments, when
// each Memcached settled: Available=True for its generation, and its
// Deployment applied with a controller reference to it.
type settled struct {
	mu        sync.Mutex
	available map[string]bool
	owned     map[string]bool
	at        map[string]time.Time // when each settled
	want      int
	all       chan struct{} // closed once want have settled
	stop      context.CancelFunc
	done      sync.WaitGroup
}

func (bn *bench) track(b *testing.B, ns string, want int) *settled {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &settled{available: map[string]bool{}, owned: map[string]bool{}, at: map[string]time.Time{},
		want: want, all: make(chan struct{}), stop: cancel}
	// Informers, not bare watches: the API server ends a watch that falls
	// behind a burst of writes, and an informer watches again from where
	// it was. The Deployments' metadata is all it needs: their owners.
	informers := []cache.SharedIndexInformer{
		dynamicinformer.NewFilteredDynamicInformer(bn.dyn, app.Memcached.GVR(), ns, 0, cache.Indexers{}, nil).Informer(),
		metadatainformer.NewFilteredMetadataInformer(bn.md, appsv1.SchemeGroupVersion.WithResource("deployments"), ns, 0, cache.Indexers{}, nil).Informer(),
	}
	for i, see := range []func(obj any){s.memcached, s.deployment} {
		if _, err := informers[i].AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { see(obj) },
			UpdateFunc: func(_, obj any) { see(obj) },
		}); err != nil {
			b.Fatal(err)
		}
		s.done.Go(func() { informers[i].RunWithContext(ctx) })
	}
	return s
}

func (s *settled) memcached(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	// Read where it lies, as cheaply as the benchmark can: its process
	// shares the machine with the App's.
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	ok = false
	for _, c := range conditions {
		c, _ := c.(map[string]any)
		observed, _, _ := unstructured.NestedInt64(c, "observedGeneration")
		if c["type"] == "Available" && c["status"] == string(metav1.ConditionTrue) && observed == u.GetGeneration() {
			ok = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.available[u.GetName()] = ok
	s.check(u.GetName())
}

func (s *settled) deployment(obj any) {
	d, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref != nil && ref.Kind == "Memcached" && ref.Name == d.GetName() {
		s.owned[d.GetName()] = true
		s.check(d.GetName())
	}
}

// check notes when name settles; s.mu is held.
func (s *settled) check(name string) {
	if _, done := s.at[name]; done || !s.available[name] || !s.owned[name] {
		return
	}
	s.at[name] = time.Now()
	if len(s.at) == s.want {
		close(s.all)
	}
}

// await waits, for patience(n), for all n to settle, and returns how long
// after start the last one had.
func (s *settled) await(b *testing.B, n int, start time.Time) time.Duration {
	b.Helper()
	select {
	case <-s.all:
	case <-time.After(patience(n)):
		b.Fatalf("%d of %d Memcacheds settled in %s", len(s.times()), n, patience(n))
	}
	return slices.MaxFunc(slices.Collect(maps.Values(s.times())), time.Time.Compare).Sub(start)
}

// patience is how long the benchmark waits for n objects to settle, or to
// be deleted: 20 minutes, or 30 ms an object, a quarter of the rate they
// settle at on 2 cores.
func patience(n int) time.Duration { return max(20*time.Minute, time.Duration(n)*30*time.Millisecond) }

func (s *settled) times() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.at)
}

// count is how many have settled.
func (s *settled) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

// has reports whether name has settled.
func (s *settled) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.at[name]
	return ok
}

func (s *settled) close() {
	s.stop()
	s.done.Wait()
}

func decode(u *unstructured.Unstructured, into any) error {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

// controller is the Memcached App in a process of its own, as its pod
// would run it: p starts it and reports its figures; probes is its
// probes' address, and user the name the audit log gives it.
type controller struct {
	p      *appProcess
	probes string
	user   string
}

// prepare starts the process of the App's pod, pod in ns, with workers
// and env's variables on top of the pod's (its service account, token and
// Host), ready for p.start to start the App in it: the time the process
// takes to start counts in none of the figures.
func (bn *bench) prepare(b *testing.B, ns, pod string, workers int, env map[string]string) *controller {
	b.Helper()
	host := bn.c.PodHost(b, ns, pod, app.Name, clustertest.RBACGrants(b, "../deploy/rbac.yaml", ns)...)
	probes := host.Env["PROBES_ADDR"]
	host.Env["WATCH_NAMESPACE"] = ns
	host.Env["WORKERS"] = strconv.Itoa(workers)
	maps.Copy(host.Env, env)
	return &controller{p: spawn(b, host), probes: probes, user: "system:serviceaccount:" + ns + ":" + app.Name}
}

// synced waits for the probes' /readyz, and returns when it first
// answered ok.
func (c *controller) synced(b *testing.B) time.Time {
	b.Helper()
	clustertest.Eventually(b, 5*time.Minute, func(ctx context.Context) error { return clustertest.Ready(ctx, c.probes) })
	return time.Now()
}

func (c *controller) stop(b *testing.B) {
	b.Helper()
	c.p.signal(b)
	c.p.wait(b)
}

func (c *controller) reconciles(b *testing.B) uint64 {
	return c.p.histogram(b, "humus.kube.controller.reconcile.duration", "").Count
}

// quantile is the upper bound of the histogram bucket holding quantile q:
// what an explicit-bucket histogram can say of it.
func quantile(q float64, bounds []float64, buckets []uint64) float64 {
	var total uint64
	for _, n := range buckets {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	var seen uint64
	for i, n := range buckets {
		seen += n
		if seen >= rank {
			if i < len(bounds) {
				return bounds[i]
			}
			break
		}
	}
	return bounds[len(bounds)-1] // the overflow bucket: past the last bound
}

// writes counts the writes user made since from, by verb and resource,
// from the API server's audit log, which records every write.
func (bn *bench) writes(b *testing.B, user string, from time.Time) map[string]int {
	b.Helper()
	counts := map[string]int{}
	for _, e := range bn.c.Audit(b) {
		if e.User != user || e.RequestReceived.Before(from) {
			continue
		}
		res := e.Resource
		if e.Subresource != "" {
			res += "/" + e.Subresource
		}
		counts[e.Verb+" "+res]++
	}
	return counts
}

// coldStart is scenario 1 with scenarios 3, 4 and 7 in the same run: n
// Memcacheds exist before the App starts; it settles them all; the
// figures are the settle and sync times, the requests, reconciles, heap
// and CPU per object; then the App is restarted on the settled objects.
func coldStart(b *testing.B, n int, o coldOpts) {
	bn := newBench(b)
	// Scenario 2, the ceiling: the same writes from a plain client-go
	// program at the same concurrency, no informer and no queue. The first
	// phase after kube-apiserver starts runs 4 to 7% faster than every
	// one after it (BenchmarkClusterCeilingDrift), and a run starts on a
	// fresh kube-apiserver (the last run's relist restarted it). So the
	// ceiling is timed before the App, taking that first phase so that
	// the App doesn't, and reported as the fresh ceiling; and again after
	// the App, on the footing the App had: that is the ceiling. It is
	// timed on as many objects as the App's, for as long: the control
	// plane's own periodic work (etcd's compaction and the watch cache's
	// consistency check, each every five minutes and each costing as much
	// as the objects it holds) falls in the two phases alike.
	if o.beside > 0 {
		progress(b, "creating %d Memcacheds beside, in a namespace the App doesn't watch", o.beside)
		bn.create(b, bn.c.Namespace(b), 0, o.beside)
	}
	m := cmp.Or(o.freshN, n)
	progress(b, "the ceiling, before the App: %d objects' writes by hand", m)
	fresh := bn.ceiling(b, m, o.workers, "")
	ns := bn.c.Namespace(b)
	ctrl, settle := bn.coldApp(b, ns, n, o)
	progress(b, "the ceiling, after the App: %d objects' writes by hand", n)
	after := bn.ceiling(b, n, o.workers, fmt.Sprintf("ceiling-%d", n))
	bn.reportCeiling(b, n, settle, fresh, after)
	if o.relist {
		bn.relist(b, ns, ctrl, n)
	}
	if o.restart {
		ctrl = bn.restart(b, ns, ctrl, n, o)
	}
	if o.last {
		ctrl.stop(b) // the control plane goes with the process
		return
	}
	bn.drop(b, ns, ctrl)
}

// coldOpts says what a cold start runs besides the App's.
type coldOpts struct {
	workers int
	// freshN is how many objects the fresh ceiling, before the App, is
	// timed on; 0 is as many as the App's. The ceiling after the App is
	// timed on as many as the App's.
	freshN  int
	relist  bool              // the App's watches expired, and its informers listed again
	restart bool              // scenario 7: the App restarted on the settled objects
	env     map[string]string // the App's own variables besides WORKERS
	// beside is how many Memcacheds are created first in a namespace of
	// their own, which the App doesn't watch: the control plane holds them
	// through the run, the App never sees them.
	beside int
	// last is a run after which its process ends, and the control plane
	// with it: its objects aren't deleted, which takes a quarter of an
	// hour at 100,000.
	last bool
}

// coldApp creates n Memcacheds in ns, starts the App on them, and reports
// its figures once it is idle: the App running, and its settle time, are
// returned.
func (bn *bench) coldApp(b *testing.B, ns string, n int, o coldOpts) (*controller, time.Duration) {
	progress(b, "creating %d Memcacheds", n)
	bn.create(b, ns, 0, n)
	s := bn.track(b, ns, n)
	defer s.close()
	progress(b, "starting the App, %d workers", o.workers)
	ctrl := bn.prepare(b, ns, "memcached-controller-0", o.workers, o.env)
	stopProfile := bn.profileAPIServer(b, fmt.Sprintf("app-%d", n))
	used := bn.used(b)
	start := time.Now()
	ctrl.p.start(b)
	syncedAt := ctrl.synced(b)
	settle := s.await(b, n, start)
	reportMachine(b, "", used.since(bn.used(b)), n)
	stopProfile()
	progress(b, "synced in %s, settled in %s", syncedAt.Sub(start).Round(time.Millisecond), settle.Round(time.Millisecond))
	// The reconciles, requests and CPU a cold start costs are counted once
	// the App is idle: reconciles of settled objects come after they
	// settled.
	idle(b, ctrl, uint64(n))
	use := ctrl.p.usage(b)
	b.ReportMetric(settle.Seconds(), "settle-s")
	b.ReportMetric(syncedAt.Sub(start).Seconds(), "synced-s")
	b.ReportMetric(float64(n)/settle.Seconds(), "objects/s")
	b.ReportMetric(float64(ctrl.reconciles(b))/float64(n), "reconciles/object")
	b.ReportMetric(use.HeapBytes/float64(n), "heap-B/object")
	b.ReportMetric(use.CPU*1000/float64(n), "cpu-ms/object")
	b.ReportMetric(use.PeakRSS/(1<<20), "peak-RSS-MiB")
	bn.reportRequests(b, ctrl, n, start)
	return ctrl, settle
}

// reportRequests reports the App's requests and writes an object since
// start: every request but a watch, counted at the App's transport by
// otelhttp; the writes, by resource, from the API server's audit log.
func (bn *bench) reportRequests(b *testing.B, ctrl *controller, n int, start time.Time) {
	requests := ctrl.p.histogram(b, "http.client.request.duration", "http.request.method")
	b.ReportMetric(float64(requests.Count)/float64(n), "requests/object")
	for method, count := range requests.Counts {
		b.ReportMetric(float64(count)/float64(n), method+":requests/object")
	}
	time.Sleep(2 * time.Second) // for the audit log to hold the last writes
	// writes/object counts the writes of Memcacheds and Deployments: the
	// Lease's renewals and the App's start-up checks are reported apart.
	writes := 0
	for vr, count := range bn.writes(b, ctrl.user, start) {
		if strings.HasSuffix(vr, " deployments") || strings.Contains(vr, " memcacheds") {
			writes += count
		}
		b.ReportMetric(float64(count)/float64(n), strings.ReplaceAll(vr, " ", ":")+"/object")
	}
	b.ReportMetric(float64(writes)/float64(n), "writes/object")
}

// reportCeiling reports the ceiling, timed after the App, and the App's
// settle rate over it; and the ceiling timed before the App, as the first
// phase on a fresh kube-apiserver.
func (bn *bench) reportCeiling(b *testing.B, n int, settle time.Duration, fresh, after ceilingRun) {
	b.ReportMetric(fresh.rate, "ceiling-fresh-objects/s")
	b.ReportMetric(after.rate, "ceiling-objects/s")
	b.ReportMetric(float64(n)/settle.Seconds()/after.rate, "of-ceiling")
	reportMachine(b, "ceiling-", after.used, after.n)
}

// machineUse is CPU time used by each of the control plane's components
// (etcd, kube-apiserver and kube-controller-manager, by name) and by this
// benchmark's own process: the ceiling's loop, and the watches that see
// objects settle. An App's process reports its own.
type machineUse struct {
	components map[string]time.Duration
	bench      time.Duration
}

// used is the CPU time the control plane and this process have used so
// far; a phase's is the difference of two readings with no restart of a
// component between them.
func (bn *bench) used(b *testing.B) machineUse {
	b.Helper()
	self, err := procutil.CPU(os.Getpid())
	if err != nil {
		b.Fatalf("this process's CPU time: %v", err)
	}
	return machineUse{components: bn.c.CPU(b), bench: self}
}

// since is the CPU time used from u to now.
func (u machineUse) since(now machineUse) machineUse {
	d := machineUse{components: map[string]time.Duration{}, bench: now.bench - u.bench}
	for name, t := range now.components {
		d.components[name] = t - u.components[name]
	}
	return d
}

// reportMachine reports u over n objects: the control plane's CPU time an
// object, all of it and each component's, and this process's.
func reportMachine(b *testing.B, prefix string, u machineUse, n int) {
	perObject := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	var all time.Duration
	for name, d := range u.components {
		all += d
		b.ReportMetric(perObject(d), prefix+name+"-cpu-ms/object")
	}
	b.ReportMetric(perObject(all), prefix+"control-plane-cpu-ms/object")
	b.ReportMetric(perObject(u.bench), prefix+"bench-cpu-ms/object")
}

// profileAPIServer, with -profile and a phase named, profiles
// kube-apiserver's CPU until the function it returns is called: one 50 s
// profile after another (a request's timeout is a minute), written to
// <profile>-apiserver-<phase>-<k>.pprof. The one under way when it is
// called is dropped, so that the files cover the phase and nothing else;
// go tool pprof given a phase's files reads them as one profile.
func (bn *bench) profileAPIServer(b *testing.B, phase string) (stop func()) {
	if *profile == "" || phase == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 1; ; k++ {
			data, err := bn.kc.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "50").DoRaw(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				b.Errorf("kube-apiserver's CPU profile: %v", err)
				return
			}
			if err := os.WriteFile(fmt.Sprintf("%s-apiserver-%s-%d.pprof", *profile, phase, k), data, 0o644); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// relist has the App's informers list again, as a watch that expired
// does: etcd compacted and kube-apiserver restarted, so every watch
// resumed from its last resourceVersion is 410 Gone. Then one Memcached is
// changed: relist-s runs from the API server's restart to its Deployment
// having the new size, which the App's informers can only see once they
// have listed again. relist-reconciles counts the App's reconciles since
// the restart but that change's: none, since no other object changed.
// The App's heap and peak resident set are read after it.
func (bn *bench) relist(b *testing.B, ns string, ctrl *controller, n int) {
	progress(b, "a relist: etcd compacted, kube-apiserver restarted")
	before := ctrl.reconciles(b)
	bn.c.CompactEtcd(b)
	bn.c.KillAPIServer(b)
	restarted := time.Now()
	bn.c.StartAPIServer(b)
	up := time.Since(restarted)
	if _, err := bn.change(ns, "m-0"); err != nil {
		b.Fatalf("a change after the relist: %v", err)
	}
	relisted := time.Since(restarted)
	idle(b, ctrl, before+1)
	use := ctrl.p.usage(b)
	progress(b, "kube-apiserver up in %s, the change seen in %s", up.Round(time.Millisecond), relisted.Round(time.Millisecond))
	b.ReportMetric(up.Seconds(), "relist-apiserver-up-s")
	b.ReportMetric(relisted.Seconds(), "relist-s")
	b.ReportMetric(float64(ctrl.reconciles(b)-before-1), "relist-reconciles")
	b.ReportMetric(use.HeapBytes/float64(n), "relist-heap-B/object")
	b.ReportMetric(use.PeakRSS/(1<<20), "relist-peak-RSS-MiB")
}

// restart stops ctrl, and starts the App again on the settled objects
// (scenario 7): restart-synced-s and restart-writes, every write but the
// Lease's, which the leader renews whatever it does, and the access
// reviews the App asks for as it starts, which store nothing. It returns
// the App running.
func (bn *bench) restart(b *testing.B, ns string, ctrl *controller, n int, o coldOpts) *controller {
	ctrl.stop(b)
	progress(b, "restarting the App")
	ctrl = bn.prepare(b, ns, "memcached-controller-1", o.workers, o.env)
	again := time.Now()
	ctrl.p.start(b)
	syncedAt := ctrl.synced(b)
	b.ReportMetric(syncedAt.Sub(again).Seconds(), "restart-synced-s")
	idle(b, ctrl, uint64(n))
	time.Sleep(2 * time.Second)
	writes := 0
	for vr, count := range bn.writes(b, ctrl.user, again) {
		if !strings.HasSuffix(vr, " leases") && !strings.HasSuffix(vr, "reviews") {
			writes += count
		}
	}
	b.ReportMetric(float64(writes), "restart-writes")
	return ctrl
}

// idle waits until ctrl has reconciled at least n times and then none for
// 3 s.
func idle(b *testing.B, ctrl *controller, n uint64) {
	b.Helper()
	idleAll(b, []*controller{ctrl}, n)
}

// ceiling is scenario 2: n new Memcacheds, and for each, by workers
// goroutines, the requests a settled Memcached costs: its finalizer
// applied, the example's own Reconciler (its apply of the Deployment, and
// the Event it records in the background, as the App's does; its read of
// the Deployment is a cache's, no request, as the App's is: missing), and
// its status applied. It returns objects a second, timed as the App's
// settling is: until the benchmark's watches have seen the last object
// settled, so the ceiling bears their load on the API server and this
// process too. The requests are made as the App's are, under its identity
// (asApp): the API server's cost of a request includes authenticating and
// authorizing it, which the admin's skip. With -profile, kube-apiserver's
// CPU is profiled through the writes as the phase profiled names, if it
// names one.
func (bn *bench) ceiling(b *testing.B, n, workers int, profiled string) ceilingRun {
	b.Helper()
	ns := bn.c.Namespace(b)
	bn.create(b, ns, 0, n)
	list, err := bn.dyn.Resource(app.Memcached.GVR()).Namespace(ns).List(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	dyn, kc := bn.asApp(b, ns)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kc.EventsV1()})
	recording, stopRecording := context.WithCancel(klog.NewContext(b.Context(), logr.Discard()))
	if err := broadcaster.StartRecordingToSinkWithContext(recording); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stopRecording()
		broadcaster.Shutdown()
	}()
	rec := app.Reconciler{Kube: kc, Deployments: noDeployments{}, Events: clientGoEvents{broadcaster.NewRecorder(nil, app.Name)}}
	memcacheds := dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	force := true
	opts := metav1.PatchOptions{FieldManager: app.Name, Force: &force}
	s := bn.track(b, ns, n)
	defer s.close()
	stopProfile := bn.profileAPIServer(b, profiled)
	used := bn.used(b)
	start := time.Now()
	err = each(len(list.Items), workers, func(i int) error {
		return bn.settleByHand(memcacheds, rec, &list.Items[i], opts)
	})
	if err != nil {
		b.Fatalf("the ceiling's writes: %v", err)
	}
	elapsed := s.await(b, n, start)
	run := ceilingRun{rate: float64(n) / elapsed.Seconds(), used: used.since(bn.used(b)), n: n}
	stopProfile()
	s.close()
	bn.drop(b, ns, nil)
	return run
}

// ceilingRun is a timing of the ceiling: its rate in objects a second, and
// the CPU time used while it ran on n objects.
type ceilingRun struct {
	rate float64
	used machineUse
	n    int
}

func (bn *bench) settleByHand(memcacheds dynamic.ResourceInterface, rec app.Reconciler, u *unstructured.Unstructured, opts metav1.PatchOptions) error {
	ctx := context.Background()
	meta := map[string]any{"name": u.GetName(), "namespace": u.GetNamespace(), "uid": string(u.GetUID())}
	fin, _ := json.Marshal(map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace(), "uid": string(u.GetUID()), "finalizers": []string{app.Finalizer}},
	})
	res, err := memcacheds.Patch(ctx, u.GetName(), types.ApplyPatchType, fin, opts)
	if err != nil {
		return err
	}
	var m memcached
	if err := decode(res, &m); err != nil {
		return err
	}
	result, err := rec.Reconcile(ctx, m)
	if err != nil {
		return err
	}
	meta["resourceVersion"] = res.GetResourceVersion()
	status, _ := json.Marshal(map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": meta, "status": result.Status,
	})
	_, err = memcacheds.Patch(ctx, u.GetName(), types.ApplyPatchType, status, opts, "status")
	return err
}

// drop stops ctrls, the Apps still running (nil when none), takes the
// finalizers off ns's Memcacheds, then deletes ns and waits until it is
// gone, so no run's deletions load the control plane during the next. The
// Apps stop first: the namespace's deletion takes their ServiceAccount and
// RBAC, and a controller whose resource turns Forbidden ends with an
// error. kube-controller-manager's namespace controller then deletes the
// Memcacheds, their Deployments and the Events with a deletecollection
// each: 10,000 under four replicas went in 58 s, where deleting each
// Memcached for the Apps to finalize took 100 s.
func (bn *bench) drop(b *testing.B, ns string, ctrls ...*controller) {
	b.Helper()
	progress(b, "deleting namespace %s", ns)
	// Every App told to stop first, so none takes over the shards of
	// another as it goes.
	ctrls = slices.DeleteFunc(ctrls, func(c *controller) bool { return c == nil })
	for _, c := range ctrls {
		c.p.signal(b)
	}
	for _, c := range ctrls {
		c.p.wait(b)
	}
	memcacheds := bn.dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	list, err := bn.md.Resource(app.Memcached.GVR()).Namespace(ns).List(b.Context(), metav1.ListOptions{})
	if err != nil {
		b.Fatalf("listing the Memcacheds to delete: %v", err)
	}
	unfinalized := []byte(`{"metadata":{"finalizers":null}}`)
	if err := each(len(list.Items), 16, func(i int) error {
		m := &list.Items[i]
		if len(m.Finalizers) == 0 {
			return nil
		}
		_, err := memcacheds.Patch(context.Background(), m.Name, types.MergePatchType, unfinalized, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		b.Fatalf("taking the Memcacheds' finalizers off: %v", err)
	}
	if err := bn.kc.CoreV1().Namespaces().Delete(b.Context(), ns, metav1.DeleteOptions{}); err != nil {
		b.Fatalf("deleting namespace %s: %v", ns, err)
	}
	clustertest.Eventually(b, patience(len(list.Items)), func(ctx context.Context) error {
		_, err := bn.kc.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("namespace %s is still there", ns)
	})
}

// BenchmarkClusterColdStart is scenarios 1 to 4 and 7 at N = 1,000 and
// 10,000, with 4 workers, and a relist; with -large, at N = 100,000 instead
// (make bench-large), where the fresh ceiling, before the App, is timed
// on 20,000 objects: on 100,000 it would take a quarter of an hour more.
func BenchmarkClusterColdStart(b *testing.B) {
	ns := []int{1000, 10000}
	if *large {
		ns = []int{100000}
	}
	for _, n := range ns {
		b.Run(fmt.Sprintf("N=%d", scaled(n)), func(b *testing.B) {
			o := coldOpts{workers: 4, relist: true, restart: true, env: outageProof}
			o.last = *leave
			if n >= 100000 {
				o.freshN = scaled(20000)
			}
			for range b.N {
				coldStart(b, scaled(n), o)
			}
		})
	}
}

// BenchmarkClusterColdStartBeside is the cold start at N = 10,000 (its
// ceiling and the App's phase) beside 90,000 Memcacheds in a namespace the
// App doesn't watch: the control plane holds 100,000, as at
// BenchmarkClusterColdStart's N=100000, and the App 10,000. It tells how
// much of what an object costs the App grows with the App's own objects,
// and how much with the control plane's on the same machine (make
// bench-large runs it after the cold start at 100,000). The 90,000 creates
// are the first phase on the fresh kube-apiserver, so the ceiling timed
// before the App is not, whatever its metric's name says.
func BenchmarkClusterColdStartBeside(b *testing.B) {
	n := scaled(10000)
	b.Run(fmt.Sprintf("N=%d/beside=%d", n, scaled(90000)), func(b *testing.B) {
		o := coldOpts{workers: 4, beside: scaled(90000), last: *leave}
		for range b.N {
			coldStart(b, n, o)
		}
	})
}

// large runs BenchmarkClusterColdStart at N = 100,000 instead of 1,000 and
// 10,000.
var large = flag.Bool("large", false, "runs the cold start at N = 100,000 instead of 1,000 and 10,000")

// leave has each cold start leave its objects to the control plane's end,
// which comes with the process's: for a process that runs one cold start
// and nothing after it (make bench's at 10,000, and make bench-large's),
// which it saves the deletions: a minute at 10,000.
var leave = flag.Bool("leave", false, "each cold start leaves its objects to the control plane's end: for a process that runs one and nothing after it")

// outageProof are Lease timings that keep the App the leader through the
// relist's restart of kube-apiserver, which takes longer than the default
// RenewDeadline with 100,000 objects or more to load.
var outageProof = map[string]string{"LEASE_DURATION": "5m", "RENEW_DEADLINE": "4m", "RETRY_PERIOD": "2s"}

// BenchmarkClusterWorkers is scenario 6: scenario 1 at N = 1,000 with 1
// and 16 workers; with 4, it is BenchmarkClusterColdStart's N=1000.
func BenchmarkClusterWorkers(b *testing.B) {
	for _, w := range []int{1, 16} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			for range b.N {
				coldStart(b, scaled(1000), coldOpts{workers: w})
			}
		})
	}
}

// BenchmarkClusterCeilingDrift times the ceiling on 10,000 Memcacheds
// four times in a row from a fresh control plane: how much the first
// phase after kube-apiserver starts differs from those after it, which
// is why ColdStart's ceiling is timed after the App (make bench
// BENCH_RUN=CeilingDrift BENCH_COUNT=1; not in make bench's default set).
func BenchmarkClusterCeilingDrift(b *testing.B) {
	for range b.N {
		bn := newBench(b)
		for i := range 4 {
			r := bn.ceiling(b, scaled(10000), 4, "")
			progress(b, "the ceiling, phase %d: %.1f objects/s", i+1, r.rate)
			b.ReportMetric(r.rate, fmt.Sprintf("phase-%d-objects/s", i+1))
		}
	}
}

// BenchmarkClusterChurn is scenario 5: the App running, Memcacheds created
// at about half the ceiling's rate for 60 s; the latency from each create
// to its object settled, and the queue's wait from the App's own
// instrument.
func BenchmarkClusterChurn(b *testing.B) {
	for range b.N {
		bn := newBench(b)
		rate := bn.ceiling(b, scaled(500), 4, "").rate / 2
		ns := bn.c.Namespace(b)
		period := time.Duration(float64(60*time.Second) * *scale)
		total := max(1, int(rate*period.Seconds()))
		progress(b, "creating %d Memcacheds at %.0f a second", total, rate)
		s := bn.track(b, ns, total)
		ctrl := bn.prepare(b, ns, "memcached-controller-0", 4, nil)
		ctrl.p.start(b)
		ctrl.synced(b)

		created := make([]time.Time, total)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		var wg sync.WaitGroup
		memcacheds := bn.dyn.Resource(app.Memcached.GVR()).Namespace(ns)
		for i := range total {
			<-tick.C
			created[i] = time.Now()
			wg.Go(func() {
				if _, err := memcacheds.Create(context.Background(), newMemcached(i), metav1.CreateOptions{}); err != nil {
					b.Errorf("creating m-%d: %v", i, err)
				}
			})
		}
		tick.Stop()
		wg.Wait()
		select {
		case <-s.all:
		case <-time.After(5 * time.Minute):
			b.Fatalf("%d of %d Memcacheds settled", len(s.times()), total)
		}
		at := s.times()
		s.close()
		latencies := make([]float64, 0, total)
		for i := range total {
			latencies = append(latencies, at["m-"+strconv.Itoa(i)].Sub(created[i]).Seconds())
		}
		slices.Sort(latencies)
		queued := ctrl.p.histogram(b, "humus.kube.controller.queue.duration", "")
		b.ReportMetric(rate, "create-objects/s")
		b.ReportMetric(latencies[len(latencies)/2], "latency-p50-s")
		b.ReportMetric(latencies[len(latencies)*99/100], "latency-p99-s")
		b.ReportMetric(quantile(0.99, queued.Bounds, queued.Buckets), "queue-p99-s")
		bn.drop(b, ns, ctrl)
	}
}

// BenchmarkClusterShards is scaling out: ColdStart at N = 10,000 with
// SHARDS=4, the API server's ShardedListAndWatch on, and 1, 2 and 4
// replicas of the App, each in a process of its own, started at once.
func BenchmarkClusterShards(b *testing.B) {
	clustertest.Get(b).FeatureGates(b, "ShardedListAndWatch=true")
	for _, r := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("replicas=%d", r), func(b *testing.B) {
			for range b.N {
				sharded(b, scaled(10000), 4, r)
			}
		})
	}
}

// sharded is one run of BenchmarkClusterShards: n Memcacheds exist before replicas
// Apps of shards shards start, one right after another, 4 workers each;
// the figures are the settle and sync times, the heap and the bytes each
// replica received, and the reconciles per object, once the shards are
// spread evenly and the Apps idle.
func sharded(b *testing.B, n, shards, replicas int) {
	bn := newBench(b)
	ns := bn.c.Namespace(b)
	progress(b, "creating %d Memcacheds", n)
	bn.create(b, ns, 0, n)
	bn.filters(b, ns)
	s := bn.track(b, ns, n)
	defer s.close()
	progress(b, "starting %d Apps, %d shards, 4 workers each", replicas, shards)

	ctrls := make([]*controller, replicas)
	for i := range ctrls {
		ctrls[i] = bn.prepare(b, ns, "memcached-controller-"+strconv.Itoa(i), 4, map[string]string{"SHARDS": strconv.Itoa(shards)})
	}
	start := time.Now()
	for _, c := range ctrls {
		c.p.start(b)
	}
	// synced: when every replica's /readyz has answered ok.
	var syncedAt time.Time
	for _, c := range ctrls {
		if at := c.synced(b); at.After(syncedAt) {
			syncedAt = at
		}
	}
	settle := s.await(b, n, start)
	progress(b, "synced in %s, settled in %s", syncedAt.Sub(start).Round(time.Millisecond), settle.Round(time.Millisecond))
	bn.spread(b, ns, shards, replicas)
	idleAll(b, ctrls, uint64(n))
	var reconciles uint64
	var heap float64
	var received, busiest int64
	for _, c := range ctrls {
		reconciles += c.reconciles(b)
		use := c.p.usage(b)
		heap += use.HeapBytes
		received += use.Received
		busiest = max(busiest, use.Received)
	}

	b.ReportMetric(settle.Seconds(), "settle-s")
	b.ReportMetric(syncedAt.Sub(start).Seconds(), "synced-s")
	b.ReportMetric(float64(n)/settle.Seconds(), "objects/s")
	b.ReportMetric(float64(reconciles)/float64(n), "reconciles/object")
	b.ReportMetric(heap/float64(n), "heap-B/object")
	b.ReportMetric(heap/float64(replicas), "heap-B/replica")
	b.ReportMetric(float64(received)/float64(replicas)/(1<<20), "received-MiB/replica")
	b.ReportMetric(float64(busiest)/(1<<20), "received-MiB/replica-max")
	bn.drop(b, ns, ctrls...)
}

// filters fails b unless the API server filters a list of ns's
// Memcacheds by a shard selector: without ShardedListAndWatch it ignores
// the selector, the Apps still keep only their shards' objects, and the
// figures aren't this scenario's. The selector asks for the first quarter
// of the hashes of the objects' UIDs (the 64-bit FNV-1a hash, as kube's
// shards have it).
func (bn *bench) filters(b *testing.B, ns string) {
	b.Helper()
	list, err := bn.dyn.Resource(app.Memcached.GVR()).Namespace(ns).List(b.Context(), metav1.ListOptions{
		ShardSelector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')",
	})
	if err != nil {
		b.Fatalf("listing Memcacheds by shard: %v", err)
	}
	for _, u := range list.Items {
		h := fnv.New64a()
		_, _ = h.Write([]byte(u.GetUID()))
		if h.Sum64() >= 1<<62 {
			b.Fatalf("the API server doesn't filter by shard (ShardedListAndWatch is off): %s is outside the selector", u.GetName())
		}
	}
}

// spread waits until the replicas hold the shards' Leases evenly, as
// many each (shards over replicas, rounded down or up): the Apps start
// at once, and the first to look at the Leases can take more than its
// share, to hand the rest over.
func (bn *bench) spread(b *testing.B, ns string, shards, replicas int) {
	b.Helper()
	suffix := "-of-" + strconv.Itoa(shards)
	clustertest.Eventually(b, 5*time.Minute, func(ctx context.Context) error {
		leases, err := bn.kc.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		held := map[string]int{}
		for _, l := range leases.Items {
			if strings.HasPrefix(l.Name, app.Name+"-") && strings.HasSuffix(l.Name, suffix) &&
				l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				held[*l.Spec.HolderIdentity]++
			}
		}
		total := 0
		for _, k := range held {
			total += k
			if k < shards/replicas || k > (shards+replicas-1)/replicas {
				return fmt.Errorf("the shards' holders: %v", held)
			}
		}
		if total != shards || len(held) != min(shards, replicas) {
			return fmt.Errorf("the shards' holders: %v", held)
		}
		return nil
	})
}

// idleAll waits until ctrls have reconciled at least n times between them,
// each reconciling its shards' objects, and then none for 3 s.
func idleAll(b *testing.B, ctrls []*controller, n uint64) {
	b.Helper()
	last, since := uint64(0), time.Now()
	deadline := time.Now().Add(patience(int(n)))
	for time.Now().Before(deadline) {
		var got uint64
		for _, c := range ctrls {
			if c.p.exited() {
				b.Fatalf("an App exited before it was idle: %v\n%s", c.p.err, c.p.out.String())
			}
			got += c.reconciles(b)
		}
		if got != last {
			last, since = got, time.Now()
		}
		if got >= n && time.Since(since) > 3*time.Second {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Fatalf("the Apps reconciled %d times between them, not yet idle, after 20 minutes", last)
}

// noDeployments is the ceiling's cache of Deployments: its Memcacheds are
// new, so none has one yet.
type noDeployments struct{}

func (noDeployments) Get(_ context.Context, _, name string) (app.Deployment, error) {
	return app.Deployment{}, apierrors.NewNotFound(app.Deployments.GVR.GroupResource(), name)
}

// clientGoEvents records the Reconciler's Events with client-go's events
// recorder, for the ceiling's loop, which holds no Lease, so no proof for
// a kube.Recorder: the same create for each Event.
type clientGoEvents struct{ events.EventRecorder }

func (e clientGoEvents) Record(_ context.Context, ev kube.Event) {
	var related runtime.Object
	if ev.Related != nil { // a nil *ObjectReference in an interface isn't a nil related
		related = ev.Related
	}
	e.Eventf(&ev.Regarding, related, string(ev.Type), ev.Reason, ev.Action, "%s", ev.Note)
}
