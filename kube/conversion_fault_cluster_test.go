package kube_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/procutil"
	"github.com/z5labs/humus/webhook"
)

// The conversion webhook's fault tests run the webhook, and the
// controllers, as real processes: this test binary run again, in
// TestConversionProcessHelper, on humus.Run with humus.OSHost. The webhook
// is Versions.Handler on a webhook.Service reading its certificate from
// files, on a fixed port, so the CRD's URL stays valid when a process
// killed with SIGKILL is started again; a process given an identity also
// runs a controller of one version, under a ServiceAccount of its own, so
// the audit log tells its writes from the writer's.

// convHelperTest is the test that is the child process.
const convHelperTest = "TestConversionProcessHelper"

// What the child is given, in its environment.
const (
	convEnv          = "HUMUS_KUBE_CONVERSION_PROCESS" // "1" in the child
	convGroupEnv     = "HUMUS_KUBE_CONVERSION_GROUP"   // the CRD's group
	convAddrEnv      = "HUMUS_KUBE_CONVERSION_ADDR"    // the webhook's address; no webhook without
	convCertsEnv     = "HUMUS_KUBE_CONVERSION_CERTS"   // the folder of the webhook's tls.crt, tls.key and ca.crt
	convServerEnv    = "HUMUS_KUBE_CONVERSION_SERVER"
	convCAEnv        = "HUMUS_KUBE_CONVERSION_CA_FILE" // the API server's CA
	convTokenEnv     = "HUMUS_KUBE_CONVERSION_TOKEN"
	convNamespaceEnv = "HUMUS_KUBE_CONVERSION_NAMESPACE"
	convIdentityEnv  = "HUMUS_KUBE_CONVERSION_IDENTITY" // the controller's; no controller without
	convVersionEnv   = "HUMUS_KUBE_CONVERSION_VERSION"  // the version the controller reconciles
)

// What the child writes on its stdout.
const (
	convServing = "conversion process: serving"
	convSynced  = "conversion process: synced"
	convReview  = "conversion process: review" // and when it was answered, in Unix nanoseconds
)

// convControllerName is the controllers' Settings.Name, their Lease's.
const convControllerName = "conversion-faults"

// convLease is the controllers' Lease timings, short, as the handover
// tests': LeaseDuration, RenewDeadline, RetryPeriod.
var convLease = [3]time.Duration{6 * time.Second, 4 * time.Second, time.Second}

// TestConversionProcessHelper is a process of the conversion webhook's
// fault tests, and does nothing in any other process. It exits with
// humus.Run's code, or 2 when it can't start.
func TestConversionProcessHelper(t *testing.T) {
	if os.Getenv(convEnv) != "1" {
		t.Skip("a process of the conversion webhook's fault tests")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	os.Exit(humus.Run(ctx, humus.OSHost(), conversionServices))
}

// conversionServices is the process's App: the webhook when it is given an
// address, and a controller when it is given an identity; both, the
// webhook served Before the controller, as an App serving its own
// conversions is.
func conversionServices(ctx context.Context, setup *humus.Setup) ([]humus.Service, error) {
	group := os.Getenv(convGroupEnv)
	var hook *webhook.Service
	if addr := os.Getenv(convAddrEnv); addr != "" {
		var err error
		if hook, err = conversionHook(setup, group, addr); err != nil {
			return nil, err
		}
		go func() {
			if _, err := hook.Addr(ctx); err == nil {
				fmt.Println(convServing)
			}
		}()
	}
	id := os.Getenv(convIdentityEnv)
	if id == "" {
		if hook == nil {
			return nil, nil
		}
		return []humus.Service{hook}, nil
	}
	ctrl, err := conversionController(setup, group, id)
	if err != nil {
		return nil, err
	}
	go func() {
		for ctrl.Synced().Healthy(ctx) != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		fmt.Println(convSynced)
	}()
	if hook == nil {
		return []humus.Service{ctrl}, nil
	}
	return []humus.Service{hook.Before(ctrl)}, nil
}

// conversionHook serves faultVersions(group)'s Handler on addr, with the
// certificate in the folder convCertsEnv names, and says on stdout when it
// answered each review.
func conversionHook(setup *humus.Setup, group, addr string) (*webhook.Service, error) {
	dir := os.Getenv(convCertsEnv)
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	v := faultVersions(group)
	v.Webhook = kube.ConversionWebhook{URL: "https://" + addr + "/convert", CABundle: ca}
	h, err := v.Handler(setup.Telemetry)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /convert", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		fmt.Printf("%s %d\n", convReview, time.Now().UnixNano())
	}))
	return webhook.NewService(setup, webhook.Settings{Addr: addr, CertDir: dir}, mux)
}

// conversionController is a controller of the version convVersionEnv
// names, whose Reconciler settles an object's status.readyReplicas at its
// spec's size.
func conversionController(setup *humus.Setup, group, id string) (*kube.Controller, error) {
	caPEM, err := os.ReadFile(os.Getenv(convCAEnv))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("conversion process: no certificate in the CA file")
	}
	token := os.Getenv(convTokenEnv)
	client, err := kube.NewClient(setup, kube.Connection{
		Server: os.Getenv(convServerEnv),
		TLS:    &tls.Config{RootCAs: roots},
		Token:  func(context.Context) (string, error) { return token, nil },
	})
	if err != nil {
		return nil, err
	}
	s := kube.DefaultSettings()
	s.Name = convControllerName
	s.Workers = 4
	s.Namespace, s.LeaderElection.Namespace = os.Getenv(convNamespaceEnv), os.Getenv(convNamespaceEnv)
	s.LeaderElection.Identity = id
	s.LeaderElection.LeaseDuration, s.LeaderElection.RenewDeadline, s.LeaderElection.RetryPeriod = convLease[0], convLease[1], convLease[2]
	v := faultVersions(group)
	switch version := os.Getenv(convVersionEnv); version {
	case "v1alpha1":
		return kube.NewController(setup, client, s, alphaIn(group), kube.ReconcilerFunc[MemcachedSpec, MemcachedStatus](
			func(_ context.Context, m alphaObject) (kube.Result[MemcachedStatus], error) {
				st := m.Status
				st.ReadyReplicas = m.Spec.Size
				return kube.Result[MemcachedStatus]{Status: &st}, nil
			}))
	case "v1beta1":
		return kube.NewController(setup, client, s, v.Hub, kube.ReconcilerFunc[MemcachedSpecV1beta1, MemcachedStatus](
			func(_ context.Context, m betaObject) (kube.Result[MemcachedStatus], error) {
				st := m.Status
				st.ReadyReplicas = m.Spec.Replicas
				return kube.Result[MemcachedStatus]{Status: &st}, nil
			}))
	default:
		return nil, fmt.Errorf("conversion process: %s %q is neither v1alpha1 nor v1beta1", convVersionEnv, version)
	}
}

// alphaIn is Memcached at v1alpha1 in group.
func alphaIn(group string) kube.Resource[MemcachedSpec, MemcachedStatus] {
	alpha := Memcached
	alpha.Group = group
	return alpha
}

// faultVersions is memcachedVersions in group, stored at v1beta1, the hub.
func faultVersions(group string) kube.Versions[MemcachedSpecV1beta1, MemcachedStatus] {
	v := memcachedVersions()
	v.Hub.Group = group
	v.Others = []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{kube.VersionOf(alphaIn(group), memcachedToV1beta1, memcachedFromV1beta1)}
	return v
}

// convFault is one conversion fault test's CRD, namespace, certificates
// and clients.
type convFault struct {
	t       *testing.T
	c       *clustertest.Cluster
	group   string
	ns      string
	certDir string // the webhook's tls.crt, tls.key and ca.crt
	caFile  string // the API server's CA
	caPEM   []byte // the webhook's CA
	admin   dynamic.Interface
	kube    kubernetes.Interface
}

// newConvFault makes a namespace and the webhook's certificate, for a CRD
// of group.
func newConvFault(t *testing.T, group string) *convFault {
	t.Helper()
	c := clustertest.Get(t)
	caPEM, certPEM, keyPEM := loopbackServing(t)
	f := &convFault{
		t: t, c: c, group: group, ns: c.Namespace(t),
		certDir: t.TempDir(), caFile: filepath.Join(t.TempDir(), "ca.crt"), caPEM: caPEM,
		admin: dynamic.NewForConfigOrDie(c.AdminConfig()), kube: kubernetes.NewForConfigOrDie(c.AdminConfig()),
	}
	for name, data := range map[string][]byte{
		filepath.Join(f.certDir, "tls.crt"): certPEM,
		filepath.Join(f.certDir, "tls.key"): keyPEM,
		filepath.Join(f.certDir, "ca.crt"):  caPEM,
		f.caFile:                            c.CAPEM(),
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// install installs the CRD, its conversion webhook at 127.0.0.1:port.
func (f *convFault) install(port int) {
	f.t.Helper()
	v := faultVersions(f.group)
	v.Webhook = kube.ConversionWebhook{URL: fmt.Sprintf("https://127.0.0.1:%d/convert", port), CABundle: f.caPEM}
	f.c.Install(f.t, v)
}

// gvr is the resource at version.
func (f *convFault) gvr(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: f.group, Version: version, Resource: "memcacheds"}
}

// freePort is a port on 127.0.0.1 nothing listens on, for now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// convProc is one process of a conversion fault test.
type convProc struct {
	name string
	user string // as the audit log names it, when it runs a controller
	cmd  *exec.Cmd
	out  *procutil.SyncBuffer // its stdout and stderr together
	done chan struct{}        // closed once it has exited
}

// webhook starts a process named name serving the webhook alone on port.
func (f *convFault) webhook(name string, port int) *convProc {
	f.t.Helper()
	p := f.start(name, convAddrEnv+"="+net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	p.await(f.t, convServing, 30*time.Second)
	return p
}

// controller starts a process named name running a controller of version,
// under a ServiceAccount of that name, and the webhook on port unless it
// is 0; it returns once the controller's caches have synced.
func (f *convFault) controller(name, version string, port int) *convProc {
	t := f.t
	t.Helper()
	token := f.c.ServiceAccount(t, f.ns, name, clustertest.Grant{Namespace: f.ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{f.group}, Resources: []string{"memcacheds"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{f.group}, Resources: []string{"memcacheds/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}})
	env := []string{
		convServerEnv + "=" + f.c.Server(), convCAEnv + "=" + f.caFile, convTokenEnv + "=" + token,
		convNamespaceEnv + "=" + f.ns, convIdentityEnv + "=" + name, convVersionEnv + "=" + version,
	}
	if port != 0 {
		env = append(env, convAddrEnv+"="+net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	p := f.start(name, env...)
	p.user = "system:serviceaccount:" + f.ns + ":" + name
	if port != 0 {
		p.await(t, convServing, 30*time.Second)
	}
	p.await(t, convSynced, time.Minute)
	return p
}

// start starts a process named name with env. It is killed at the test's
// cleanup if it still runs, and its output logged when the test failed.
func (f *convFault) start(name string, env ...string) *convProc {
	t := f.t
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+convHelperTest+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), convEnv+"=1", convGroupEnv+"="+f.group, convCertsEnv+"="+f.certDir,
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, env...)
	out := &procutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := procutil.Spawn(cmd); err != nil {
		t.Fatal(err)
	}
	p := &convProc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		procutil.KillGroup(cmd.Process.Pid)
		<-p.done
		if t.Failed() {
			t.Logf("%s's output:\n%s", p.name, lastLines(p.out.String(), 40))
		}
	})
	return p
}

// lastLines is s's last n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// await waits up to within for the process to say line.
func (p *convProc) await(t *testing.T, line string, within time.Duration) {
	t.Helper()
	clustertest.Eventually(t, within, func(context.Context) error {
		select {
		case <-p.done:
			t.Fatalf("%s exited before it said %q: %s", p.name, line, p.cmd.ProcessState)
		default:
		}
		if !strings.Contains(p.out.String(), line) {
			return fmt.Errorf("%s hasn't said %q", p.name, line)
		}
		return nil
	})
}

// signal sends sig to the process, and returns when it was sent; after
// SIGKILL, once it has exited.
func (p *convProc) signal(t *testing.T, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	if sig == syscall.SIGKILL {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s hadn't exited 10s after SIGKILL", p.name)
		}
	}
	return at
}

// reviews is when the process answered each ConversionReview.
func (p *convProc) reviews() []time.Time {
	var at []time.Time
	for line := range strings.Lines(p.out.String()) {
		if rest, ok := strings.CutPrefix(line, convReview+" "); ok {
			if ns, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil {
				at = append(at, time.Unix(0, ns))
			}
		}
	}
	return at
}

// before counts the times before t.
func before(times []time.Time, t time.Time) int {
	n := 0
	for _, at := range times {
		if at.Before(t) {
			n++
		}
	}
	return n
}

// A convWrite is one write of the writer at v1alpha1, and what the API
// server answered.
type convWrite struct {
	op         string // create or patch
	name       string
	size       int64
	sent, done time.Time
	code       int32 // the answer's HTTP status; 0 when there was none
	err        error
}

// convWriter writes at v1alpha1, the version that isn't stored, so each
// of its writes needs the webhook: each worker creates objects and
// patches their size in turn, as the ServiceAccount "writer".
type convWriter struct {
	f    *convFault
	user string
	d    dynamic.Interface

	mu     sync.Mutex
	writes []convWrite
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// writer starts workers writing every interval, until stop.
func (f *convFault) writer(workers int, interval time.Duration) *convWriter {
	t := f.t
	t.Helper()
	token := f.c.ServiceAccount(t, f.ns, "writer", clustertest.Grant{Namespace: f.ns, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{f.group}, Resources: []string{"memcacheds"}, Verbs: []string{"create", "patch", "get"}},
	}})
	cfg := &rest.Config{Host: f.c.Server(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: f.c.CAPEM()}, QPS: -1}
	w := &convWriter{f: f, user: "system:serviceaccount:" + f.ns + ":writer", d: dynamic.NewForConfigOrDie(cfg)}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for i := range workers {
		w.wg.Go(func() { w.work(ctx, i, interval) })
	}
	t.Cleanup(w.stop)
	return w
}

// work is one worker: a create, then two patches of one of its objects,
// and again.
func (w *convWriter) work(ctx context.Context, worker int, interval time.Duration) {
	res := w.d.Resource(w.f.gvr("v1alpha1")).Namespace(w.f.ns)
	var mine []string
	for i := 0; ctx.Err() == nil; i++ {
		op := convWrite{op: "create", size: int64(1 + i%3)}
		if i%3 == 0 || len(mine) == 0 {
			op.name = fmt.Sprintf("w%d-%d", worker, i)
		} else {
			op.op, op.name = "patch", mine[i%len(mine)]
		}
		// No context: a write is never cut short by stop, so its outcome is
		// the API server's.
		call, cancel := context.WithTimeout(context.Background(), time.Minute)
		op.sent = time.Now()
		var err error
		if op.op == "create" {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": w.f.group + "/v1alpha1", "kind": "Memcached",
				"metadata": map[string]any{"name": op.name, "namespace": w.f.ns},
				"spec":     map[string]any{"size": op.size, "image": "memcached:1"},
			}}
			_, err = res.Create(call, u, metav1.CreateOptions{})
			if err == nil {
				mine = append(mine, op.name)
			}
		} else {
			_, err = res.Patch(call, op.name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"size":%d}}`, op.size), metav1.PatchOptions{})
		}
		cancel()
		op.done, op.err = time.Now(), err
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			op.code = status.Status().Code
		}
		w.mu.Lock()
		w.writes = append(w.writes, op)
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// stop stops the writer, once every write in flight has its answer.
func (w *convWriter) stop() {
	w.cancel()
	w.wg.Wait()
}

// done stops the writer and returns its writes.
func (w *convWriter) done() []convWrite {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

// answers tallies writes by what the API server answered: success, or
// the failure's status code and message, with the object's name left out.
func answers(writes []convWrite) map[string]int {
	out := map[string]int{}
	for _, w := range writes {
		key := w.op + " ok"
		if w.err != nil {
			key = fmt.Sprintf("%s %d: %s", w.op, w.code, strings.ReplaceAll(w.err.Error(), w.name, "NAME"))
		}
		out[key]++
	}
	return out
}

// absent is an object's state before its create, and after a create
// that wasn't stored.
const absent int64 = -1

// outcomes is what the writes may have left of each object, by name: its
// size, or absent. A write answered with success leaves its size, and one
// refused leaves what was; but one in flight when the webhook was killed
// (sent before it was dead, answered after it was killed) may have been
// stored: the API server converts a write to the stored version, stores
// it, and converts the stored object back for its answer, so a write
// stored just before the kill is answered with the webhook's failure.
// Those writes are inDoubt. Each object's writes are one worker's, in the
// order they were answered.
func outcomes(writes []convWrite, killed, dead time.Time) (may map[string][]int64, inDoubt []convWrite) {
	may = map[string][]int64{}
	for _, w := range writes {
		was, ok := may[w.name]
		if !ok {
			was = []int64{absent}
		}
		switch {
		case w.err == nil:
			may[w.name] = []int64{w.size}
		case w.sent.Before(dead) && w.done.After(killed):
			inDoubt = append(inDoubt, w)
			may[w.name] = slices.Concat(was, []int64{w.size})
		default:
			may[w.name] = was
		}
	}
	return may, inDoubt
}

// creates is the names the writer was told it created, and those it was
// told it didn't.
func creates(writes []convWrite) (created, refused map[string]bool) {
	created, refused = map[string]bool{}, map[string]bool{}
	for _, w := range writes {
		if w.op == "create" {
			if w.err == nil {
				created[w.name] = true
			} else {
				refused[w.name] = true
			}
		}
	}
	return created, refused
}

// settled checks, at v1beta1, the stored version, that each object of may
// is in one of the states its writes may have left, with its status
// settled, and that no other is there but others.
func (f *convFault) settled(ctx context.Context, may map[string][]int64, others ...string) error {
	l, err := f.admin.Resource(f.gvr("v1beta1")).Namespace(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	found := map[string]int64{}
	for _, u := range l.Items {
		name := u.GetName()
		replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		found[name] = replicas
		if _, ok := may[name]; !ok && !slices.Contains(others, name) {
			errs = append(errs, fmt.Errorf("%s exists, and no one wrote it", name))
		}
		if ready != replicas {
			errs = append(errs, fmt.Errorf("%s: status.readyReplicas %d, want %d", name, ready, replicas))
		}
	}
	for name, states := range may {
		state, ok := found[name]
		if !ok {
			state = absent
		}
		switch {
		case slices.Contains(states, state):
		case state == absent:
			errs = append(errs, fmt.Errorf("%s is missing: the writer was told its create succeeded", name))
		case slices.Equal(states, []int64{absent}):
			errs = append(errs, fmt.Errorf("%s exists, and the writer was told its create failed", name))
		default:
			errs = append(errs, fmt.Errorf("%s: replicas %d, and its writes may have left %v (%d absent)", name, state, states, absent))
		}
	}
	return errors.Join(errs...)
}

// certain is what writes answered with success left: each object at its
// size.
func certain(sizes map[string]int64) map[string][]int64 {
	may := map[string][]int64{}
	for name, size := range sizes {
		may[name] = []int64{size}
	}
	return may
}

// checkInDoubtCreates checks each create in doubt: stored exactly when
// the API server's 500 says the object it stored is "not decodable", the
// conversion of its answer having failed (a create reads nothing before
// it stores; a patch does, so its message can't tell). It returns what
// became of each, with what the API server answered. (A patch's outcome
// the object can't tell either, once later patches have written it.)
func (f *convFault) checkInDoubtCreates(ctx context.Context, t *testing.T, inDoubt []convWrite) []string {
	t.Helper()
	var out []string
	for _, w := range inDoubt {
		if w.op != "create" {
			continue
		}
		_, err := f.admin.Resource(f.gvr("v1beta1")).Namespace(f.ns).Get(ctx, w.name, metav1.GetOptions{})
		stored := err == nil
		if said := strings.Contains(w.err.Error(), "object not decodable"); stored != said {
			t.Errorf("%s, created as the webhook was killed: stored %t, and the API server answered %v", w.name, stored, w.err)
		}
		out = append(out, fmt.Sprintf("%s stored %t: %v", w.name, stored, w.err))
	}
	return out
}

// storedReads reads and lists at v1beta1, the stored version, every
// 100ms until stop, and returns the reads that failed.
func (f *convFault) storedReads(name string) (stop func() []error) {
	ctx, cancel := context.WithCancel(context.Background())
	var failed []error
	done := make(chan struct{})
	res := f.admin.Resource(f.gvr("v1beta1")).Namespace(f.ns)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if _, err := res.Get(ctx, name, metav1.GetOptions{}); err != nil && ctx.Err() == nil {
				failed = append(failed, fmt.Errorf("GET %s: %w", name, err))
			}
			if _, err := res.List(ctx, metav1.ListOptions{}); err != nil && ctx.Err() == nil {
				failed = append(failed, fmt.Errorf("LIST: %w", err))
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() []error {
		cancel()
		<-done
		return failed
	}
}

// createStored creates name at v1beta1, the stored version, as the admin.
func (f *convFault) createStored(ctx context.Context, name string, replicas int64) {
	f.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": f.group + "/v1beta1", "kind": "Memcached",
		"metadata": map[string]any{"name": name, "namespace": f.ns},
		"spec":     map[string]any{"replicas": replicas, "image": "memcached:1"},
	}}
	if _, err := f.admin.Resource(f.gvr("v1beta1")).Namespace(f.ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// memcachedWrites is the audit log's writes of the resource in the
// namespace.
func (f *convFault) memcachedWrites() []clustertest.AuditEvent {
	var out []clustertest.AuditEvent
	for _, e := range f.c.Audit(f.t) {
		if e.Namespace == f.ns && e.APIGroup == f.group && e.Resource == "memcacheds" {
			out = append(out, e)
		}
	}
	return out
}

// leaseHolder is the controllers' Lease's holder, "" for none.
func (f *convFault) leaseHolder() string {
	f.t.Helper()
	l, err := f.kube.CoordinationV1().Leases(f.ns).Get(f.t.Context(), convControllerName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		f.t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// holds waits up to within for identity to hold the Lease.
func (f *convFault) holds(identity string, within time.Duration) {
	f.t.Helper()
	clustertest.Eventually(f.t, within, func(context.Context) error {
		if h := f.leaseHolder(); h != identity {
			return fmt.Errorf("the Lease's holder = %q, want %s", h, identity)
		}
		return nil
	})
}

// checkWriters checks the audit log's writes of each object: one create
// answered with success, by the writer, of each object it was told it
// created and none of one whose create it was told failed; no write of a
// spec by a controller of controllers, and every write of a status by
// one. It returns how many writes broke the rules.
func checkWriters(t *testing.T, events []clustertest.AuditEvent, writer string, controllers []string, writes []convWrite) int {
	t.Helper()
	broken := 0
	stored := map[string]int{}
	for _, e := range events {
		if e.Code >= 300 {
			continue
		}
		switch {
		case e.Subresource == "status":
			if !slices.Contains(controllers, e.User) {
				broken++
				t.Errorf("%s wrote %s's status (received %s), and isn't a controller", e.User, e.Name, stamp(e.RequestReceived))
			}
		case e.User == writer:
			if e.Verb == "create" {
				stored[e.Name]++
			}
		case slices.Contains(controllers, e.User):
			broken++
			t.Errorf("the controller %s wrote %s %s (received %s), not its status", e.User, e.Verb, e.Name, stamp(e.RequestReceived))
		}
	}
	created, refused := creates(writes)
	for name := range created {
		if stored[name] != 1 {
			broken++
			t.Errorf("%s was created %d times by the writer, want once", name, stored[name])
		}
	}
	for name := range refused {
		if stored[name] != 0 {
			broken++
			t.Errorf("%s, whose create the writer was told failed, was created %d times", name, stored[name])
		}
	}
	return broken
}

func stamp(t time.Time) string { return t.Format(time.StampMicro) }

// TestClusterFaultConversionWebhookKilledUnderLoad kills the conversion
// webhook's process with SIGKILL while a writer creates and patches
// objects at v1alpha1, the version that isn't stored, and a controller of
// v1alpha1 settles them, and starts it again on the same port 5s later.
// Meanwhile each write at v1alpha1 fails with a 500 naming the conversion
// webhook, and none is stored; reads and lists at v1beta1, the stored
// version, never fail. A write in flight at the kill is answered 500 too,
// and may have been stored: the API server converts the object it stored
// back for its answer. Once the webhook is back every object converges:
// each the writer was told it created is there at the size of its last
// write told it succeeded (or of one in flight at the kill), its status
// settled by the controller; none whose create failed is, but one in
// flight at the kill whose 500 says it was stored; and the audit log
// shows one create of each, no spec written by the controller and every
// status by it.
func TestClusterFaultConversionWebhookKilledUnderLoad(t *testing.T) {
	t.Parallel() // a namespace and a CRD of its own: it runs beside the other parallel scenarios
	started := time.Now()
	f := newConvFault(t, "killed.example.com")
	port := freePort(t)
	f.install(port)
	hook := f.webhook("webhook-0", port)
	ctrl := f.controller("controller", "v1alpha1", 0)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	f.createStored(ctx, "r", 1)
	stopReads := f.storedReads("r")
	w := f.writer(4, 100*time.Millisecond)

	time.Sleep(3 * time.Second)
	var o outage
	o.killed = hook.signal(t, syscall.SIGKILL)
	o.dead = time.Now()
	time.Sleep(5 * time.Second)
	o.restarting = time.Now()
	f.webhook("webhook-1", port)
	o.served = time.Now()
	time.Sleep(3 * time.Second)
	writes := w.done()
	stopped := time.Now()
	failedReads := stopReads()

	checkWhileDown(t, f.group, writes, o)
	if len(failedReads) > 0 {
		t.Errorf("%d reads at v1beta1, the stored version, failed: %v", len(failedReads), errors.Join(failedReads...))
	}

	// Every object converges, nothing lost, nothing half applied.
	may, inDoubt := outcomes(writes, o.killed, o.dead)
	clustertest.Eventually(t, time.Minute, func(ctx context.Context) error { return f.settled(ctx, may, "r") })
	converged := time.Since(stopped)
	t.Logf("writes in flight when the webhook was killed: %d, answered %v; its creates: %q", len(inDoubt), answers(inDoubt), f.checkInDoubtCreates(ctx, t, inDoubt))
	if _, err := f.admin.Resource(f.gvr("v1alpha1")).Namespace(f.ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("a list at v1alpha1 once the webhook was back: %v", err)
	}

	// The audit log: the failures the writer saw, one create of each
	// object, and one writer of its spec and one of its status.
	time.Sleep(time.Second) // for the last writes to reach the log
	events := f.memcachedWrites()
	controllerFailed := checkAudited(t, events, writes, w.user, ctrl.user)
	broken := checkWriters(t, events, w.user, []string{ctrl.user}, writes)
	i := slices.IndexFunc(events, func(e clustertest.AuditEvent) bool {
		return e.User == ctrl.user && e.Subresource == "status" && e.Code < 300 && e.RequestReceived.After(o.restarting)
	})
	if i < 0 {
		t.Fatalf("the controller applied no status once the webhook was back")
	}
	created, refused := creates(writes)
	t.Logf("%d writes in all, %d objects created, %d creates refused; the controller's status applies refused while the webhook was down: %d, its first applied %s after the webhook's process was started again; converged %s after the writer stopped, 3s after the webhook was back; writes breaking one writer an object: %d; the test took %s",
		len(writes), len(created), len(refused), controllerFailed, events[i].RequestReceived.Sub(o.restarting).Round(time.Millisecond),
		converged.Round(time.Millisecond), broken, time.Since(started).Round(time.Second))
}

// An outage is when the webhook's process was killed, when it was dead,
// when the next was started, and when that one served.
type outage struct{ killed, dead, restarting, served time.Time }

// checkWhileDown checks what the API server answered the writes at
// v1alpha1 of group: every write sent while the webhook was down, from
// its death to the next's start, failed with a 500 naming the conversion
// webhook; every one sent once it served again succeeded; and none failed
// but those answered after the kill and sent before the webhook served.
func checkWhileDown(t *testing.T, group string, writes []convWrite, o outage) {
	t.Helper()
	killed, restarting, served := o.killed, o.restarting, o.served
	var during, after []convWrite
	for _, op := range writes {
		switch {
		case op.sent.After(o.dead) && op.done.Before(restarting):
			during = append(during, op)
		case op.sent.After(served):
			after = append(after, op)
		}
		if op.err != nil && (op.done.Before(killed) || op.sent.After(served)) {
			t.Errorf("%s %s, sent %s, failed with the webhook up: %v", op.op, op.name, stamp(op.sent), op.err)
		}
	}
	t.Logf("writes at v1alpha1 while the webhook was down (%s): %d, answered %v", restarting.Sub(killed).Round(time.Millisecond), len(during), answers(during))
	t.Logf("writes at v1alpha1 once it was back: %d, answered %v", len(after), answers(after))
	if len(during) == 0 {
		t.Fatal("no write while the webhook was down: the test shows nothing")
	}
	for _, op := range during {
		if op.code != http.StatusInternalServerError || !strings.Contains(op.err.Error(), "conversion webhook for "+group+"/v1alpha1, Kind=Memcached failed") {
			t.Errorf("%s %s while the webhook was down: %d %v; want a 500 naming the conversion webhook", op.op, op.name, op.code, op.err)
		}
	}
	if ok := answers(after); len(after) == 0 || ok["create ok"]+ok["patch ok"] != len(after) {
		t.Errorf("writes once the webhook was back: %v; want every one a success", ok)
	}
}

// checkAudited checks that the audit log has a write of writer's answered
// 500 for each of its writes that failed, and returns how many of
// controller's writes were answered 500.
func checkAudited(t *testing.T, events []clustertest.AuditEvent, writes []convWrite, writer, controller string) (controllerFailed int) {
	t.Helper()
	var audited, failed int
	for _, e := range events {
		if e.Code != http.StatusInternalServerError {
			continue
		}
		switch e.User {
		case writer:
			audited++
		case controller:
			controllerFailed++
		}
	}
	for _, op := range writes {
		if op.err != nil {
			failed++
		}
	}
	if audited != failed {
		t.Errorf("the audit log has %d writes of the writer answered 500, and the writer saw %d fail", audited, failed)
	}
	return controllerFailed
}

// A readAnswer is what the API server answered a request, and after how
// long.
type readAnswer struct {
	err  error
	took time.Duration
}

// readLater reads name through res, and sends what the API server
// answered.
func readLater(ctx context.Context, res dynamic.ResourceInterface, name string) <-chan readAnswer {
	return answerLater(func() error {
		_, err := res.Get(ctx, name, metav1.GetOptions{})
		return err
	})
}

// answerLater sends request, and then what the API server answered it.
func answerLater(request func() error) <-chan readAnswer {
	answered := make(chan readAnswer, 1)
	go func() {
		at := time.Now()
		err := request()
		answered <- readAnswer{err, time.Since(at)}
	}()
	return answered
}

// settledAtV1alpha1 checks that the objects at v1alpha1 are those of
// sizes, each at its size and with its status settled.
func (f *convFault) settledAtV1alpha1(ctx context.Context, sizes map[string]int64) error {
	l, err := f.admin.Resource(f.gvr("v1alpha1")).Namespace(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(l.Items) != len(sizes) {
		return fmt.Errorf("%d objects at v1alpha1, want %d", len(l.Items), len(sizes))
	}
	for _, u := range l.Items {
		size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		if size != sizes[u.GetName()] || ready != size {
			return fmt.Errorf("%s at v1alpha1: size %d, readyReplicas %d; want %d", u.GetName(), size, ready, sizes[u.GetName()])
		}
	}
	return nil
}

// TestClusterFaultConversionWebhookTooSlow stops the conversion webhook's
// process with SIGSTOP, as a webhook too slow to answer, while a
// controller of v1beta1, the stored version, runs and a reader reads at
// v1alpha1. The read at v1alpha1 fails after the API server's 30s timeout
// of a webhook call (k8s.io/apiserver's webhook client), naming the
// conversion webhook; the controller's own list and watch at v1beta1 go
// on: objects created at v1beta1 during the pause are settled during it.
// After SIGCONT every object reads at v1alpha1, settled.
func TestClusterFaultConversionWebhookTooSlow(t *testing.T) {
	t.Parallel() // a namespace and a CRD of its own: it runs beside the other parallel scenarios
	started := time.Now()
	f := newConvFault(t, "slow.example.com")
	port := freePort(t)
	f.install(port)
	hook := f.webhook("webhook", port)
	f.controller("controller", "v1beta1", 0)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	alphas := f.admin.Resource(f.gvr("v1alpha1")).Namespace(f.ns)
	f.createStored(ctx, "a", 2)
	if _, err := alphas.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("a read at v1alpha1 with the webhook up: %v", err)
	}

	paused := hook.signal(t, syscall.SIGSTOP)
	read := readLater(ctx, alphas, "a")
	sizes := map[string]int64{"a": 2}
	for i := range 5 {
		name := fmt.Sprintf("p-%d", i)
		sizes[name] = int64(1 + i%3)
		f.createStored(ctx, name, sizes[name])
	}
	clustertest.Eventually(t, 20*time.Second, func(ctx context.Context) error { return f.settled(ctx, certain(sizes)) })
	settled := time.Since(paused)

	var got readAnswer
	select {
	case got = <-read:
	case <-time.After(45 * time.Second):
		t.Fatal("the read at v1alpha1 hadn't been answered 45s into the pause")
	}
	resumed := hook.signal(t, syscall.SIGCONT)
	t.Logf("paused: the objects created at v1beta1 were settled %s into the pause; the read at v1alpha1 was answered after %s: %v",
		settled.Round(time.Millisecond), got.took.Round(time.Millisecond), got.err)
	if !apierrors.IsInternalError(got.err) || !strings.Contains(got.err.Error(), "conversion webhook for "+f.group+"/v1beta1, Kind=Memcached failed") {
		t.Errorf("the read at v1alpha1 with the webhook paused: %v; want a 500 naming the conversion webhook", got.err)
	}
	if got.took < 29*time.Second || got.took > 40*time.Second {
		t.Errorf("the read at v1alpha1 failed after %s, want after the webhook call's 30s timeout", got.took)
	}
	for _, e := range f.memcachedWrites() {
		if e.Subresource == "status" && e.Code < 300 && strings.HasPrefix(e.Name, "p-") && !e.StageTime.Before(resumed) {
			t.Errorf("%s's status was written at %s, after the webhook was continued (%s)", e.Name, stamp(e.StageTime), stamp(resumed))
		}
	}

	// Continued: every object reads at v1alpha1, settled.
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error { return f.settledAtV1alpha1(ctx, sizes) })
	t.Logf("converged at v1alpha1 %s after SIGCONT; the test took %s", time.Since(resumed).Round(time.Millisecond), time.Since(started).Round(time.Second))
}

// TestClusterFaultConversionWebhookTooSlowForManagers stops the conversion
// webhook's process with SIGSTOP, as TestClusterFaultConversionWebhookTooSlow
// does, and writes at v1beta1, the stored version, to objects settled by
// a controller of v1beta1: "alpha" and "gamma", once applied at v1alpha1,
// whose field manager of v1alpha1 still owns their spec.image, and "beta",
// whose every field manager is of v1beta1. A write at the stored version
// converts nothing itself, yet the API server's field manager converts the
// live and the new object to the version of each other field manager of
// the object (structured-merge-diff's merge.Updater), through the webhook.
// So during the pause an apply to beta is answered at once, and the
// controller settles it; an apply to alpha fails once the webhook call's
// 30s timeout is up, with a 500 naming the conversion webhook, and isn't
// stored; a merge patch to gamma waits as long, then is stored, its
// managedFields as they were (k8s.io/apiserver's UpdateNoErrors). The
// controller's status applies of alpha, changed just before the pause,
// fail too: each is cut short by the end of the controller's proof of
// the Lease (RenewDeadline at most), not held for the webhook call, and
// retried. After SIGCONT alpha settles.
func TestClusterFaultConversionWebhookTooSlowForManagers(t *testing.T) {
	t.Parallel() // a namespace and a CRD of its own: it runs beside the other parallel scenarios
	started := time.Now()
	f := newConvFault(t, "managers.example.com")
	port := freePort(t)
	f.install(port)
	hook := f.webhook("webhook", port)
	ctrl := f.controller("controller", "v1beta1", 0)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	f.managedAtBoth(ctx, ctrl)
	paused := hook.signal(t, syscall.SIGSTOP)
	ctrl.signal(t, syscall.SIGCONT)

	betas := f.admin.Resource(f.gvr("v1beta1")).Namespace(f.ns)
	applied := answerLater(func() error {
		return f.tryApply(ctx, "v1beta1", "beta-applier", "alpha", map[string]any{"replicas": int64(3)})
	})
	patched := answerLater(func() error {
		_, err := betas.Patch(ctx, "gamma", types.MergePatchType, []byte(`{"metadata":{"labels":{"patched":"paused"}}}`), metav1.PatchOptions{})
		return err
	})
	betaGot := <-answerLater(func() error {
		return f.tryApply(ctx, "v1beta1", "beta-applier", "beta", map[string]any{"replicas": int64(3)})
	})
	clustertest.Eventually(t, 20*time.Second, func(ctx context.Context) error {
		return f.settledOne(ctx, "beta", 3)
	})
	betaSettled := time.Since(paused)

	alphaGot := awaitAnswer(t, applied, paused, "the apply of alpha at v1beta1")
	patchGot := awaitAnswer(t, patched, paused, "the merge patch of gamma at v1beta1")
	// What the API server holds of alpha before SIGCONT: readyReplicas 1,
	// the controller's status applies of 2 having failed.
	held, err := betas.Get(ctx, "alpha", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	heldReady, _, _ := unstructured.NestedInt64(held.Object, "status", "readyReplicas")
	resumed := hook.signal(t, syscall.SIGCONT)

	t.Logf("paused: beta was settled %s into the pause", betaSettled.Round(time.Millisecond))
	checkPausedWrites(t, f.group, betaGot, alphaGot, patchGot)
	if heldReady != 1 {
		t.Errorf("alpha's status.readyReplicas %d at the pause's end, want 1: no status apply of alpha can succeed during it", heldReady)
	}

	// Continued: alpha settles at 2, the apply of 3 not stored, its
	// managers as they were; gamma has the merge patch's label, and its
	// managers as they were.
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error { return f.settledOne(ctx, "alpha", 2) })
	settled := time.Since(resumed)
	// The controller's status applies during the pause, from the audit log.
	time.Sleep(time.Second) // for the last writes to reach the log
	f.checkPausedStatusApplies(ctrl.user, paused, resumed)
	f.checkManagers(ctx, "alpha", map[string]string{"alpha-applier": "v1alpha1", "beta-applier": "v1beta1", convControllerName: "v1beta1"})
	gamma, err := betas.Get(ctx, "gamma", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gamma.GetLabels()["patched"] != "paused" {
		t.Errorf("gamma's labels %v, want the merge patch's patched=paused", gamma.GetLabels())
	}
	f.checkManagers(ctx, "gamma", map[string]string{"alpha-applier": "v1alpha1", convControllerName: "v1beta1"})
	t.Logf("alpha settled %s after SIGCONT; the test took %s", settled.Round(time.Millisecond), time.Since(started).Round(time.Second))
}

// managedAtBoth applies alpha and gamma at v1alpha1 and beta at v1beta1,
// waits for ctrl, a controller of v1beta1, to settle them, and stops it
// with SIGSTOP; then it changes alpha's and beta's specs at v1beta1, for
// ctrl to reconcile once it is continued, and checks that alpha has a
// field manager of v1alpha1 still, and beta none.
func (f *convFault) managedAtBoth(ctx context.Context, ctrl *convProc) {
	t := f.t
	t.Helper()
	f.apply(ctx, "v1alpha1", "alpha-applier", "alpha", map[string]any{"size": int64(1), "image": "memcached:1"})
	f.apply(ctx, "v1alpha1", "alpha-applier", "gamma", map[string]any{"size": int64(1), "image": "memcached:1"})
	f.apply(ctx, "v1beta1", "beta-applier", "beta", map[string]any{"replicas": int64(1), "image": "memcached:1"})
	clustertest.Eventually(t, 20*time.Second, func(ctx context.Context) error {
		return f.settled(ctx, certain(map[string]int64{"alpha": 1, "beta": 1, "gamma": 1}))
	})
	ctrl.signal(t, syscall.SIGSTOP)
	f.apply(ctx, "v1beta1", "beta-applier", "alpha", map[string]any{"replicas": int64(2)})
	f.apply(ctx, "v1beta1", "beta-applier", "beta", map[string]any{"replicas": int64(2)})
	f.checkManagers(ctx, "alpha", map[string]string{"alpha-applier": "v1alpha1", "beta-applier": "v1beta1", convControllerName: "v1beta1"})
	f.checkManagers(ctx, "beta", map[string]string{"beta-applier": "v1beta1", convControllerName: "v1beta1"})
}

// checkPausedWrites checks what the API server answered the writes at
// v1beta1 with the webhook paused: the apply to beta, a success at once;
// the apply to alpha, a 500 naming the conversion webhook of group after
// the webhook call's 30s timeout; the merge patch of gamma, a success
// after that timeout.
func checkPausedWrites(t *testing.T, group string, beta, alpha, patch readAnswer) {
	t.Helper()
	t.Logf("paused: the apply at v1beta1 to beta, whose managers are all of v1beta1, was answered after %s: %v", beta.took.Round(time.Millisecond), beta.err)
	t.Logf("paused: the apply at v1beta1 to alpha, which has a manager of v1alpha1, was answered after %s: %v", alpha.took.Round(time.Millisecond), alpha.err)
	t.Logf("paused: the merge patch at v1beta1 to gamma, which has a manager of v1alpha1, was answered after %s: %v", patch.took.Round(time.Millisecond), patch.err)
	if beta.err != nil || beta.took > 2*time.Second {
		t.Errorf("the apply to beta with the webhook paused: %v after %s; want a success at once", beta.err, beta.took)
	}
	if !apierrors.IsInternalError(alpha.err) || !strings.Contains(alpha.err.Error(), "conversion webhook for "+group+"/v1beta1, Kind=Memcached failed") {
		t.Errorf("the apply to alpha with the webhook paused: %v; want a 500 naming the conversion webhook", alpha.err)
	}
	if alpha.took < 29*time.Second || alpha.took > 40*time.Second {
		t.Errorf("the apply to alpha failed after %s, want after the webhook call's 30s timeout", alpha.took)
	}
	if patch.err != nil || patch.took < 29*time.Second || patch.took > 40*time.Second {
		t.Errorf("the merge patch of gamma with the webhook paused: %v after %s; want a success after the webhook call's 30s timeout", patch.err, patch.took)
	}
}

// checkPausedStatusApplies checks, in the audit log, controller's status
// applies received while the webhook was paused, from paused to resumed:
// those of alpha answered before resumed failed, each within
// RenewDeadline, and were retried; those of beta succeeded.
func (f *convFault) checkPausedStatusApplies(controller string, paused, resumed time.Time) {
	t := f.t
	t.Helper()
	var alpha, beta []clustertest.AuditEvent
	for _, e := range f.memcachedWrites() {
		if e.User != controller || e.Subresource != "status" || e.RequestReceived.Before(paused) || !e.RequestReceived.Before(resumed) {
			continue
		}
		switch e.Name {
		case "alpha":
			alpha = append(alpha, e)
		case "beta":
			beta = append(beta, e)
		}
	}
	slices.SortFunc(alpha, func(a, b clustertest.AuditEvent) int { return a.RequestReceived.Compare(b.RequestReceived) })
	var seen []string
	for i, e := range alpha {
		gap := ""
		if i > 0 {
			gap = fmt.Sprintf(", %s after the one before", e.RequestReceived.Sub(alpha[i-1].RequestReceived).Round(time.Millisecond))
		}
		seen = append(seen, fmt.Sprintf("received %s into the pause%s, answered %d after %s", e.RequestReceived.Sub(paused).Round(time.Millisecond), gap, e.Code, e.StageTime.Sub(e.RequestReceived).Round(time.Millisecond)))
		if !e.StageTime.Before(resumed) {
			continue
		}
		if e.Code < 300 {
			t.Errorf("the controller's status apply of alpha received %s was answered %d at %s, with the webhook paused", stamp(e.RequestReceived), e.Code, stamp(e.StageTime))
		}
		if took := e.StageTime.Sub(e.RequestReceived); took > convLease[1]+time.Second {
			t.Errorf("the controller's status apply of alpha received %s was answered after %s, longer than the RenewDeadline %s that bounds its proof of the Lease", stamp(e.RequestReceived), took, convLease[1])
		}
	}
	t.Logf("paused: the controller's status applies of alpha: %d: %s", len(alpha), strings.Join(seen, "; "))
	// Retried: the first was cut short long before the webhook call's 30s.
	if len(alpha) < 2 {
		t.Errorf("the controller applied alpha's status %d times while the webhook was paused, want more than once", len(alpha))
	}
	for _, e := range beta {
		// 409 is the controller's own refusal of a stale write: a status
		// computed from beta before the test's apply reached its cache
		// carries a resourceVersion beta no longer has.
		if e.Code >= 300 && e.Code != http.StatusConflict {
			t.Errorf("the controller's status apply of beta received %s was answered %d with the webhook paused", stamp(e.RequestReceived), e.Code)
		}
	}
	if len(beta) == 0 {
		t.Error("the controller applied no status of beta while the webhook was paused")
	}
}

// awaitAnswer is the answer to the request named what, sent during the pause
// from paused, within 50s of paused.
func awaitAnswer(t *testing.T, answered <-chan readAnswer, paused time.Time, what string) readAnswer {
	t.Helper()
	select {
	case got := <-answered:
		return got
	case <-time.After(time.Until(paused.Add(50 * time.Second))):
		t.Fatalf("%s hadn't been answered 50s into the pause", what)
		return readAnswer{}
	}
}

// apply applies spec to name at version as the admin, under the field
// manager manager, forced.
func (f *convFault) apply(ctx context.Context, version, manager, name string, spec map[string]any) {
	f.t.Helper()
	if err := f.tryApply(ctx, version, manager, name, spec); err != nil {
		f.t.Fatalf("the apply of %s at %s as %s: %v", name, version, manager, err)
	}
}

// tryApply is apply, returning the API server's error.
func (f *convFault) tryApply(ctx context.Context, version, manager, name string, spec map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": f.group + "/" + version, "kind": "Memcached",
		"metadata": map[string]any{"name": name, "namespace": f.ns},
		"spec":     spec,
	}}
	_, err := f.admin.Resource(f.gvr(version)).Namespace(f.ns).Apply(ctx, name, u, metav1.ApplyOptions{FieldManager: manager, Force: true})
	return err
}

// checkManagers checks that name's field managers, and the version of
// each, are want.
func (f *convFault) checkManagers(ctx context.Context, name string, want map[string]string) {
	f.t.Helper()
	u, err := f.admin.Resource(f.gvr("v1beta1")).Namespace(f.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range u.GetManagedFields() {
		got[m.Manager] = strings.TrimPrefix(m.APIVersion, f.group+"/")
	}
	if !maps.Equal(got, want) {
		f.t.Errorf("%s's field managers and their versions: %v, want %v", name, got, want)
	}
}

// settledOne checks, at v1beta1, that name's spec.replicas is replicas
// and its status settled.
func (f *convFault) settledOne(ctx context.Context, name string, replicas int64) error {
	u, err := f.admin.Resource(f.gvr("v1beta1")).Namespace(f.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	if got != replicas || ready != replicas {
		return fmt.Errorf("%s: replicas %d, readyReplicas %d; want %d", name, got, ready, replicas)
	}
	return nil
}

// TestClusterFaultConversionWebhookOnEveryReplica runs two replicas, each
// a process serving the App: a controller of v1alpha1, the version that
// isn't stored, and the conversion webhook. The API server reaches a
// webhook at a loopback URL over one HTTP/2 connection (k8s.io/apiserver's
// webhook client asks for HTTP/1.1 only of other URLs and of Services), so
// one replica answers every conversion: the CRD's URL names the standby's
// port, which makes the standby the one, answering the leader's own
// conversions while the leader holds the Lease. Then the leader is killed
// with SIGKILL under a writer's load at v1alpha1: the standby takes the
// Lease, every write is answered with success throughout, and every
// object converges, with one controller writing at a time.
func TestClusterFaultConversionWebhookOnEveryReplica(t *testing.T) {
	t.Parallel() // a namespace and a CRD of its own: it runs beside the other parallel scenarios
	started := time.Now()
	f := newConvFault(t, "replicas.example.com")
	leaderPort, standbyPort := freePort(t), freePort(t)
	f.install(standbyPort)
	// No object yet: the leader's informers list at v1alpha1 with nothing
	// to convert.
	leader := f.controller("replica-0", "v1alpha1", leaderPort)
	f.holds(leader.name, 30*time.Second)
	standby := f.controller("replica-1", "v1alpha1", standbyPort)
	w := f.writer(4, 100*time.Millisecond)

	time.Sleep(3 * time.Second)
	if h := f.leaseHolder(); h != leader.name {
		t.Fatalf("the Lease's holder = %q before the kill, want %s", h, leader.name)
	}
	whileStandby := len(standby.reviews())
	if whileStandby == 0 {
		t.Errorf("%s, the standby, answered no ConversionReview while %s held the Lease", standby.name, leader.name)
	}
	killed := leader.signal(t, syscall.SIGKILL)
	within := convLease[0] + convLease[2] + 5*time.Second
	f.holds(standby.name, within+5*time.Second)
	acq := f.c.AwaitAudit(t, 30*time.Second, func(e clustertest.AuditEvent) bool {
		return e.Namespace == f.ns && e.Resource == "leases" && e.User == standby.user && e.Code < 300
	})
	took := acq.RequestReceived.Sub(killed)
	if took > within {
		t.Errorf("%s took the Lease %s after SIGKILL, want within %s", standby.name, took, within)
	}
	time.Sleep(2 * time.Second)
	writes := w.done()
	stopped := time.Now()

	if ok := answers(writes); ok["create ok"]+ok["patch ok"] != len(writes) {
		t.Errorf("the writer's writes at v1alpha1: %v; want every one a success, the standby's webhook answering throughout", ok)
	}
	may, _ := outcomes(writes, time.Time{}, time.Time{})
	clustertest.Eventually(t, time.Minute, func(ctx context.Context) error { return f.settled(ctx, may) })
	converged := time.Since(stopped)
	reviews := standby.reviews()
	if n := len(leader.reviews()); n != 0 {
		t.Errorf("%s answered %d ConversionReviews, and the CRD's URL doesn't name it", leader.name, n)
	}
	if before(reviews, acq.StageTime) == len(reviews) {
		t.Errorf("%s answered no ConversionReview once it held the Lease", standby.name)
	}

	// One controller at a time: the leader wrote no status once killed,
	// nor the standby before its acquisition was complete.
	time.Sleep(time.Second) // for the last writes to reach the log
	events := f.memcachedWrites()
	broken := checkWriters(t, events, w.user, []string{leader.user, standby.user}, writes)
	for _, e := range events {
		if e.Subresource != "status" || e.Code >= 300 {
			continue
		}
		if (e.User == leader.user && !e.RequestReceived.Before(killed)) || (e.User == standby.user && !e.RequestReceived.After(acq.StageTime)) {
			broken++
			t.Errorf("%s wrote %s's status (received %s) outside its term: killed %s, acquired %s", e.User, e.Name, stamp(e.RequestReceived), stamp(killed), stamp(acq.StageTime))
		}
	}
	t.Logf("%s answered %d ConversionReviews while %s held the Lease, %d before its own acquisition, %d in all; took the Lease %s after SIGKILL (bound %s); %d writes at v1alpha1 answered %v; converged %s after the writer stopped, 2s after the takeover; writes breaking one writer at a time: %d; the test took %s",
		standby.name, whileStandby, leader.name, before(reviews, acq.RequestReceived), len(reviews), took.Round(time.Millisecond), within,
		len(writes), answers(writes), converged.Round(time.Millisecond), broken, time.Since(started).Round(time.Second))
}
