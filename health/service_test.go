package health_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/health"
	"github.com/z5labs/humus/humustest"
)

// probe is what a probe answered.
type probe struct {
	code        int
	body        string
	contentType string
}

// serve serves probes on the test Host's 127.0.0.1:0, and returns a
// function that GETs a path from them.
func serve(t *testing.T, opts ...health.Option) (get func(path string) probe, svc *health.Service) {
	t.Helper()
	h := humustest.NewHost()
	s := &humus.Setup{Host: h.Host()}
	svc = health.NewService(s, "127.0.0.1:0", opts...)

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v once cancelled, want nil", err)
		}
		if err := svc.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown returned %v, want nil", err)
		}
	})

	addrCtx, cancelAddr := context.WithTimeout(ctx, 10*time.Second)
	defer cancelAddr()
	addr, err := svc.Addr(addrCtx)
	if err != nil {
		t.Fatalf("Addr: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: s.Host.Dial}, Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	return func(path string) probe {
		t.Helper()
		resp, err := client.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: reading the body: %v", path, err)
		}
		return probe{code: resp.StatusCode, body: string(b), contentType: resp.Header.Get("Content-Type")}
	}, svc
}

func TestServiceAnswersReadinessOverHTTP(t *testing.T) {
	synced := health.NewBinary(errors.New("caches not synced"))
	get, _ := serve(t, health.Readiness(synced))

	got := get("/readyz")
	if got.code != http.StatusServiceUnavailable || got.body != "caches not synced\n" {
		t.Errorf("GET /readyz before MarkHealthy = %d %q, want 503 with the reason", got.code, got.body)
	}
	if got.contentType != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type = %q, want text/plain; charset=utf-8", got.contentType)
	}

	synced.MarkHealthy()
	if got := get("/readyz"); got.code != http.StatusOK || got.body != "ok\n" {
		t.Errorf("GET /readyz after MarkHealthy = %d %q, want 200 ok", got.code, got.body)
	}

	// /livez is served without a probe given for it, and is healthy.
	if got := get("/livez"); got.code != http.StatusOK || got.body != "ok\n" {
		t.Errorf("GET /livez with no liveness probe = %d %q, want 200 ok", got.code, got.body)
	}
	if got := get("/metrics"); got.code != http.StatusNotFound {
		t.Errorf("GET /metrics = %d, want 404", got.code)
	}
}

func TestServiceJoinsAProbesMonitors(t *testing.T) {
	cache := health.NewBinary(errors.New("caches not synced"))
	lease := health.NewBinary(errors.New("no lease"))
	stuck := health.NewBinary(errors.New("worker stuck"))
	get, _ := serve(t,
		health.Readiness(cache),
		health.Readiness(lease), // a probe given twice answers with both
		health.Liveness(stuck),
		health.Probe{}, // ignored
	)

	if got := get("/readyz"); got.code != http.StatusServiceUnavailable || got.body != "caches not synced\nno lease\n" {
		t.Errorf("GET /readyz = %d %q, want 503 with both reasons", got.code, got.body)
	}
	if got := get("/livez"); got.code != http.StatusServiceUnavailable || got.body != "worker stuck\n" {
		t.Errorf("GET /livez = %d %q, want 503 worker stuck", got.code, got.body)
	}
	cache.MarkHealthy()
	if got := get("/readyz"); got.code != http.StatusServiceUnavailable || got.body != "no lease\n" {
		t.Errorf("GET /readyz with the cache synced = %d %q, want 503 no lease", got.code, got.body)
	}
	lease.MarkHealthy()
	stuck.MarkHealthy()
	for _, path := range []string{"/readyz", "/livez"} {
		if got := get(path); got.code != http.StatusOK || got.body != "ok\n" {
			t.Errorf("GET %s with every monitor healthy = %d %q, want 200 ok", path, got.code, got.body)
		}
	}
}

func TestServiceServesAHandleBesideTheProbes(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "# TYPE up gauge\nup 1\n")
	})
	synced := health.NewBinary(errors.New("caches not synced"))
	get, _ := serve(t, health.Readiness(synced), health.Handle("GET /metrics", metrics))

	if got := get("/metrics"); got.code != http.StatusOK || got.body != "# TYPE up gauge\nup 1\n" {
		t.Errorf("GET /metrics = %d %q, want 200 with the handler's body", got.code, got.body)
	}
	// The probes answer as they do without it.
	if got := get("/readyz"); got.code != http.StatusServiceUnavailable || got.body != "caches not synced\n" {
		t.Errorf("GET /readyz = %d %q, want 503 caches not synced", got.code, got.body)
	}
	if got := get("/livez"); got.code != http.StatusOK || got.body != "ok\n" {
		t.Errorf("GET /livez = %d %q, want 200 ok", got.code, got.body)
	}
	if got := get("/other"); got.code != http.StatusNotFound {
		t.Errorf("GET /other = %d, want 404", got.code)
	}
}

func TestServiceRefusesABadHandle(t *testing.T) {
	ok := http.NotFoundHandler()
	h := humustest.NewHost()
	svc := health.NewService(&humus.Setup{Host: h.Host()}, "127.0.0.1:0",
		health.Readiness(health.NewBinary(nil)),
		health.Handle("", ok),
		health.Handle("GET /readyz", ok),
		health.Handle("/livez", ok),
		health.Handle("/metrics", nil),
		health.Handle("GET /fine", ok),
		health.Handle("GET /fine", ok), // twice: ServeMux's conflict
	)

	err := svc.Serve(context.Background())

	if err == nil {
		t.Fatal("Serve with bad Handles returned nil")
	}
	for _, want := range []string{
		"health: Handle: an empty pattern",
		`health: Handle("GET /readyz"): /readyz is the probes' own`,
		`health: Handle("/livez"): /livez is the probes' own`,
		`health: Handle("/metrics"): a nil handler`,
		`health: Handle("GET /fine"): `,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Serve = %v\nwant it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "listening") {
		t.Errorf("Serve = %v, want it to fail before listening", err)
	}
	if _, err := svc.Addr(context.Background()); err == nil {
		t.Error("Addr of a Service that refused its Handles returned no error")
	}
}

func TestServiceListensThroughTheHost(t *testing.T) {
	h := humustest.NewHost()
	svc := health.NewService(&humus.Setup{Host: h.Host()}, "10.0.0.1:8081")

	err := svc.Serve(context.Background())

	if err == nil || !strings.HasPrefix(err.Error(), "health: listening on 10.0.0.1:8081: humustest: listening on 10.0.0.1:8081: ") {
		t.Errorf("Serve on an address the Host refuses = %v, want the Host's refusal, naming the address", err)
	}
	if _, err := svc.Addr(context.Background()); err == nil {
		t.Error("Addr of a Service that didn't listen returned no error")
	}
}

func TestServiceShutDownBeforeItServesReturnsNil(t *testing.T) {
	// Run calls Shutdown at once when another Service ends the App before
	// this one has listened.
	h := humustest.NewHost()
	svc := health.NewService(&humus.Setup{Host: h.Host()}, "127.0.0.1:0")
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := svc.Serve(ctx); err != nil {
		t.Errorf("Serve after Shutdown = %v, want nil", err)
	}
	if err := svc.Serve(ctx); err == nil || !strings.Contains(err.Error(), "already served") {
		t.Errorf("a second Serve = %v, want an error saying it already served", err)
	}
}

func TestServiceIsAWellBehavedService(t *testing.T) {
	h := humustest.NewHost()
	s := &humus.Setup{Host: h.Host()}
	svc := health.NewService(s, "127.0.0.1:0", health.Readiness(health.NewBinary(nil)))
	humustest.TestService(t, svc, humustest.During(func(ctx context.Context) {
		addr, err := svc.Addr(ctx)
		if err != nil {
			t.Errorf("Addr: %v", err)
			return
		}
		client := &http.Client{Transport: &http.Transport{DialContext: s.Host.Dial}}
		defer client.CloseIdleConnections()
		resp, err := client.Get("http://" + addr.String() + "/readyz")
		if err != nil {
			t.Errorf("GET /readyz: %v", err)
			return
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("GET /readyz = %d, want 503", resp.StatusCode)
		}
	}))
}
