package bench_test

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/health"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/memcached/app"
	"github.com/z5labs/humus/webhook"
)

// The cold start of a resource of two versions, reconciled at the version
// it isn't stored at (BenchmarkClusterConvertedColdStart): the Memcached
// stored at v1alpha1, the example's own types, and reconciled at v1beta1,
// whose spec renames size replicas, so that every object the App lists,
// watches and applies passes through the conversion webhook; beside the
// same cold start reconciled at v1alpha1, whose App's requests pass
// through none.

// memcachedSpecV1beta1 is the Memcached's spec at v1beta1: v1alpha1's
// (app.MemcachedSpec) with Size renamed Replicas. Its status is
// v1alpha1's, app.MemcachedStatus. Neither version has a field the other
// lacks, so a conversion keeps nothing in an annotation: what the
// benchmark measures is a conversion's own cost.
type memcachedSpecV1beta1 struct {
	Replicas int32  `json:"replicas"`
	Image    string `json:"image"`
}

type memcachedV1beta1 = kube.Object[memcachedSpecV1beta1, app.MemcachedStatus]

// specV1beta1 and statusV1beta1 only name the fields the Rules constrain.
var (
	specV1beta1   memcachedSpecV1beta1
	statusV1beta1 app.MemcachedStatus
)

// memcachedsV1beta1 is app.Memcached at v1beta1, with the same
// constraints, names and columns, Size's renamed.
var memcachedsV1beta1 = kube.Resource[memcachedSpecV1beta1, app.MemcachedStatus]{
	Group:      app.Memcached.Group,
	Version:    "v1beta1",
	Kind:       app.Memcached.Kind,
	Plural:     app.Memcached.Plural,
	Scope:      app.Memcached.Scope,
	ShortNames: app.Memcached.ShortNames,
	Categories: app.Memcached.Categories,
	Columns: []kube.Column{
		{Name: "Replicas", JSONPath: ".spec.replicas"},
		{Name: "Ready", JSONPath: ".status.readyReplicas"},
		{Name: "Available", JSONPath: `.status.conditions[?(@.type=="Available")].status`},
		{Name: "Age", JSONPath: ".metadata.creationTimestamp"},
	},
	Scale: &kube.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.readyReplicas"},
	Rules: []kube.TypeRules{
		kube.Rules(&specV1beta1,
			kube.Field(&specV1beta1.Replicas).Minimum(1).Maximum(3).Description("How many memcached pods run."),
			kube.Field(&specV1beta1.Image).Pattern(regexp.MustCompile(`^memcached:`)).Default("memcached:1.6.26-alpine3.19"),
		),
		kube.Rules(&statusV1beta1, kube.Field(&statusV1beta1.Conditions).ListMap("type")),
	},
}

// memcachedVersions is the Memcached of two versions: v1beta1, the hub,
// and v1alpha1, app.Memcached, the storage version, as a resource stands
// between adding a version and moving its storage to it. hook is where
// the API server reaches the webhook.
func memcachedVersions(hook kube.ConversionWebhook) kube.Versions[memcachedSpecV1beta1, app.MemcachedStatus] {
	return kube.Versions[memcachedSpecV1beta1, app.MemcachedStatus]{
		Hub: memcachedsV1beta1,
		// Not deprecated: the benchmark's creates and watches, and the
		// App of the plain phases, are at v1alpha1, and a warning on each
		// of their requests would be logged.
		Others:  []kube.Version[memcachedSpecV1beta1, app.MemcachedStatus]{kube.VersionOf(app.Memcached, toV1beta1, fromV1beta1)},
		Storage: app.Memcached.Version,
		Webhook: hook,
	}
}

func toV1beta1(m memcached) (memcachedV1beta1, error) {
	return memcachedV1beta1{
		ObjectMeta: m.ObjectMeta,
		Spec:       memcachedSpecV1beta1{Replicas: m.Spec.Size, Image: m.Spec.Image},
		Status:     m.Status,
	}, nil
}

func fromV1beta1(m memcachedV1beta1) (memcached, error) {
	return memcached{
		ObjectMeta: m.ObjectMeta,
		Spec:       app.MemcachedSpec{Size: m.Spec.Replicas, Image: m.Spec.Image},
		Status:     m.Status,
	}, nil
}

// atV1beta1 is the example's Reconciler, and its Finalize, handed
// Memcacheds at v1beta1: each is given to it with its spec's field named
// as v1alpha1 names it, its apiVersion as it came, so the Deployment's
// owner reference names cache.example.com/v1beta1. The App of v1beta1
// makes the same requests as the example's, and its figures differ by
// what the conversions cost.
type atV1beta1 struct{ rec app.Reconciler }

func (r atV1beta1) Reconcile(ctx context.Context, m memcachedV1beta1) (kube.Result[app.MemcachedStatus], error) {
	return r.rec.Reconcile(ctx, asV1alpha1Spec(m))
}

func (r atV1beta1) finalize(ctx context.Context, m memcachedV1beta1) error {
	return r.rec.Finalize(ctx, asV1alpha1Spec(m))
}

func asV1alpha1Spec(m memcachedV1beta1) memcached {
	return memcached{
		TypeMeta:   m.TypeMeta,
		ObjectMeta: m.ObjectMeta,
		Spec:       app.MemcachedSpec{Size: m.Spec.Replicas, Image: m.Spec.Image},
		Status:     m.Status,
	}
}

// appsV1 is client-go's apps/v1 client as the Reconciler's
// app.AppsV1Getter.
type appsV1 struct{ appsv1client.AppsV1Interface }

func (a appsV1) AppsV1() appsv1client.AppsV1Interface { return a.AppsV1Interface }

// v1beta1App is the Memcached example's App (app.Init) reconciling
// v1beta1: the same settings, Reconciler, Owns, Reads and Finalize, on
// memcachedsV1beta1. It serves no webhook: webhookApp does, in a process
// of its own.
func v1beta1App(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
	set, err := readBenchSettings(ctx, s, app.Name)
	if err != nil {
		return nil, err
	}
	client, err := kube.NewClient(s, set.conn)
	if err != nil {
		return nil, err
	}
	apps, err := appsv1client.NewForConfig(client.Config())
	if err != nil {
		return nil, fmt.Errorf("the apps/v1 client: %w", err)
	}
	events, err := kube.NewRecorder(s, client, app.Name, set.controller.LeaderElection.Identity)
	if err != nil {
		return nil, err
	}
	deployments := kube.ReadTrimmed(client, app.Deployments, kube.Selector{Namespace: set.controller.Namespace})
	rec := atV1beta1{app.Reconciler{Kube: appsV1{apps}, Deployments: deployments, Events: events}}
	ctrl, err := kube.NewController(s, client, set.controller, memcachedsV1beta1, rec,
		kube.Owns(app.Deployments.GVR),
		kube.Reads(deployments),
		kube.Finalize(app.Finalizer, rec.finalize),
	)
	if err != nil {
		return nil, err
	}
	probes := health.NewService(s, set.probesAddr, health.Readiness(ctrl.Synced()))
	return []humus.Service{ctrl, probes, events}, nil
}

// webhookCertDir is where webhookApp's Host holds its serving certificate
// and key, as a Secret volume would (a Host's FS has no leading slash).
const webhookCertDir = "etc/webhook/tls"

// webhookApp serves memcachedVersions' conversion webhook, a
// webhook.Service, at POST /convert on WEBHOOK_ADDR, with the certificate
// and key in webhookCertDir, and its readiness at PROBES_ADDR's /readyz.
// It is an App of its own, not a Service of v1beta1App's, so its process's
// CPU is the conversions' alone; a replica serving both would spend the
// two together.
func webhookApp(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
	type settings struct{ addr, probes string }
	set, err := config.Struct(func(r *config.Resolver) settings {
		return settings{addr: r.Get(config.Env(s.Host, "WEBHOOK_ADDR")), probes: r.Get(config.Env(s.Host, "PROBES_ADDR"))}
	}).Read(ctx)
	if err != nil {
		return nil, err
	}
	h, err := memcachedVersions(kube.ConversionWebhook{URL: "https://" + set.addr + "/convert"}).Handler(s.Telemetry)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /convert", h)
	hook, err := webhook.NewService(s, webhook.Settings{Addr: set.addr, CertDir: "/" + webhookCertDir}, mux)
	if err != nil {
		return nil, err
	}
	return []humus.Service{hook, health.NewService(s, set.probes, health.Readiness(hook.Ready()))}, nil
}

// serveConversion starts webhookApp in a process of its own, listening on
// a free loopback port with a serving certificate of a CA of its own, and
// returns it once it is ready, with the ConversionWebhook that reaches it.
func serveConversion(b *testing.B) (*appProcess, kube.ConversionWebhook) {
	b.Helper()
	ca, err := clustertest.NewCA("bench conversion webhook CA")
	if err != nil {
		b.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Serving("127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	h := humustest.NewHost()
	h.Env["WEBHOOK_ADDR"] = loopbackAddr(b)
	h.Env["PROBES_ADDR"] = loopbackAddr(b)
	h.Files[webhookCertDir+"/"+webhook.DefaultCertName] = &fstest.MapFile{Data: certPEM}
	h.Files[webhookCertDir+"/"+webhook.DefaultKeyName] = &fstest.MapFile{Data: keyPEM}
	p := spawnApp(b, h, "conversion-webhook")
	p.start(b)
	clustertest.Eventually(b, time.Minute, func(ctx context.Context) error { return clustertest.Ready(ctx, h.Env["PROBES_ADDR"]) })
	return p, kube.ConversionWebhook{URL: "https://" + h.Env["WEBHOOK_ADDR"] + "/convert", CABundle: ca.PEM()}
}

// loopbackAddr is a loopback address with a port no one listens on.
func loopbackAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("finding a free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// hookUse is what the webhook's process has spent and answered since it
// started.
type hookUse struct {
	cpu       time.Duration
	reviews   uint64 // ConversionReviews answered
	failed    uint64 // of them, answered with a failure
	converted uint64 // objects converted
	// toVersion counts the reviews by the version they asked for:
	// v1beta1 for what is read there (the App's lists, watches and the
	// answers to its writes; the control plane's own reads at the group's
	// preferred version), v1alpha1, the storage version, for what is
	// written at v1beta1.
	toVersion map[string]uint64
}

// hookUsed reads p's figures: its CPU, and the handler's instruments.
func hookUsed(b *testing.B, p *appProcess) hookUse {
	b.Helper()
	reviews := p.histogram(b, "humus.kube.conversion.duration", "humus.kube.conversion.outcome")
	u := hookUse{
		cpu:       time.Duration(p.usage(b).CPU * float64(time.Second)),
		reviews:   reviews.Count,
		failed:    reviews.Count - reviews.Counts["success"],
		converted: p.histogram(b, "humus.kube.conversion.objects", "").Count,
		toVersion: map[string]uint64{},
	}
	for to, count := range p.histogram(b, "humus.kube.conversion.duration", "humus.kube.conversion.to").Counts {
		u.toVersion[strings.TrimPrefix(to, app.Memcached.Group+"/")] = count
	}
	return u
}

func (u hookUse) since(before hookUse) hookUse {
	d := hookUse{cpu: u.cpu - before.cpu, reviews: u.reviews - before.reviews, failed: u.failed - before.failed,
		converted: u.converted - before.converted, toVersion: map[string]uint64{}}
	for v, count := range u.toVersion {
		d.toVersion[v] = count - before.toVersion[v]
	}
	return d
}

// coldPhase is a cold start's figures, for n objects.
type coldPhase struct {
	n                    int
	settle, synced       time.Duration
	reconciles, requests uint64
	writes               int        // of Memcacheds and Deployments
	cpu, heap            float64    // the App's, in seconds and bytes, to idle
	machine              machineUse // from the App's start to settled
	hook                 hookUse    // from the App's start to idle
}

// coldPhase creates n Memcacheds at v1alpha1 in a namespace of its own,
// starts the App named name on them (spawnApp's name: "" for the
// example's, at v1alpha1) and reads its figures once it is idle, and the
// webhook's over the same time. Then it stops the App and deletes the
// namespace, unless last and -leave.
func (bn *bench) coldPhase(b *testing.B, n int, name string, hook *appProcess, last bool) coldPhase {
	b.Helper()
	ns := bn.c.Namespace(b)
	progress(b, "creating %d Memcacheds at v1alpha1", n)
	bn.create(b, ns, 0, n)
	s := bn.track(b, ns, n)
	defer s.close()
	progress(b, "starting the App (%s), 4 workers", cmp.Or(name, "the example's, at v1alpha1"))
	host := bn.c.PodHost(b, ns, "memcached-controller-0", app.Name, clustertest.RBACGrants(b, "../deploy/rbac.yaml", ns)...)
	probes := host.Env["PROBES_ADDR"]
	host.Env["WATCH_NAMESPACE"] = ns
	host.Env["WORKERS"] = "4"
	ctrl := &controller{p: spawnApp(b, host, name), probes: probes, user: "system:serviceaccount:" + ns + ":" + app.Name}

	hookBefore := hookUsed(b, hook)
	used := bn.used(b)
	start := time.Now()
	ctrl.p.start(b)
	syncedAt := ctrl.synced(b)
	settle := s.await(b, n, start)
	ph := coldPhase{n: n, settle: settle, synced: syncedAt.Sub(start), machine: used.since(bn.used(b))}
	progress(b, "synced in %s, settled in %s", ph.synced.Round(time.Millisecond), settle.Round(time.Millisecond))
	idle(b, ctrl, uint64(n))
	use := ctrl.p.usage(b)
	ph.hook = hookUsed(b, hook).since(hookBefore)
	ph.cpu, ph.heap = use.CPU, use.HeapBytes
	ph.reconciles = ctrl.reconciles(b)
	ph.requests = ctrl.p.histogram(b, "http.client.request.duration", "").Count
	time.Sleep(2 * time.Second) // for the audit log to hold the last writes
	for vr, count := range bn.writes(b, ctrl.user, start) {
		if strings.HasSuffix(vr, " deployments") || strings.Contains(vr, " memcacheds") {
			ph.writes += count
		}
	}
	if ph.hook.failed > 0 {
		b.Errorf("the webhook answered %d of %d ConversionReviews with a failure", ph.hook.failed, ph.hook.reviews)
	}
	if last && *leave {
		ctrl.stop(b)
		return ph
	}
	bn.drop(b, ns, ctrl)
	return ph
}

// report reports ph's figures, each unit named with prefix before it.
func (ph coldPhase) report(b *testing.B, prefix string) {
	n := float64(ph.n)
	perObject := func(v float64) float64 { return v / n }
	b.ReportMetric(ph.settle.Seconds(), prefix+"settle-s")
	b.ReportMetric(ph.synced.Seconds(), prefix+"synced-s")
	b.ReportMetric(n/ph.settle.Seconds(), prefix+"objects/s")
	b.ReportMetric(perObject(float64(ph.reconciles)), prefix+"reconciles/object")
	b.ReportMetric(perObject(float64(ph.requests)), prefix+"requests/object")
	b.ReportMetric(perObject(float64(ph.writes)), prefix+"writes/object")
	b.ReportMetric(perObject(ph.cpu*1000), prefix+"cpu-ms/object")
	b.ReportMetric(perObject(ph.heap), prefix+"heap-B/object")
	b.ReportMetric(perObject(float64(ph.hook.cpu.Microseconds())/1000), prefix+"webhook-cpu-ms/object")
	b.ReportMetric(ph.hook.cpu.Seconds(), prefix+"webhook-cpu-total-s")
	b.ReportMetric(perObject(float64(ph.hook.reviews)), prefix+"conversion-reviews/object")
	b.ReportMetric(perObject(float64(ph.hook.converted)), prefix+"converted-objects/object")
	for v, count := range ph.hook.toVersion {
		b.ReportMetric(perObject(float64(count)), prefix+v+":conversion-reviews/object")
	}
	reportMachine(b, prefix, ph.machine, ph.n)
}

// machineCPU is the CPU time ph's App, the webhook and the control plane
// spent.
func (ph coldPhase) machineCPU() time.Duration {
	all := time.Duration(ph.cpu*float64(time.Second)) + ph.hook.cpu
	for _, d := range ph.machine.components {
		all += d
	}
	return all
}

// BenchmarkClusterConvertedColdStart is a cold start of N = 10,000
// Memcacheds stored at v1alpha1 and reconciled at v1beta1, through the
// conversion webhook, beside the same cold start reconciled at v1alpha1
// (the plain ColdStart's App), on one CRD of the two versions: issue 37's
// bench. The webhook runs in a process of its own, started first, through
// every phase; each phase creates its N objects in a namespace of its own
// with the App stopped, starts it, and reads its figures once it is idle.
// Three phases, as ColdStart times its ceiling: the plain cold start first,
// on the fresh kube-apiserver, whose first phase runs faster than the
// others (reported as plain-fresh-settle-s and -objects/s alone); the
// converted one; the plain one again, on the converted one's footing, whose
// figures are the plain-… ones. Unprefixed figures are the converted
// phase's: its App's, and the webhook's CPU and the reviews it answered, an
// object. The plain phases' webhook figures are the conversions the App
// didn't ask for: kube-apiserver's watch cache of v1beta1, the group's
// preferred version, converting each change for the watches it serves,
// kube-controller-manager's among them. settle-vs-plain is the converted settle time over the
// plain one; conversion-cpu-ms/object the CPU an object of the App, the
// webhook and the control plane together, less the plain phase's.
func BenchmarkClusterConvertedColdStart(b *testing.B) {
	n := scaled(10000)
	b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
		for range b.N {
			convertedColdStart(b, n)
		}
	})
}

func convertedColdStart(b *testing.B, n int) {
	bn := newBench(b)
	hook, conv := serveConversion(b)
	crd, err := memcachedVersions(conv).CRD()
	if err != nil {
		b.Fatal(err)
	}
	bn.c.InstallCRD(b, crd)
	// Back to the example's CRD of one version, without the webhook,
	// before the webhook's process ends (cleanups run last first): a
	// benchmark after this one in the process reads the Memcacheds at
	// the group's preferred version, which would be v1beta1 otherwise.
	b.Cleanup(func() {
		plain, err := app.Memcached.CRD()
		if err != nil {
			b.Error(err)
			return
		}
		bn.c.InstallCRD(b, plain)
	})

	progress(b, "the plain cold start, on the fresh kube-apiserver")
	fresh := bn.coldPhase(b, n, "", hook, false)
	progress(b, "the cold start at v1beta1, through the webhook")
	converted := bn.coldPhase(b, n, "memcached-v1beta1", hook, false)
	progress(b, "the plain cold start again")
	plain := bn.coldPhase(b, n, "", hook, true)

	b.ReportMetric(fresh.settle.Seconds(), "plain-fresh-settle-s")
	b.ReportMetric(float64(n)/fresh.settle.Seconds(), "plain-fresh-objects/s")
	converted.report(b, "")
	plain.report(b, "plain-")
	b.ReportMetric(converted.settle.Seconds()/plain.settle.Seconds(), "settle-vs-plain")
	added := converted.machineCPU() - plain.machineCPU()
	b.ReportMetric(float64(added.Microseconds())/1000/float64(n), "conversion-cpu-ms/object")
}
