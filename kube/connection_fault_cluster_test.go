package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/transport"
)

// The fault suite's scenarios of the connection: a token rotated and then
// revoked, a server the Connection mustn't trust, and the process's real
// environment set to traps.

// rotatingToken is a Connection.Token whose answer a test changes, counting
// its calls.
type rotatingToken struct {
	mu    sync.Mutex
	token string
	calls atomic.Int32
}

func (r *rotatingToken) set(tok string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.token = tok
}

func (r *rotatingToken) get(context.Context) (string, error) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.token, nil
}

// TestClusterFaultARotatedTokenIsInUseWithinAMinuteAndARevokedOneAfterOne401
// rotates the controller's token, as the kubelet rotates a service
// account's, while the old one is still valid: the new one is in use within
// a minute, by the audit log's user, and no request fails. Then the token in
// use is revoked, its ServiceAccount deleted: one 401, and the next request
// carries the new token.
func TestClusterFaultARotatedTokenIsInUseWithinAMinuteAndARevokedOneAfterOne401(t *testing.T) {
	t.Parallel() // a namespace of its own; it waits more than it works, and touches no process of the control plane
	w := newWorkload(t)
	gvr := clusterCaches.GVR()
	grants := controllerRBAC(gvr.Group, gvr.Resource, w.ns)
	first := w.c.ServiceAccount(t, w.ns, "token-a", grants...)
	second := w.c.ServiceAccount(t, w.ns, "token-b", grants...)
	third := w.c.ServiceAccount(t, w.ns, "token-c", grants...)
	user := func(name string) string { return "system:serviceaccount:" + w.ns + ":" + name }

	tok := &rotatingToken{token: first}
	tel := humustest.NewTelemetry()
	logOnFailure(t, "controller", tel)
	setup := &humus.Setup{Host: humustest.NewHost().Host(), Telemetry: tel.Telemetry()}
	client, err := NewClient(setup, Connection{Server: w.c.Server(), TLS: &tls.Config{RootCAs: w.c.CA()}, Token: tok.get})
	if err != nil {
		t.Fatal(err)
	}
	s := testSettings()
	s.Namespace, s.LeaderElection.Namespace = w.ns, w.ns
	ctrl, err := NewController(setup, client, s, clusterCaches, &deployer{kube: kubernetes.NewForConfigOrDie(client.Config())}, Owns(deployments))
	if err != nil {
		t.Fatal(err)
	}
	stop := served(t, ctrl)
	w.create(20)
	w.converged(time.Minute)

	// Rotated, the old token still valid: no request fails, and the new
	// token is in use within a minute, which the Lease's renewals show.
	tok.set(second)
	rotated := time.Now()
	ev := w.c.AwaitAudit(t, 75*time.Second, func(e clustertest.AuditEvent) bool {
		return e.User == user("token-b") && e.Resource == "leases"
	})
	if took := ev.RequestReceived.Sub(rotated); took > time.Minute+5*time.Second {
		t.Errorf("the rotated token was first used %s after the rotation, want within a minute", took)
	}
	t.Logf("the rotated token was in use %s after the rotation", ev.RequestReceived.Sub(rotated).Round(time.Millisecond))
	for _, e := range w.c.Audit(t) {
		if e.Namespace == w.ns && e.Code == 401 {
			t.Errorf("a request failed with 401 across the rotation: %s %s", e.Verb, e.RequestURI)
		}
	}

	// Revoked: its ServiceAccount deleted, its tokens refused at once. One
	// 401, then the next token.
	tok.set(third)
	revoked := time.Now()
	if err := w.kube.CoreV1().ServiceAccounts(w.ns).Delete(t.Context(), "token-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev = w.c.AwaitAudit(t, 30*time.Second, func(e clustertest.AuditEvent) bool {
		return e.User == user("token-c") && e.Resource == "leases"
	})
	checkOne401(t, tel, revoked, ev.RequestReceived, s.LeaderElection.RetryPeriod)
	select {
	case <-ctrl.engine.Done:
		t.Fatalf("Serve returned %v across the rotation and the revocation", stop())
	default:
	}
	w.resize(20, 2)
	w.converged(time.Minute)
}

// checkOne401 checks the 401s tel recorded after a token was revoked at
// revoked, and the next token first used at next: the revoked token is
// refused for a second at most, and the next one is in use within
// retryPeriod and a second of the first 401. kube-apiserver caches a
// token's authentication for 10s, so the first 401 comes up to 10s after
// the revocation; from it, the next request calls Token again.
func checkOne401(t *testing.T, tel *humustest.Telemetry, revoked, next time.Time, retryPeriod time.Duration) {
	t.Helper()
	refused := unauthorized(tel)
	if len(refused) == 0 {
		t.Fatal("no request was refused with a 401 after the revocation")
	}
	firstRefused := refused[0]
	t.Logf("after the revocation: the first 401 %s later, %d requests refused, the next token in use %s after the first 401",
		firstRefused.Sub(revoked).Round(time.Millisecond), len(refused), next.Sub(firstRefused).Round(time.Millisecond))
	if took := next.Sub(firstRefused); took > retryPeriod+2*time.Second {
		t.Errorf("the next token was first used %s after the first 401, want within RetryPeriod and a second", took)
	}
	for _, at := range refused {
		if at.Sub(firstRefused) > transport.TokenRefused+time.Second {
			t.Errorf("a request was refused %s after the first 401: the revoked token was still sent", at.Sub(firstRefused))
		}
	}
}

// unauthorized is when each request the Client's telemetry recorded was
// answered 401, in order: a span's end, or the record that says a token
// was refused (a watch, which has no span, may be the first request a
// revoked token is refused for).
func unauthorized(tel *humustest.Telemetry) []time.Time {
	var at []time.Time
	for _, sp := range tel.Spans() {
		if spanAttrs(sp)["http.response.status_code"] == "401" {
			at = append(at, sp.EndTime())
		}
	}
	for _, r := range tel.Records() {
		if strings.HasPrefix(r.Body().AsString(), "the API server refused the token with a 401") {
			at = append(at, r.Timestamp())
		}
	}
	slices.SortFunc(at, time.Time.Compare)
	return at
}

// TestClusterFaultAServerTheConnectionMustNotTrustIsRefused: a certificate not
// signed by the Connection's CA, and one not for the Connection's
// ServerName: refused, with an error naming the server.
func TestClusterFaultAServerTheConnectionMustNotTrustIsRefused(t *testing.T) {
	c := clustertest.Get(t)
	tok := c.AdminToken()
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		want func(error) bool
	}{
		{"another CA", &tls.Config{RootCAs: newTestPKI(t).roots}, func(err error) bool {
			var unknown x509.UnknownAuthorityError
			return errors.As(err, &unknown)
		}},
		{"another server name", &tls.Config{RootCAs: c.CA(), ServerName: "kubernetes.example"}, func(err error) bool {
			var host x509.HostnameError
			return errors.As(err, &host)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
				Server: c.Server(),
				TLS:    tc.tls,
				Token:  func(context.Context) (string, error) { return tok, nil },
			})
			_, err := listNamespaces(t, client)
			if !tc.want(err) {
				t.Errorf("error = %v, want the certificate refused", err)
			}
			if err == nil || !strings.Contains(err.Error(), c.Server()) {
				t.Errorf("error = %v, want it to name the server %s", err, c.Server())
			}
		})
	}
}

const trapsHelperEnv = "HUMUS_KUBE_TRAPS_HELPER"

// TestClusterFaultTheProcessEnvironmentChangesNothing runs a controller in a
// child process whose real environment sets HTTPS_PROXY, HTTP_PROXY,
// KUBECONFIG and KUBERNETES_SERVICE_HOST to traps: a proxy that records any
// connection, a kubeconfig naming a server that doesn't exist. The
// controller reaches the API server, named kube.test so that a proxy would
// apply to it, through its Connection alone and converges, and the trap
// proxy sees no connection.
func TestClusterFaultTheProcessEnvironmentChangesNothing(t *testing.T) {
	w := newWorkload(t)
	w.create(20)
	gvr := clusterCaches.GVR()
	token := w.c.ServiceAccount(t, w.ns, "trapped", controllerRBAC(gvr.Group, gvr.Resource, w.ns)...)

	var proxied atomic.Int32
	trap := humustest.NewHost().Host()
	l, err := trap.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			proxied.Add(1)
			_ = conn.Close()
		}
	}()
	dir := t.TempDir()
	kubeconfig := dir + "/kubeconfig"
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: trap, cluster: {server: 'https://127.0.0.1:1'}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := dir + "/ca.crt"
	if err := os.WriteFile(caFile, w.c.CAPEM(), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestTrapsHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(),
		trapsHelperEnv+"=1",
		"HTTPS_PROXY=http://"+l.Addr().String(),
		"HTTP_PROXY=http://"+l.Addr().String(),
		"https_proxy=http://"+l.Addr().String(),
		"KUBECONFIG="+kubeconfig,
		"KUBERNETES_SERVICE_HOST=127.0.0.1",
		"KUBERNETES_SERVICE_PORT=1",
		"TRAPS_SERVER="+w.c.Server(),
		"TRAPS_CA="+caFile,
		"TRAPS_TOKEN="+token,
		"TRAPS_NAMESPACE="+w.ns,
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.converged(time.Minute)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the child process: %v\n%s", err, out.String())
	}
	if n := proxied.Load(); n != 0 {
		t.Errorf("the trap proxy saw %d connections, want none", n)
	}
}

// TestTrapsHelperProcess is the child process of
// TestClusterFaultTheProcessEnvironmentChangesNothing, and does nothing in any
// other process. It serves the controller until SIGINT.
func TestTrapsHelperProcess(t *testing.T) {
	if os.Getenv(trapsHelperEnv) != "1" {
		t.Skip("the child process of TestClusterFaultTheProcessEnvironmentChangesNothing")
	}
	ca, err := os.ReadFile(os.Getenv("TRAPS_CA"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	token := os.Getenv("TRAPS_TOKEN")
	// The API server is named kube.test, which isn't loopback, so a proxy
	// from the environment would be used for it: Go never proxies a
	// loopback address. The process's real Host dials kube.test on
	// loopback, and nothing else is changed.
	server := os.Getenv("TRAPS_SERVER")
	_, port, err := net.SplitHostPort(server)
	if err != nil {
		t.Fatal(err)
	}
	host := humus.OSHost()
	dial := host.Dial
	host.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == net.JoinHostPort("kube.test", port) {
			addr = server
		}
		return dial(ctx, network, addr)
	}
	setup := &humus.Setup{Host: host}
	client, err := NewClient(setup, Connection{
		Server: net.JoinHostPort("kube.test", port),
		TLS:    &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"},
		Token:  func(context.Context) (string, error) { return token, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	s := testSettings()
	s.Namespace, s.LeaderElection.Namespace = os.Getenv("TRAPS_NAMESPACE"), os.Getenv("TRAPS_NAMESPACE")
	ctrl, err := NewController(setup, client, s, clusterCaches, &deployer{kube: kubernetes.NewForConfigOrDie(client.Config())}, Owns(deployments))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signalContext(t)
	defer stop()
	if err := ctrl.Serve(ctx); err != nil {
		t.Fatalf("Serve = %v", err)
	}
}
