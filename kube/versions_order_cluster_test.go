package kube_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/webhook"
)

// TestClusterVersionsWebhookBeforeController runs, in humus.Run, a
// controller of v1alpha1, which isn't the storage version, served after
// its conversion webhook by webhook.Service.Before. Its status applies go
// through the webhook both ways. From the API server's audit log: none
// of them failed at the start, as they do while no webhook listens; and
// the apply of the reconcile in flight when Run was cancelled was made
// after the cancel, and stored, as the cluster then holds it.
//
// The objects were converted into the API server's cache of v1alpha1
// before the App started, as a webhook of the replica before would have:
// the controller's list and watch are answered from it, and what needs
// the webhook from the start is the controller's writes.
func TestClusterVersionsWebhookBeforeController(t *testing.T) {
	c := clustertest.Get(t)
	const group = "ordered.example.com"
	v := versioned()
	alpha := Memcached
	alpha.Group = group
	v.Hub.Group = group
	v.Others = []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{kube.VersionOf(alpha, memcachedToV1beta1, memcachedFromV1beta1)}

	authority, err := clustertest.NewCA("conversion webhook CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := authority.Serving("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	// The CRD names the webhook's address before the App runs: a free
	// port, which the App listens on once it starts.
	addr := freeAddr(t)
	v.Webhook = kube.ConversionWebhook{URL: "https://" + addr + "/convert", CABundle: authority.PEM()}
	c.Install(t, v)
	ns := c.Namespace(t)
	d := dynamic.NewForConfigOrDie(c.AdminConfig())
	betas := kube.NewTypedClientOn(d, v.Hub)
	alphas := kube.NewTypedClientOn(d, alpha)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	host := humustest.NewHost()
	host.Files["etc/webhook/tls/tls.crt"] = &fstest.MapFile{Data: certPEM}
	host.Files["etc/webhook/tls/tls.key"] = &fstest.MapFile{Data: keyPEM}
	var reviews atomic.Int64
	newHook := func(s *humus.Setup) (*webhook.Service, error) {
		h, err := v.Handler(s.Telemetry)
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("POST /convert", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reviews.Add(1)
			h.ServeHTTP(w, r)
		}))
		return webhook.NewService(s, webhook.Settings{Addr: addr, CertDir: "/etc/webhook/tls"}, mux)
	}

	// Three objects, stored at v1beta1 and read at v1alpha1 while a
	// webhook served, so that the API server's cache of v1alpha1 holds
	// them; then that webhook stops.
	warm, err := newHook(&humus.Setup{Host: host.Host()})
	if err != nil {
		t.Fatal(err)
	}
	warmCtx, stopWarm := context.WithCancel(ctx)
	warmed := make(chan error, 1)
	go func() { warmed <- warm.Serve(warmCtx) }()
	sizes := map[string]int32{"a": 1, "b": 2, "c": 2}
	for name, size := range sizes {
		if _, err := betas.Create(ctx, betaObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: MemcachedSpecV1beta1{Replicas: size, Image: "memcached:1"}}); err != nil {
			t.Fatal(err)
		}
	}
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		l, err := alphas.List(ctx, ns, nil, nil)
		if err == nil && len(l) != len(sizes) {
			err = fmt.Errorf("listed %d at v1alpha1, want %d", len(l), len(sizes))
		}
		return err
	})
	stopWarm()
	if err := <-warmed; err != nil {
		t.Fatal(err)
	}
	if err := warm.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	reviews.Store(0)

	// The App: the webhook, and the controller of v1alpha1 after it. The
	// reconcile of "last" is in flight when Run is cancelled, and applies
	// its status a moment after.
	entered, release := make(chan struct{}), make(chan struct{})
	started := time.Now()
	p := humustest.Start(t, host.Host(), func(_ context.Context, s *humus.Setup) ([]humus.Service, error) {
		hook, err := newHook(s)
		if err != nil {
			return nil, err
		}
		client, err := kube.NewClient(s, kube.Connection{
			Server: c.Server(), TLS: &tls.Config{RootCAs: c.CA(), MinVersion: tls.VersionTLS12},
			Token: func(context.Context) (string, error) { return c.AdminToken(), nil },
		})
		if err != nil {
			return nil, err
		}
		st := kube.DefaultSettings()
		st.Name = "ordered-memcached"
		st.Namespace = ns
		st.LeaderElection.Namespace = ns
		st.LeaderElection.Identity = "replica-1"
		ctrl, err := kube.NewController(s, client, st, alpha, kube.ReconcilerFunc[MemcachedSpec, MemcachedStatus](
			func(_ context.Context, m alphaObject) (kube.Result[MemcachedStatus], error) {
				if m.Name == "last" && m.Status.ReadyReplicas == 0 {
					close(entered)
					<-release
				}
				st := m.Status
				st.ReadyReplicas = m.Spec.Size
				return kube.Result[MemcachedStatus]{Status: &st}, nil
			}))
		if err != nil {
			return nil, err
		}
		return []humus.Service{hook.Before(ctrl)}, nil
	})

	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		for name, size := range sizes {
			m, err := betas.Get(ctx, ns, name)
			if err != nil {
				return err
			}
			if m.Status.ReadyReplicas != size {
				return fmt.Errorf("%s: readyReplicas %d, want %d", name, m.Status.ReadyReplicas, size)
			}
		}
		return nil
	})
	t.Logf("the three objects settled %v after the App started, with %d reviews", time.Since(started).Round(time.Millisecond), reviews.Load())

	if _, err := betas.Create(ctx, betaObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "last"}, Spec: MemcachedSpecV1beta1{Replicas: 3, Image: "memcached:1"}}); err != nil {
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
		t.Errorf("exit code %d, want 0; stderr:\n%s", code, host.Stderr())
	}
	t.Logf("Run returned %v after it was cancelled", time.Since(cancelled).Round(time.Millisecond))

	// What the API server answered the controller's status applies.
	c.AwaitAudit(t, 10*time.Second, func(e clustertest.AuditEvent) bool {
		return e.Namespace == ns && e.APIGroup == group && e.Name == "last" && e.Subresource == "status"
	})
	var applies int
	for _, e := range c.Audit(t) {
		if e.Namespace != ns || e.APIGroup != group || e.Subresource != "status" {
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
	if applies != len(sizes)+1 {
		t.Errorf("%d status applies by the controller, want one an object, %d", applies, len(sizes)+1)
	}
	if reviews.Load() == 0 {
		t.Error("the webhook converted nothing: the controller's applies needed no conversion")
	}
	// Read at the stored version, which needs no webhook.
	last, err := betas.Get(ctx, ns, "last")
	if err != nil {
		t.Fatal(err)
	}
	if last.Status.ReadyReplicas != 3 {
		t.Errorf("last's status once the App stopped: readyReplicas %d, want 3, as its reconcile in flight applied", last.Status.ReadyReplicas)
	}
}

// freeAddr returns an address on 127.0.0.1 whose port was free a moment
// ago.
func freeAddr(t *testing.T) string {
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
