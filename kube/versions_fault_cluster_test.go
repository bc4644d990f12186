package kube_test

import (
	"context"
	"net/http"
	"strings"
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

// TestClusterFaultConversionWebhook breaks the conversion webhook under
// the API server: stopped, then serving a certificate the CRD's caBundle
// doesn't trust. A read at the other version fails, with what the API
// server answered (a list there is answered from its watch cache); reads
// and lists at the stored version, the controller's own, go on; and once
// the webhook is back, reads at the other version work again.
func TestClusterFaultConversionWebhook(t *testing.T) {
	c := clustertest.Get(t)
	v := versioned()
	alpha := Memcached
	alpha.Group = "faulted.example.com"
	v.Hub.Group = alpha.Group
	v.Others = []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{kube.VersionOf(alpha, memcachedToV1beta1, memcachedFromV1beta1)}

	caPEM, certPEM, keyPEM := loopbackServing(t)
	v.Webhook = kube.ConversionWebhook{URL: "https://127.0.0.1/convert", CABundle: caPEM}
	h, err := v.Handler(humustest.NewTelemetry().Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	serve := func(addr string, certPEM, keyPEM []byte) (string, func()) {
		return serveOn(t, h, addr, certPEM, keyPEM)
	}
	addr, stop := serve("127.0.0.1:0", certPEM, keyPEM)
	v.Webhook.URL = "https://" + addr + "/convert"
	c.Install(t, v)
	ns := c.Namespace(t)
	d := dynamic.NewForConfigOrDie(c.AdminConfig())
	alphas, betas := kube.NewTypedClientOn(d, alpha), kube.NewTypedClientOn(d, v.Hub)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := betas.Create(ctx, betaObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Spec: MemcachedSpecV1beta1{Replicas: 2, Image: "memcached:1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := alphas.Get(ctx, ns, "a"); err != nil {
		t.Fatalf("at v1alpha1 with the webhook up: %v", err)
	}

	stop()
	checkOnlyTheStoredVersionReads(ctx, t, alphas, betas, ns, "webhook down", "connection refused")

	// Back, on the same address, with a certificate of another CA.
	other, err := clustertest.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey, err := other.Serving("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	_, stop = serve(addr, otherCert, otherKey)
	checkOnlyTheStoredVersionReads(ctx, t, alphas, betas, ns, "untrusted certificate", "x509: certificate signed by unknown authority")
	stop()

	// Back with its own certificate: reads at v1alpha1 work again.
	serve(addr, certPEM, keyPEM)
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		_, err := alphas.Get(ctx, ns, "a")
		return err
	})
}

// serveOn serves h on addr, with the certificate given, on a
// webhook.Service, until stop, and returns the address it listens on.
func serveOn(t *testing.T, h http.Handler, addr string, certPEM, keyPEM []byte) (bound string, stop func()) {
	t.Helper()
	host := humustest.NewHost()
	host.Files["tls/tls.crt"] = &fstest.MapFile{Data: certPEM}
	host.Files["tls/tls.key"] = &fstest.MapFile{Data: keyPEM}
	mux := http.NewServeMux()
	mux.Handle("POST /convert", h)
	hook, err := webhook.NewService(&humus.Setup{Host: host.Host()}, webhook.Settings{Addr: addr, CertDir: "/tls"}, mux)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hook.Serve(ctx) }()
	a, err := hook.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the webhook's Serve = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the webhook's Serve hadn't returned 10s after its context ended")
		}
		// The API server's requests in flight finish: within a bound, so
		// that one that hangs fails here, by name, not as every later read
		// running out of the test's time.
		sctx, cancelShutdown := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelShutdown()
		if err := hook.Shutdown(sctx); err != nil {
			t.Errorf("the webhook's Shutdown = %v", err)
		}
	}
	t.Cleanup(stop)
	return a.String(), stop
}

// checkOnlyTheStoredVersionReads: a read at v1alpha1 fails, saying want;
// a list at v1alpha1 is answered from the API server's watch cache, as it
// was converted before; and a read and a list at v1beta1, the stored
// version, succeed.
func checkOnlyTheStoredVersionReads(ctx context.Context, t *testing.T, alphas *kube.TypedClient[alphaObject], betas *kube.TypedClient[betaObject], ns, fault, want string) {
	t.Helper()
	_, err := alphas.Get(ctx, ns, "a")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: a read at v1alpha1: %v; want an error saying %q", fault, err, want)
	}
	t.Logf("%s: the API server answered a read at v1alpha1: %v", fault, err)
	// A list is answered from the watch cache of v1alpha1, which holds
	// the object as it was converted while the webhook was up.
	if l, err := alphas.List(ctx, ns, nil, nil); err != nil || len(l) != 1 || l[0].Spec.Size != 2 {
		t.Errorf("%s: a list at v1alpha1: %d objects, %v; want a from the watch cache, size 2", fault, len(l), err)
	}
	if _, err := betas.Get(ctx, ns, "a"); err != nil {
		t.Errorf("%s: a read at v1beta1, the stored version: %v", fault, err)
	}
	if l, err := betas.List(ctx, ns, nil, nil); err != nil || len(l) != 1 {
		t.Errorf("%s: a list at v1beta1, the stored version: %d objects, %v", fault, len(l), err)
	}
}
