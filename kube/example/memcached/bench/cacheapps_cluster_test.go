package bench_test

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/health"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/kubeenv"
)

// The Apps of the scenarios that measure the cache the controllers of an
// App share (cache_cluster_test.go): each a process of its own, as the
// Memcached App's, named by benchApps.

// benchApps are the Apps a child runs besides the Memcached example's, by
// the name spawnApp is given.
var benchApps = map[string]humus.Init{
	"related":  relatedApp,
	"owners":   ownersApp,
	"selector": selectorApp,
	// The converted cold start's (conversion_cluster_test.go).
	"memcached-v1beta1":  v1beta1App,
	"conversion-webhook": webhookApp,
}

// A Website serves the content of the ConfigMap its spec names: the
// docs' controller, in miniature, with a CRD of the benchmark's own.
type siteSpec struct {
	ContentFrom string `json:"contentFrom"`
}

type siteStatus struct {
	Content string `json:"content,omitempty"`
}

type website = kube.Object[siteSpec, siteStatus]

var (
	websites = kube.Resource[siteSpec, siteStatus]{
		Group: "bench.example.com", Version: "v1", Kind: "Website", Plural: "websites", Scope: kube.Namespaced,
	}
	// blogs is a second resource of the same shape, whose controller owns
	// Deployments beside the Websites' and has no objects of its own.
	blogs = kube.Resource[siteSpec, siteStatus]{
		Group: "bench.example.com", Version: "v1", Kind: "Blog", Plural: "blogs", Scope: kube.Namespaced,
	}
	configMaps  = kube.Kind[corev1.ConfigMap]{GVR: corev1.SchemeGroupVersion.WithResource("configmaps"), Kind: "ConfigMap", Scope: kube.Namespaced}
	deployments = appsv1.SchemeGroupVersion.WithResource("deployments")
)

// contentKey is the ConfigMap's key a Website serves.
const contentKey = "content"

// benchSettings is what a scenario's App reads from its Host: the
// Connection, kubeenv's Settings (POD_NAMESPACE, POD_NAME, WORKERS, ...)
// for a controller named CONTROLLER_NAME (or def), WATCH_NAMESPACE and
// PROBES_ADDR, as the Memcached App reads them.
type benchSettings struct {
	conn       kube.Connection
	controller kube.Settings
	probesAddr string
	// second is OWNERS_SECOND: the ownersApp's second controller, "" for
	// none, "shared" on the first's Client, "apart" on a Client of its own.
	second string
	// labels is CONFIGMAP_LABELS: the selectorApp's Reader's label selector.
	labels string
}

func readBenchSettings(ctx context.Context, s *humus.Setup, def string) (benchSettings, error) {
	conn, connErr := kubeenv.Connection(ctx, s.Host)
	set, setErr := config.Struct(func(r *config.Resolver) benchSettings {
		env := func(name string) config.Source { return config.Env(s.Host, name) }
		ks := kubeenv.Settings(r, s.Host, r.Get(config.Default(env("CONTROLLER_NAME"), def)))
		ks.Namespace = config.Parse(r, config.Default(env("WATCH_NAMESPACE"), ""), config.Checked(config.AsIs, kube.CheckWatchNamespace))
		return benchSettings{
			controller: ks,
			probesAddr: r.Get(config.Default(env("PROBES_ADDR"), ":8081")),
			second:     r.Get(config.Default(env("OWNERS_SECOND"), "")),
			labels:     r.Get(config.Default(env("CONFIGMAP_LABELS"), "")),
		}
	}).Read(ctx)
	if err := errors.Join(connErr, setErr); err != nil {
		return benchSettings{}, err
	}
	set.conn = conn
	return set, nil
}

// serveContent is a Website's Reconciler: its status is the content of the
// ConfigMap it names, read from the cache, or "" when there is none. The
// benchmark's watch of the statuses sees when a ConfigMap's change has
// reached a Website.
func serveContent(cms *kube.Reader[corev1.ConfigMap]) kube.ReconcilerFunc[siteSpec, siteStatus] {
	return func(ctx context.Context, w website) (kube.Result[siteStatus], error) {
		var st siteStatus
		cm, err := cms.Get(ctx, w.Namespace, w.Spec.ContentFrom)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return kube.Result[siteStatus]{}, err
		default:
			st.Content = cm.Data[contentKey]
		}
		return kube.Result[siteStatus]{Status: &st}, nil
	}
}

// contentFrom is a Website's reference to its ConfigMap.
func contentFrom(w website) []types.NamespacedName {
	return []types.NamespacedName{{Namespace: w.Namespace, Name: w.Spec.ContentFrom}}
}

// idleReconciler reconciles nothing: it writes no status.
func idleReconciler(context.Context, website) (kube.Result[siteStatus], error) {
	return kube.Result[siteStatus]{}, nil
}

// relatedApp is the Website controller following the ConfigMaps its
// objects name, by References' index, each reconcile reading its
// ConfigMap from the cache.
func relatedApp(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
	set, err := readBenchSettings(ctx, s, "site-controller")
	if err != nil {
		return nil, err
	}
	client, err := kube.NewClient(s, set.conn)
	if err != nil {
		return nil, err
	}
	cms := kube.Read(client, configMaps, kube.Selector{Namespace: set.controller.Namespace})
	ctrl, err := kube.NewController(s, client, set.controller, websites, serveContent(cms), kube.References(cms, contentFrom))
	if err != nil {
		return nil, err
	}
	return []humus.Service{ctrl, health.NewService(s, set.probesAddr, health.Readiness(ctrl.Synced()))}, nil
}

// ownersApp is a Website controller that owns Deployments and reconciles
// nothing, with OWNERS_SECOND a Blog controller beside it that owns
// Deployments too: on the same Client ("shared"), which shares the
// Deployments' cache, or on a Client of its own ("apart"), which doesn't.
func ownersApp(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
	set, err := readBenchSettings(ctx, s, "site-controller")
	if err != nil {
		return nil, err
	}
	client, err := kube.NewClient(s, set.conn)
	if err != nil {
		return nil, err
	}
	first, err := kube.NewController(s, client, set.controller, websites, kube.ReconcilerFunc[siteSpec, siteStatus](idleReconciler), kube.Owns(deployments))
	if err != nil {
		return nil, err
	}
	ctrls := []*kube.Controller{first}
	switch set.second {
	case "":
	case "shared", "apart":
		if set.second == "apart" {
			if client, err = kube.NewClient(s, set.conn); err != nil {
				return nil, err
			}
		}
		bs := set.controller
		bs.Name += "-blogs"
		second, err := kube.NewController(s, client, bs, blogs, kube.ReconcilerFunc[siteSpec, siteStatus](idleReconciler), kube.Owns(deployments))
		if err != nil {
			return nil, err
		}
		ctrls = append(ctrls, second)
	default:
		return nil, errors.New(`OWNERS_SECOND is neither "", "shared" nor "apart"`)
	}
	var svcs []humus.Service
	var synced []health.Monitor
	for _, c := range ctrls {
		svcs = append(svcs, c)
		synced = append(synced, c.Synced())
	}
	return append(svcs, health.NewService(s, set.probesAddr, health.Readiness(synced...))), nil
}

// selectorApp is a Website controller whose Reconciler reads the
// ConfigMaps of its namespace that CONFIGMAP_LABELS selects ("" for
// every one). Its probes serve GET /seen: how many ConfigMaps the cache
// holds, and the URL of each list of ConfigMaps the App's Client sent, as
// its otelhttp spans record them.
func selectorApp(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
	set, err := readBenchSettings(ctx, s, "site-controller")
	if err != nil {
		return nil, err
	}
	spans := tracetest.NewSpanRecorder()
	traced := *s
	traced.Telemetry.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	client, err := kube.NewClient(&traced, set.conn)
	if err != nil {
		return nil, err
	}
	cms := kube.Read(client, configMaps, kube.Selector{Namespace: set.controller.Namespace, Labels: set.labels})
	ctrl, err := kube.NewController(s, client, set.controller, websites, serveContent(cms), kube.Reads(cms))
	if err != nil {
		return nil, err
	}
	seen := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cached, err := cms.List(r.Context(), "", nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		report := seenReport{Cached: len(cached)}
		for _, sp := range spans.Ended() {
			for _, kv := range sp.Attributes() {
				if kv.Key == attribute.Key("url.full") && strings.Contains(kv.Value.AsString(), "/configmaps") {
					report.Lists = append(report.Lists, kv.Value.AsString())
				}
			}
		}
		answer(w, report)
	})
	probes := health.NewService(s, set.probesAddr, health.Readiness(ctrl.Synced()), health.Handle("GET /seen", seen))
	return []humus.Service{ctrl, probes}, nil
}

// seenReport is what selectorApp's GET /seen answers.
type seenReport struct {
	Cached int      `json:"cached"` // the ConfigMaps the cache holds
	Lists  []string `json:"lists"`  // the URLs of the App's requests of ConfigMaps but watches
}
