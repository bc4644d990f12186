package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/control"
)

// telemetryCaches is the telemetry tests' resource: a group of its own, so
// its CRD is theirs alone.
var telemetryCaches = Resource[cacheSpec, cacheStatus]{
	Group:   "telemetry.test.example.com",
	Version: "v1alpha1",
	Kind:    "Memcached",
	Plural:  "memcacheds",
	Scope:   Namespaced,
}

// establishCRD creates r's CRD, waits until it is served, and deletes it
// when the test ends.
func establishCRD[Spec, Status any](t *testing.T, c *clustertest.Cluster, r Resource[Spec, Status]) {
	t.Helper()
	crd, err := r.CRD()
	if err != nil {
		t.Fatal(err)
	}
	crds := apiextensions.NewForConfigOrDie(c.AdminConfig()).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the CRD %s: %v", crd.Name, err)
	}
	t.Cleanup(func() {
		if err := crds.Delete(context.Background(), crd.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the CRD %s: %v", crd.Name, err)
		}
	})
	c.AwaitCRD(t, crd.Name)
}

func TestClusterAReconcilesSpansIncludeItsRequestsAndNoWatch(t *testing.T) {
	c := clustertest.Get(t)
	establishCRD(t, c, telemetryCaches)
	ns := c.Namespace(t)
	tel := humustest.NewTelemetry()
	ctrl, calls := namespaceReadingController(t, c, tel, ns)
	stop := served(t, ctrl)

	admin := dynamic.NewForConfigOrDie(c.AdminConfig()).Resource(telemetryCaches.GVR()).Namespace(ns)
	m := object("telemetry.test.example.com/v1alpha1", "Memcached", ns, "cache", map[string]any{"size": int64(3)})
	unstructured.RemoveNestedField(m.Object, "metadata", "uid")
	if _, err := admin.Create(t.Context(), m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Settled: the status applied, by the one reconcile; its watch event
	// reconciles nothing.
	clustertest.Eventually(t, time.Minute, func(ctx context.Context) error {
		got, err := admin.Get(ctx, "cache", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n, _, _ := unstructured.NestedInt64(got.Object, "status", "readyReplicas")
		if spans := len(reconcileSpansOf(tel, "Memcached", "cache")); n != 3 || spans < 1 {
			return fmt.Errorf("the object didn't settle: status.readyReplicas = %d, want 3; %d reconcile spans, want 1; reconciles: %d; spans: %v",
				n, spans, calls.Get("cache"), spanNames(tel))
		}
		return nil
	})
	time.Sleep(3 * time.Second) // time for a second reconcile to show
	if err := stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}

	spans := tel.Spans()
	reconciles := reconcileSpansOf(tel, "Memcached", "cache")
	checkTheReconcileSpanIsARootWithTheObject(t, reconciles[0], ns)
	checkTheReconcilesChildrenAreItsRequests(t, spans, reconciles[0], ns)
	checkOneStatusApplyAListAndNoWatch(t, tel, spans, reconciles)
	checkLeaderElectionsRecord(t, tel, ns)
	checkTheRequestsAndReconcilesMeasured(t, tel, spans, reconciles)
}

// namespaceReadingController is a controller of telemetryCaches in ns,
// recording into tel, whose Reconciler reads the object's namespace through
// the Client, with its context, and reports the size as ready; calls
// counts its reconciles.
func namespaceReadingController(t *testing.T, c *clustertest.Cluster, tel *humustest.Telemetry, ns string) (*Controller, *counter) {
	t.Helper()
	setup, client := clientAs(t, c, tel, c.AdminToken())
	kc, err := kubernetes.NewForConfig(client.Config())
	if err != nil {
		t.Fatal(err)
	}
	calls := new(counter)
	rec := ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
		calls.Inc(m.Name)
		if _, err := kc.CoreV1().Namespaces().Get(ctx, m.Namespace, metav1.GetOptions{}); err != nil {
			return Result[cacheStatus]{}, err
		}
		st := m.Status
		st.ReadyReplicas = m.Spec.Size
		return Result[cacheStatus]{Status: &st}, nil
	})
	s := DefaultSettings()
	s.Name = "telemetry-controller"
	s.Namespace = ns
	s.LeaderElection.Namespace = ns
	s.LeaderElection.Identity = "replica-1"
	ctrl, err := NewController(setup, client, s, telemetryCaches, rec)
	if err != nil {
		t.Fatal(err)
	}
	return ctrl, calls
}

// telemetryStatusApply is the span name of the status apply of a
// telemetryCaches object.
const telemetryStatusApply = "PATCH /apis/telemetry.test.example.com/v1alpha1/namespaces/{namespace}/memcacheds/{name}/status"

// checkTheReconcileSpanIsARootWithTheObject checks that the reconcile's
// span has no parent, and the object as its attributes.
func checkTheReconcileSpanIsARootWithTheObject(t *testing.T, reconcile sdktrace.ReadOnlySpan, ns string) {
	t.Helper()
	if reconcile.Parent().IsValid() {
		t.Errorf("the reconcile span has a parent, want a root span")
	}
	if got, want := spanAttrs(reconcile), map[string]string{control.AttrNamespace: ns, control.AttrObjectName: "cache"}; !mapsEqual(got, want) {
		t.Errorf("the reconcile span's attributes = %v, want %v", got, want)
	}
}

// checkTheReconcilesChildrenAreItsRequests checks the reconcile's
// children: the Reconciler's GET, then the status apply, each a client
// span of otelhttp's in the reconcile's trace, within the reconcile; the
// apply, by the controller's field manager, answered 200.
func checkTheReconcilesChildrenAreItsRequests(t *testing.T, spans []sdktrace.ReadOnlySpan, reconcile sdktrace.ReadOnlySpan, ns string) {
	t.Helper()
	var children []sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if sp.Parent().IsValid() && sp.Parent().SpanID() == reconcile.SpanContext().SpanID() {
			children = append(children, sp)
		}
	}
	var names []string
	for _, ch := range children {
		names = append(names, ch.Name())
		if ch.SpanKind() != trace.SpanKindClient {
			t.Errorf("the child %s is a %v span, want client", ch.Name(), ch.SpanKind())
		}
		if ch.SpanContext().TraceID() != reconcile.SpanContext().TraceID() {
			t.Errorf("the child %s is in another trace", ch.Name())
		}
		if ch.StartTime().Before(reconcile.StartTime()) || ch.EndTime().After(reconcile.EndTime()) {
			t.Errorf("the child %s ran outside the reconcile", ch.Name())
		}
	}
	if want := []string{"GET /api/v1/namespaces/{name}", telemetryStatusApply}; !equalStrings(names, want) {
		t.Fatalf("the reconcile's children = %q, want %q", names, want)
	}
	apply := spanAttrs(children[1])
	if got := apply["http.request.method"]; got != "PATCH" {
		t.Errorf("the status apply's http.request.method = %q, want PATCH", got)
	}
	if got := apply["http.response.status_code"]; got != "200" {
		t.Errorf("the status apply's http.response.status_code = %q, want 200", got)
	}
	if got := apply["url.full"]; !strings.Contains(got, "/namespaces/"+ns+"/memcacheds/cache/status") || !strings.Contains(got, "fieldManager=telemetry-controller") {
		t.Errorf("the status apply's url.full = %q, want the object's status, by the controller's field manager", got)
	}
}

// checkOneStatusApplyAListAndNoWatch checks the spans of every request:
// one status apply in all, by the one reconcile; a list of the resource;
// and no span of a watch, which lasts as long as its informer.
func checkOneStatusApplyAListAndNoWatch(t *testing.T, tel *humustest.Telemetry, spans, reconciles []sdktrace.ReadOnlySpan) {
	t.Helper()
	var applies, lists int
	for _, sp := range spans {
		switch {
		case sp.Name() == telemetryStatusApply:
			applies++
		case sp.Name() == "GET /apis/telemetry.test.example.com/v1alpha1/namespaces/{namespace}/memcacheds":
			lists++
		}
		url := spanAttrs(sp)["url.full"]
		if strings.Contains(url, "watch=true") || strings.Contains(url, "watch=1") || strings.Contains(sp.Name(), "/watch/") {
			t.Errorf("a span %s of a watch, %s: a watch lasts as long as its informer", sp.Name(), url)
		}
	}
	if applies != 1 {
		t.Errorf("%d status applies, want 1", applies)
	}
	if lists == 0 {
		t.Errorf("no span of the resource's list: spans %v", spanNames(tel))
	}
	if len(reconciles) != 1 {
		t.Errorf("%d reconciles, want 1: the event of its own status reconciles nothing", len(reconciles))
	}
}

// checkLeaderElectionsRecord checks that leader election's records reach
// the LoggerProvider: one Successfully acquired lease, naming the Lease.
func checkLeaderElectionsRecord(t *testing.T, tel *humustest.Telemetry, ns string) {
	t.Helper()
	recs := recordsWithBody(tel, "Successfully acquired lease")
	if len(recs) != 1 {
		t.Fatalf("%d records Successfully acquired lease, want 1; records: %q", len(recs), recordBodies(tel))
	}
	if got, want := recordAttrs(recs[0])["lock"], ns+"/telemetry-controller"; got != want {
		t.Errorf("the record's lock = %q, want %q", got, want)
	}
}

// checkTheRequestsAndReconcilesMeasured checks that otelhttp's client
// instruments measured each request, one per client span of spans, and
// the controller's own each reconcile.
func checkTheRequestsAndReconcilesMeasured(t *testing.T, tel *humustest.Telemetry, spans, reconciles []sdktrace.ReadOnlySpan) {
	t.Helper()
	rm, err := tel.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var requests uint64
	for _, sm := range rm.ScopeMetrics {
		for _, met := range sm.Metrics {
			if met.Name == "http.client.request.duration" {
				for _, dp := range met.Data.(metricdata.Histogram[float64]).DataPoints {
					requests += dp.Count
				}
			}
		}
	}
	if want := uint64(len(spans) - len(reconciles)); requests != want {
		t.Errorf("http.client.request.duration counted %d requests, want one per client span, %d", requests, want)
	}
	if got := reconcileDurations(t, tel)["success"]; got.Count != uint64(len(reconciles)) {
		t.Errorf("reconcile.duration counted %d successes, want %d", got.Count, len(reconciles))
	}
}

func equalStrings(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
