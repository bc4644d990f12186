package kube_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/webhook"
)

// orderedGroup is the group of TestClusterVersionsWebhookBeforeController's
// CRD, so its audit events are its own.
const orderedGroup = "ordered.example.com"

// webhookFirst is the setting of TestClusterVersionsWebhookBeforeController.
type webhookFirst struct {
	c       *clustertest.Cluster
	v       kube.Versions[MemcachedSpecV1beta1, MemcachedStatus]
	alpha   kube.Resource[MemcachedSpec, MemcachedStatus]
	ns      string
	betas   *kube.TypedClient[betaObject]
	alphas  *kube.TypedClient[alphaObject]
	host    *humustest.Host
	addr    string       // the webhook's, which the CRD names
	reviews atomic.Int64 // the webhook's, since the App started
}

// TestClusterVersionsWebhookBeforeController runs, in humus.Run, a
// controller of v1alpha1, which isn't the storage version, served after
// its conversion webhook by webhook.Service.Before. Its status applies go
// through the webhook both ways. From the API server's side: none of the
// controller's lists or watches was answered 500 (its count of requests),
// none of its status applies failed at the start, as they do while no
// webhook listens (the audit log), and the apply of the reconcile in
// flight when Run was cancelled was made after the cancel, and stored, as
// the cluster then holds it.
//
// The objects were converted into the API server's cache of v1alpha1
// before the App started, as the webhook of the replica before would have:
// the controller's list and watch are answered from it, and what needs
// the webhook from the start is the controller's writes. The App's Host
// listens only listenDelay after it is asked, as a webhook slow to start
// would: a controller served beside the webhook, not after it, would
// apply its first statuses before anything listens, and see them answered
// 500.
func TestClusterVersionsWebhookBeforeController(t *testing.T) {
	o := newWebhookFirst(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sizes := map[string]int32{"a": 1, "b": 2, "c": 2}
	o.warm(ctx, t, sizes)
	before := o.readsAtV1alpha1(ctx, t)

	// The reconcile of "last" is in flight when Run is cancelled, and
	// applies its status a moment after.
	entered, release := make(chan struct{}), make(chan struct{})
	started := time.Now()
	p := humustest.Start(t, slowListen(o.host.Host(), listenDelay), o.app(func(m alphaObject) {
		if m.Name == "last" && m.Status.ReadyReplicas == 0 {
			close(entered)
			<-release
		}
	}))
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		for name, size := range sizes {
			m, err := o.betas.Get(ctx, o.ns, name)
			if err != nil {
				return err
			}
			if m.Status.ReadyReplicas != size {
				return fmt.Errorf("%s: readyReplicas %d, want %d", name, m.Status.ReadyReplicas, size)
			}
		}
		return nil
	})
	t.Logf("the objects settled %v after the App started, with %d reviews", time.Since(started).Round(time.Millisecond), o.reviews.Load())

	if _, err := o.betas.Create(ctx, betaObject{ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: "last"}, Spec: MemcachedSpecV1beta1{Replicas: 3, Image: "memcached:1"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the reconcile of last never began")
	}
	p.Signal()
	cancelled := time.Now()
	// Long enough for a webhook stopped with Run's context to be gone.
	time.Sleep(300 * time.Millisecond)
	close(release)
	if code := p.Wait(); code != 0 {
		t.Errorf("exit code %d, want 0; stderr:\n%s", code, o.host.Stderr())
	}
	t.Logf("Run returned %v after it was cancelled", time.Since(cancelled).Round(time.Millisecond))

	o.checkReads(ctx, t, before)
	o.checkStatusApplies(t, len(sizes)+1, cancelled)
	// Read at the stored version, which needs no webhook.
	last, err := o.betas.Get(ctx, o.ns, "last")
	if err != nil {
		t.Fatal(err)
	}
	if last.Status.ReadyReplicas != 3 {
		t.Errorf("last's status once the App stopped: readyReplicas %d, want 3, as its reconcile in flight applied", last.Status.ReadyReplicas)
	}
}

// listenDelay is how long the Host of TestClusterVersionsWebhookBeforeController's
// App takes to listen: longer than its controller takes to sync and
// reconcile, so a controller not served after the webhook applies its
// first statuses with nothing listening.
const listenDelay = 2 * time.Second

// slowListen is h whose Listen waits delay, or until its ctx is done,
// before it listens.
func slowListen(h humus.Host, delay time.Duration) humus.Host {
	listen := h.Listen
	h.Listen = func(ctx context.Context, network, addr string) (net.Listener, error) {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return listen(ctx, network, addr)
	}
	return h
}

// newWebhookFirst installs the versioned Memcached in a group of its own, its
// webhook named at a free port on 127.0.0.1 with a certificate of a CA of
// its own, which the returned Host's files hold.
func newWebhookFirst(t *testing.T) *webhookFirst {
	t.Helper()
	o := &webhookFirst{c: clustertest.Get(t), v: versioned(), alpha: Memcached, host: humustest.NewHost(), addr: reservedWebhookAddr(t)}
	o.alpha.Group = orderedGroup
	o.v.Hub.Group = orderedGroup
	o.v.Others = []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{kube.VersionOf(o.alpha, memcachedToV1beta1, memcachedFromV1beta1)}
	caPEM, certPEM, keyPEM := loopbackServing(t)
	o.host.Files["etc/webhook/tls/tls.crt"] = &fstest.MapFile{Data: certPEM}
	o.host.Files["etc/webhook/tls/tls.key"] = &fstest.MapFile{Data: keyPEM}
	o.v.Webhook = kube.ConversionWebhook{URL: "https://" + o.addr + "/convert", CABundle: caPEM}
	o.c.Install(t, o.v)
	o.ns = o.c.Namespace(t)
	d := dynamic.NewForConfigOrDie(o.c.AdminConfig())
	o.betas, o.alphas = kube.NewTypedClientOn(d, o.v.Hub), kube.NewTypedClientOn(d, o.alpha)
	return o
}

// hook is the App's webhook, counting its reviews.
func (o *webhookFirst) hook(s *humus.Setup) (*webhook.Service, error) {
	h, err := o.v.Handler(s.Telemetry)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /convert", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.reviews.Add(1)
		h.ServeHTTP(w, r)
	}))
	return webhook.NewService(s, webhook.Settings{Addr: o.addr, CertDir: "/etc/webhook/tls"}, mux)
}

// warm creates the objects of sizes at v1beta1, and lists them at
// v1alpha1, while a webhook serves, so that the API server's cache of
// v1alpha1 holds them; then the webhook stops.
func (o *webhookFirst) warm(ctx context.Context, t *testing.T, sizes map[string]int32) {
	t.Helper()
	hook, err := o.hook(&humus.Setup{Host: o.host.Host()})
	if err != nil {
		t.Fatal(err)
	}
	hookCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- hook.Serve(hookCtx) }()
	for name, size := range sizes {
		if _, err := o.betas.Create(ctx, betaObject{ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: name}, Spec: MemcachedSpecV1beta1{Replicas: size, Image: "memcached:1"}}); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		l, err := o.alphas.List(ctx, o.ns, nil, nil)
		if err == nil && len(l) != len(sizes) {
			err = fmt.Errorf("listed %d at v1alpha1, want %d", len(l), len(sizes))
		}
		return err
	})
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if err := hook.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	o.reviews.Store(0)
}

// app is the App: the webhook, and after it a controller of v1alpha1
// whose reconcile runs during and sets readyReplicas to the size.
func (o *webhookFirst) app(during func(alphaObject)) humus.Init {
	return func(_ context.Context, s *humus.Setup) ([]humus.Service, error) {
		hook, err := o.hook(s)
		if err != nil {
			return nil, err
		}
		client, err := kube.NewClient(s, kube.Connection{
			Server: o.c.Server(), TLS: &tls.Config{RootCAs: o.c.CA(), MinVersion: tls.VersionTLS12},
			Token: func(context.Context) (string, error) { return o.c.AdminToken(), nil },
		})
		if err != nil {
			return nil, err
		}
		st := kube.DefaultSettings()
		st.Name = "ordered-memcached"
		st.Namespace = o.ns
		st.LeaderElection.Namespace = o.ns
		st.LeaderElection.Identity = "replica-1"
		ctrl, err := kube.NewController(s, client, st, o.alpha, kube.ReconcilerFunc[MemcachedSpec, MemcachedStatus](
			func(_ context.Context, m alphaObject) (kube.Result[MemcachedStatus], error) {
				during(m)
				st := m.Status
				st.ReadyReplicas = m.Spec.Size
				return kube.Result[MemcachedStatus]{Status: &st}, nil
			}))
		if err != nil {
			return nil, err
		}
		return []humus.Service{hook.Before(ctrl)}, nil
	}
}

// checkReads checks that the lists and watches at v1alpha1 since before,
// the controller's, were answered, and none of them 500.
func (o *webhookFirst) checkReads(ctx context.Context, t *testing.T, before map[string]float64) {
	t.Helper()
	reads := o.readsAtV1alpha1(ctx, t)
	for k, n := range before {
		reads[k] -= n
	}
	t.Logf("the API server's answers to the lists and watches at v1alpha1 while the App ran: %v", reads)
	if reads["200 LIST"]+reads["200 WATCH"] == 0 {
		t.Errorf("no list or watch at v1alpha1 answered 200 while the App ran: %v", reads)
	}
	for k, n := range reads {
		if n > 0 && strings.HasPrefix(k, "5") {
			t.Errorf("%v lists or watches at v1alpha1 answered %s while the App ran, want none: %v", n, k, reads)
		}
	}
}

// checkStatusApplies checks, in the audit log, that the controller applied
// n statuses, one an object, each answered 200 at v1alpha1, through the
// webhook, and last's after cancelled.
func (o *webhookFirst) checkStatusApplies(t *testing.T, n int, cancelled time.Time) {
	t.Helper()
	o.c.AwaitAudit(t, 10*time.Second, func(e clustertest.AuditEvent) bool {
		return e.Namespace == o.ns && e.APIGroup == orderedGroup && e.Name == "last" && e.Subresource == "status"
	})
	var applies int
	for _, e := range o.c.Audit(t) {
		if e.Namespace != o.ns || e.APIGroup != orderedGroup || e.Subresource != "status" {
			continue
		}
		applies++
		if e.Code != http.StatusOK || e.APIVersion != "v1alpha1" {
			t.Errorf("the controller's %s of %s/status at %s was answered %d, want 200", e.Verb, e.Name, e.APIVersion, e.Code)
		}
		if e.Name == "last" && !e.RequestReceived.After(cancelled) {
			t.Errorf("the status apply of last was received at %v, before Run was cancelled at %v: it was no reconcile in flight", e.RequestReceived, cancelled)
		}
	}
	if applies != n {
		t.Errorf("%d status applies by the controller, want one an object, %d", applies, n)
	}
	if o.reviews.Load() == 0 {
		t.Error("the webhook converted nothing: the controller's applies needed no conversion")
	}
}

// readsAtV1alpha1 is the API server's count of the lists and watches at
// v1alpha1 in a namespace it answered, by verb and code, "500 LIST" say:
// apiserver_request_total, of the CRD's group, which is the test's own.
func (o *webhookFirst) readsAtV1alpha1(ctx context.Context, t *testing.T) map[string]float64 {
	t.Helper()
	b, err := kubernetes.NewForConfigOrDie(o.c.AdminConfig()).RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `group="`+orderedGroup+`"`) ||
			!strings.Contains(line, `version="v1alpha1"`) || !strings.Contains(line, `scope="namespace"`) {
			continue
		}
		labels, value, _ := strings.Cut(strings.TrimPrefix(line, "apiserver_request_total{"), "} ")
		var code, verb string
		for _, l := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(l, "=")
			switch k {
			case "code":
				code = strings.Trim(v, `"`)
			case "verb":
				verb = strings.Trim(v, `"`)
			}
		}
		if verb != "LIST" && verb != "WATCH" {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("apiserver_request_total: %q: %v", line, err)
		}
		out[code+" "+verb] += n
	}
	return out
}

// reservedWebhookAddr returns an address on 127.0.0.1 whose port was free a moment
// ago.
func reservedWebhookAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
