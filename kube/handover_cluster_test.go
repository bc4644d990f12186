package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/procutil"
)

// The handover tests run each replica of the Memcached controller as a
// real process: this test binary run again, in procHelperTest, on
// humus.Run with humus.OSHost, so SIGTERM reaches it as it reaches a pod's,
// and SIGKILL kills it as the kubelet does, with no release. Each replica
// is a ServiceAccount of its own, so the audit log tells their writes
// apart, and a new identity, as a restarted pod has.

// procHelperTest is the test that is the child process.
const procHelperTest = "TestReplicaProcessHelper"

// What the child is given, in its environment.
const (
	procEnv          = "HUMUS_KUBE_REPLICA_PROCESS" // "1" in the child
	procServerEnv    = "HUMUS_KUBE_REPLICA_SERVER"
	procCAEnv        = "HUMUS_KUBE_REPLICA_CA_FILE" // the CA's PEM
	procTokenEnv     = "HUMUS_KUBE_REPLICA_TOKEN"
	procNamespaceEnv = "HUMUS_KUBE_REPLICA_NAMESPACE"
	procIdentityEnv  = "HUMUS_KUBE_REPLICA_IDENTITY"
	procLeaseEnv     = "HUMUS_KUBE_REPLICA_LEASE"       // LeaseDuration,RenewDeadline,RetryPeriod
	procDelayEnv     = "HUMUS_KUBE_REPLICA_DELAY"       // a sleep before each reconcile
	procShardsEnv    = "HUMUS_KUBE_REPLICA_SHARDS"      // Settings.Shards, and each reconcile and the caches reported
	procStatusEnv    = "HUMUS_KUBE_REPLICA_STATUS_ONLY" // "1": the Reconciler writes no Deployment, only the status
)

// What the child writes on its stdout.
const (
	procSynced     = "replica process: synced"
	procGoroutines = "replica process: goroutines"
	procReturned   = "replica process: Run returned"
)

// procWorkers is every replica process's Workers.
const procWorkers = 4

// TestReplicaProcessHelper is a replica process of the handover tests, and
// does nothing in any other process. It exits with humus.Run's code: 0
// when Serve and Shutdown returned nil, 1 otherwise, such as
// ErrLostLeadership; or 2 when it can't start, or 3 when goroutines are
// left once Run has returned.
func TestReplicaProcessHelper(t *testing.T) {
	if os.Getenv(procEnv) != "1" {
		t.Skip("a replica process of the handover tests")
	}
	os.Exit(runReplicaProcess())
}

func runReplicaProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var signalled atomic.Pointer[time.Time]
	context.AfterFunc(ctx, func() { signalled.Store(new(time.Now())) })
	before := runtime.NumGoroutine()

	cfg, err := replicaConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	code := humus.Run(ctx, humus.OSHost(), cfg.services)

	if at := signalled.Load(); at != nil {
		fmt.Printf("%s %s after the signal\n", procReturned, time.Since(*at))
	}
	return goroutinesLeft(before, code)
}

// replicaConfig is what a replica process is given, in its environment.
type replicaConfig struct {
	s     Settings
	roots *x509.CertPool // the API server's CA
	token string
	delay time.Duration // a sleep before each reconcile
}

// replicaConfigFromEnv reads the replica process's environment.
func replicaConfigFromEnv() (*replicaConfig, error) {
	caPEM, err := os.ReadFile(os.Getenv(procCAEnv))
	if err != nil {
		return nil, err
	}
	cfg := &replicaConfig{roots: x509.NewCertPool(), token: os.Getenv(procTokenEnv), s: testSettings()}
	if !cfg.roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("replica process: no certificate in the CA file")
	}
	s := &cfg.s
	s.Namespace, s.LeaderElection.Namespace = os.Getenv(procNamespaceEnv), os.Getenv(procNamespaceEnv)
	s.LeaderElection.Identity = os.Getenv(procIdentityEnv)
	s.Workers = procWorkers
	if err := leaseTimings(&s.LeaderElection, os.Getenv(procLeaseEnv)); err != nil {
		return nil, err
	}
	if d := os.Getenv(procDelayEnv); d != "" {
		if cfg.delay, err = time.ParseDuration(d); err != nil {
			return nil, err
		}
	}
	if n := os.Getenv(procShardsEnv); n != "" {
		if s.Shards, err = strconv.Atoi(n); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// leaseTimings reads le's LeaseDuration, RenewDeadline and RetryPeriod
// from timings, as procLeaseEnv gives them.
func leaseTimings(le *LeaderElection, timings string) error {
	ds := strings.Split(timings, ",")
	if len(ds) != 3 {
		return errors.New("replica process: want three Lease timings")
	}
	for i, d := range []*time.Duration{&le.LeaseDuration, &le.RenewDeadline, &le.RetryPeriod} {
		var err error
		if *d, err = time.ParseDuration(ds[i]); err != nil {
			return fmt.Errorf("replica process: the Lease's timings: %w", err)
		}
	}
	return nil
}

// services is the replica process's App: the Memcached controller, with
// the Deployments it Owns, and a finalizer.
func (cfg *replicaConfig) services(ctx context.Context, setup *humus.Setup) ([]humus.Service, error) {
	client, err := NewClient(setup, Connection{
		Server: os.Getenv(procServerEnv),
		TLS:    &tls.Config{RootCAs: cfg.roots},
		Token:  func(context.Context) (string, error) { return cfg.token, nil },
	})
	if err != nil {
		return nil, err
	}
	dep := &deployer{kube: kubernetes.NewForConfigOrDie(client.Config())}
	var rec Reconciler[cacheSpec, cacheStatus] = dep
	if os.Getenv(procStatusEnv) == "1" {
		rec = ReconcilerFunc[cacheSpec, cacheStatus](func(_ context.Context, m Object[cacheSpec, cacheStatus]) (Result[cacheStatus], error) {
			st := m.Status
			st.ReadyReplicas = m.Spec.Size
			return Result[cacheStatus]{Status: &st}, nil
		})
	}
	if cfg.delay > 0 {
		rec = delayed(rec, cfg.delay)
	}
	if cfg.s.Shards > 1 {
		rec = reportReconciles(rec)
	}
	ctrl, err := NewController(setup, client, cfg.s, clusterCaches, rec,
		Owns(deployments),
		Finalize("cache.example.com/finalizer", func(context.Context, Object[cacheSpec, cacheStatus]) error { return nil }))
	if err != nil {
		return nil, err
	}
	if cfg.s.Shards > 1 {
		go reportShards(ctx, ctrl)
	}
	go reportSynced(ctx, ctrl)
	return []humus.Service{ctrl}, nil
}

// delayed is rec, slow, and minding its context: a reconcile the
// controller cancelled makes no write.
func delayed(rec Reconciler[cacheSpec, cacheStatus], delay time.Duration) Reconciler[cacheSpec, cacheStatus] {
	return ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return Result[cacheStatus]{}, ctx.Err()
		}
		return rec.Reconcile(ctx, m)
	})
}

// reportSynced prints procSynced once ctrl's caches have synced.
func reportSynced(ctx context.Context, ctrl *Controller) {
	for {
		if ctrl.Synced().Healthy(ctx) == nil {
			fmt.Println(procSynced)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// goroutinesLeft checks that every goroutine Run's Services started has
// ended, within a few seconds for those on their way out, and says so: it
// returns code, or 3 in place of 0 when any is left.
func goroutinesLeft(before, code int) int {
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("%s: %d before, %d after\n", procGoroutines, before, after)
	if after > before {
		buf := make([]byte, 1<<20)
		fmt.Printf("%s\n", buf[:runtime.Stack(buf, true)])
		if code == 0 {
			code = 3
		}
	}
	return code
}

// replicaProc is one replica process.
type replicaProc struct {
	name string // its identity, and its ServiceAccount's name
	user string // as the audit log names it
	cmd  *exec.Cmd
	out  *procutil.SyncBuffer // its stdout and stderr together
	done chan struct{}        // closed once it has exited
	err  error                // cmd.Wait's, once done is closed
}

// procLauncher starts replica processes of one workload.
type procLauncher struct {
	w      *workload
	caFile string
	le     LeaderElection // its durations
	delay  time.Duration
	shards int    // Settings.Shards, when above 1
	server string // the API server's address for the next start, "" for the cluster's
	// statusOnly has each reconcile write only the controller's own two
	// writes, the finalizer and the status: no Deployment.
	statusOnly bool
}

func newProcLauncher(w *workload, le LeaderElection, delay time.Duration) *procLauncher {
	w.t.Helper()
	caFile := filepath.Join(w.t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, w.c.CAPEM(), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return &procLauncher{w: w, caFile: caFile, le: le, delay: delay}
}

// start starts a replica process named name, with a ServiceAccount of its
// own. It is killed at the test's cleanup if it still runs, and its output
// logged when the test failed.
func (l *procLauncher) start(name string) *replicaProc {
	t := l.w.t
	t.Helper()
	gvr := clusterCaches.GVR()
	grants := controllerRBAC(gvr.Group, gvr.Resource, l.w.ns)
	if l.shards > 1 {
		grants = append(grants, shardRBAC(l.w.ns))
	}
	token := l.w.c.ServiceAccount(t, l.w.ns, name, grants...)
	server := l.w.c.Server()
	if l.server != "" {
		server = l.server
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+procHelperTest+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(),
		procEnv+"=1",
		procServerEnv+"="+server,
		procCAEnv+"="+l.caFile,
		procTokenEnv+"="+token,
		procNamespaceEnv+"="+l.w.ns,
		procIdentityEnv+"="+name,
		fmt.Sprintf("%s=%s,%s,%s", procLeaseEnv, l.le.LeaseDuration, l.le.RenewDeadline, l.le.RetryPeriod),
		// The race detector sleeps 1s at exit by default, which would
		// count in the time to exit after a signal.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"),
	)
	if l.delay > 0 {
		cmd.Env = append(cmd.Env, procDelayEnv+"="+l.delay.String())
	}
	if l.shards > 1 {
		cmd.Env = append(cmd.Env, procShardsEnv+"="+strconv.Itoa(l.shards))
	}
	if l.statusOnly {
		cmd.Env = append(cmd.Env, procStatusEnv+"=1")
	}
	out := &procutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &replicaProc{
		name: name, user: "system:serviceaccount:" + l.w.ns + ":" + name,
		cmd: cmd, out: out, done: make(chan struct{}),
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s's output:\n%s", p.name, p.out.String())
		}
	})
	return p
}

// signal sends sig to the process, and returns when it was sent.
func (p *replicaProc) signal(t *testing.T, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	return at
}

// exited waits up to within for the process to exit, and returns its exit
// code, -1 when a signal killed it.
func (p *replicaProc) exited(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s hadn't exited after %s", p.name, within)
	}
	return p.cmd.ProcessState.ExitCode()
}

// synced waits until the process's caches have synced, so it campaigns.
func (p *replicaProc) synced(t *testing.T, within time.Duration) {
	t.Helper()
	clustertest.Eventually(t, within, func(context.Context) error {
		select {
		case <-p.done:
			t.Fatalf("%s exited before it synced: %s", p.name, p.cmd.ProcessState)
		default:
		}
		if !strings.Contains(p.out.String(), procSynced) {
			return fmt.Errorf("%s hasn't synced", p.name)
		}
		return nil
	})
}

// goroutines returns what the process said of its goroutines before Run
// and after it returned.
func (p *replicaProc) goroutines() (before, after int, ok bool) {
	for line := range strings.Lines(p.out.String()) {
		if rest, found := strings.CutPrefix(line, procGoroutines+": "); found {
			_, err := fmt.Sscanf(rest, "%d before, %d after", &before, &after)
			return before, after, err == nil
		}
	}
	return 0, 0, false
}

// returned is how long after the signal the process's humus.Run returned,
// as it said.
func (p *replicaProc) returned() (time.Duration, bool) {
	for line := range strings.Lines(p.out.String()) {
		if rest, found := strings.CutPrefix(line, procReturned+" "); found {
			d, err := time.ParseDuration(strings.TrimSuffix(strings.TrimSpace(rest), " after the signal"))
			return d, err == nil
		}
	}
	return 0, false
}

// procLeaseWrites is user's successful writes of the Lease in ns, in the
// order received.
func procLeaseWrites(events []clustertest.AuditEvent, ns, user string) []clustertest.AuditEvent {
	var out []clustertest.AuditEvent
	for _, e := range events {
		if e.Namespace == ns && e.Resource == "leases" && e.User == user && e.Code < 300 {
			out = append(out, e)
		}
	}
	return out
}

// procWrites is user's successful writes in ns, the Lease's included.
func procWrites(events []clustertest.AuditEvent, ns, user string) []clustertest.AuditEvent {
	var out []clustertest.AuditEvent
	for _, e := range events {
		if e.Namespace == ns && e.User == user && e.Code < 300 {
			out = append(out, e)
		}
	}
	return out
}

// procTerms checks one writer at a time over the terms of holders, the
// replicas that held the Lease, in the order they did, and others, which
// never did: a replica writes nothing before its first write of the Lease
// (its acquisition) was complete, and every write of its, the Lease's
// included, was complete before the next holder's acquisition was
// received. It returns how many writes broke the rule.
func procTerms(t *testing.T, events []clustertest.AuditEvent, ns string, holders, others []*replicaProc) int {
	t.Helper()
	broken := 0
	acquired := make([]clustertest.AuditEvent, len(holders))
	for i, p := range holders {
		lw := procLeaseWrites(events, ns, p.user)
		if len(lw) == 0 {
			t.Fatalf("%s held the Lease, and the audit log has no write of it by %s", p.name, p.user)
		}
		acquired[i] = lw[0]
		if i > 0 && !acquired[i].RequestReceived.After(acquired[i-1].StageTime) {
			t.Errorf("%s's acquisition of the Lease (received %s) isn't after %s's (complete %s)",
				p.name, stamp(acquired[i].RequestReceived), holders[i-1].name, stamp(acquired[i-1].StageTime))
		}
	}
	for i, p := range holders {
		for _, e := range procWrites(events, ns, p.user) {
			if e.AuditID != acquired[i].AuditID && e.RequestReceived.Before(acquired[i].StageTime) {
				broken++
				t.Errorf("%s wrote %s %s/%s (received %s) before its acquisition of the Lease was complete (%s)",
					p.name, e.Verb, e.Resource, e.Name, stamp(e.RequestReceived), stamp(acquired[i].StageTime))
			}
			if i+1 < len(holders) && !e.StageTime.Before(acquired[i+1].RequestReceived) {
				broken++
				t.Errorf("%s wrote %s %s/%s (received %s, complete %s) after %s's acquisition of the Lease was received (%s)",
					p.name, e.Verb, e.Resource, e.Name, stamp(e.RequestReceived), stamp(e.StageTime), holders[i+1].name, stamp(acquired[i+1].RequestReceived))
			}
		}
	}
	for _, p := range others {
		for _, e := range procWrites(events, ns, p.user) {
			broken++
			t.Errorf("%s, which never held the Lease, wrote %s %s/%s (received %s)", p.name, e.Verb, e.Resource, e.Name, stamp(e.RequestReceived))
		}
	}
	return broken
}

// procReleasedLast checks that a replica that held the Lease and was
// SIGTERMed released it after its workers stopped: every write of its was
// complete before its last write of the Lease, the release, was received.
// It returns how many writes broke the rule.
func procReleasedLast(t *testing.T, events []clustertest.AuditEvent, ns string, p *replicaProc) int {
	t.Helper()
	lw := procLeaseWrites(events, ns, p.user)
	if len(lw) == 0 {
		t.Errorf("%s never wrote the Lease", p.name)
		return 0
	}
	release := lw[len(lw)-1]
	broken := 0
	for _, e := range procWrites(events, ns, p.user) {
		if e.Resource != "leases" && !e.StageTime.Before(release.RequestReceived) {
			broken++
			t.Errorf("%s wrote %s %s/%s (received %s, complete %s) after its release of the Lease was received (%s)",
				p.name, e.Verb, e.Resource, e.Name, stamp(e.RequestReceived), stamp(e.StageTime), stamp(release.RequestReceived))
		}
	}
	return broken
}

func stamp(t time.Time) string { return t.Format(time.StampMicro) }

// durationStats is min, median and max of ds, sorted in place.
func durationStats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %s, median %s, max %s (n=%d)", r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)-1]), len(ds))
}

// TestClusterFaultHandoversBySIGTERMAndSIGKILLKeepOneWriterAtATime hands the
// Lease over 20 times between two replica processes, by SIGTERM and SIGKILL
// of the leader in turn, each after a change to every object; the process
// that ended is replaced by a new standby each time, as a pod is. Every
// change converges; the standby takes over within RetryPeriod and a second
// after a SIGTERM (the Lease released), and within LeaseDuration,
// RetryPeriod and a second after a SIGKILL; the SIGTERMed process exits 0
// and leaves the Lease to no one or to the standby, released after its
// last write; a standby's SIGTERM leaves the leader's Lease alone; and the
// audit log shows one writer at a time across every term.
func TestClusterFaultHandoversBySIGTERMAndSIGKILLKeepOneWriterAtATime(t *testing.T) {
	const (
		objects   = 100
		handovers = 20
	)
	// Short Lease timings, 6s/4s/1s: the scenario is about handing over,
	// not the defaults, and the 10 SIGKILLs each wait out LeaseDuration.
	le := shortLease(testSettings()).LeaderElection
	w := newWorkload(t)
	w.create(objects)
	h := &handoverRun{
		t: t, w: w, l: newProcLauncher(w, le, 0), name: testSettings().Name,
		// A standby reads the Lease every RetryPeriod: it sees a release at
		// its next read, and a dead holder's last renewal at most a read
		// late, and tries to take the Lease the moment it has expired by
		// its clock.
		termBound: le.RetryPeriod + time.Second,
		killBound: le.LeaseDuration + le.RetryPeriod + time.Second,
	}
	h.leader = h.start()
	w.holds(h.name, h.leader.name, time.Minute)
	h.standby = h.start()
	h.standby.synced(t, time.Minute)
	w.converged(2 * time.Minute)
	h.holders = []*replicaProc{h.leader}
	for i := range handovers {
		sig := syscall.SIGTERM
		if i%2 == 1 {
			sig = syscall.SIGKILL
		}
		w.resize(objects, int64(i%3+2))
		h.handOver(i+1, sig)
	}
	leader, standby := h.leader, h.standby

	// The standby's shutdown leaves the leader's Lease alone.
	standby.signal(t, syscall.SIGTERM)
	if code := standby.exited(t, 30*time.Second); code != 0 {
		t.Errorf("%s, the standby, exited %d after SIGTERM, want 0", standby.name, code)
	}
	if holder := w.leaseHolder(h.name); holder != leader.name {
		t.Errorf("after %s, the standby, exited the Lease's holder = %q, want %s", standby.name, holder, leader.name)
	}
	broken := h.audit(standby)
	t.Logf("Lease %s/%s/%s; %d objects; %d handovers over %d processes; writes breaking one writer at a time: %d",
		le.LeaseDuration, le.RenewDeadline, le.RetryPeriod, objects, handovers, len(h.all), broken)
	t.Logf("takeover after SIGTERM: %s (bound %s)", durationStats(h.termTakeovers), h.termBound)
	t.Logf("takeover after SIGKILL: %s (bound %s)", durationStats(h.killTakeovers), h.killBound)
	t.Logf("exit after SIGTERM: %s; humus.Run returned, as the process saw it: %s", durationStats(h.termExits), durationStats(h.termReturns))

	leader.signal(t, syscall.SIGTERM)
	if code := leader.exited(t, 30*time.Second); code != 0 {
		t.Errorf("%s exited %d after SIGTERM, want 0", leader.name, code)
	}
	if holder := w.leaseHolder(h.name); holder != "" {
		t.Errorf("after %s, the last leader, exited the Lease's holder = %q, want none", leader.name, holder)
	}
}

// handoverRun is TestClusterFaultHandoversBySIGTERMAndSIGKILLKeepOneWriterAtATime's
// replica processes, and what its handovers measured.
type handoverRun struct {
	t                    *testing.T
	w                    *workload
	l                    *procLauncher
	name                 string        // the Lease's
	termBound, killBound time.Duration // a takeover's, after a SIGTERM and after a SIGKILL

	all             []*replicaProc // every process started
	holders         []*replicaProc // every process that held the Lease, in turn
	termed          []*replicaProc // the holders SIGTERMed
	leader, standby *replicaProc

	termTakeovers, killTakeovers, termExits, termReturns []time.Duration
}

// start starts the next replica process.
func (h *handoverRun) start() *replicaProc {
	p := h.l.start(fmt.Sprintf("replica-%d", len(h.all)))
	h.all = append(h.all, p)
	return p
}

// handOver ends the leader with sig, checks that the standby takes the
// Lease within its bound, and starts a new standby, once every object has
// converged.
func (h *handoverRun) handOver(n int, sig syscall.Signal) {
	t, w := h.t, h.w
	sent := h.leader.signal(t, sig)
	if sig == syscall.SIGTERM {
		h.terminated(n, sent)
	}
	w.holds(h.name, h.standby.name, 2*h.killBound)
	acq := w.c.AwaitAudit(t, 30*time.Second, func(e clustertest.AuditEvent) bool {
		return e.Namespace == w.ns && e.Resource == "leases" && e.User == h.standby.user && e.Code < 300
	})
	took := acq.RequestReceived.Sub(sent)
	if sig == syscall.SIGTERM {
		h.termTakeovers = append(h.termTakeovers, took)
		if took > h.termBound {
			t.Errorf("handover %d: %s took the Lease %s after SIGTERM, want within %s", n, h.standby.name, took, h.termBound)
		}
	} else {
		h.leader.exited(t, 10*time.Second)
		h.killTakeovers = append(h.killTakeovers, took)
		if took > h.killBound {
			t.Errorf("handover %d: %s took the Lease %s after SIGKILL, want within %s", n, h.standby.name, took, h.killBound)
		}
	}
	h.holders = append(h.holders, h.standby)
	h.leader, h.standby = h.standby, h.start()
	w.converged(2 * time.Minute)
	h.standby.synced(t, time.Minute)
}

// terminated checks the leader SIGTERMed at sent: it releases the Lease
// before it exits 0, so the Lease has no holder then, or the standby has
// taken it already.
func (h *handoverRun) terminated(n int, sent time.Time) {
	t, leader := h.t, h.leader
	h.termed = append(h.termed, leader)
	code := leader.exited(t, 30*time.Second)
	h.termExits = append(h.termExits, time.Since(sent))
	if d, ok := leader.returned(); ok {
		h.termReturns = append(h.termReturns, d)
	}
	if code != 0 {
		t.Errorf("handover %d: %s exited %d after SIGTERM, want 0", n, leader.name, code)
	}
	if holder := h.w.leaseHolder(h.name); holder != "" && holder != h.standby.name {
		t.Errorf("handover %d: after %s exited the Lease's holder = %q, want none or %s", n, leader.name, holder, h.standby.name)
	}
}

// audit checks one writer at a time in the audit log, across the holders'
// terms and of standby, which never held the Lease, and that each holder
// SIGTERMed released the Lease last; it returns how many writes broke the
// rules.
func (h *handoverRun) audit(standby *replicaProc) int {
	time.Sleep(2 * time.Second) // for any late write to reach the log
	events := h.w.c.Audit(h.t)
	broken := procTerms(h.t, events, h.w.ns, h.holders, []*replicaProc{standby})
	for _, p := range h.termed {
		broken += procReleasedLast(h.t, events, h.w.ns, p)
	}
	return broken
}

// createCaches creates n Memcacheds of size 1, m-0 to m-(n-1), a few at
// once.
func createCaches(t *testing.T, w *workload, n int) {
	t.Helper()
	gvr := clusterCaches.GVR()
	eachCache(t, n, func(i int) error {
		u := object(gvr.GroupVersion().String(), "Memcached", w.ns, fmt.Sprintf("m-%d", i), map[string]any{"size": int64(1)})
		delete(u.Object["metadata"].(map[string]any), "uid")
		_, err := w.admin.Resource(gvr).Namespace(w.ns).Create(t.Context(), u, metav1.CreateOptions{})
		return err
	})
}

// eachCache calls f for 0 to n-1, 8 at once, and fails t with every error.
func eachCache(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				errs[i] = f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// underWay waits until p has applied 2*procWorkers statuses: some
// reconciles done, and every worker busy. It reports false when the test
// ended first.
func underWay(t *testing.T, w *workload, p *replicaProc) bool {
	t.Helper()
	for {
		var statuses int
		for _, e := range procWrites(w.c.Audit(t), w.ns, p.user) {
			if e.Subresource == "status" {
				statuses++
			}
		}
		if statuses >= 2*procWorkers {
			return true
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited: %v", p.name, p.err)
		case <-time.After(100 * time.Millisecond):
		case <-t.Context().Done():
			return false
		}
	}
}

// writesAfter reads a replica's writes: each object's writes received
// after sent, the objects whose status it applied at all, and how many
// writes of the Lease it made after sent.
func writesAfter(writes []clustertest.AuditEvent, sent time.Time) (written map[string][]string, reconciled map[string]bool, leaseAfter int) {
	written, reconciled = map[string][]string{}, map[string]bool{}
	for _, e := range writes {
		if e.Subresource == "status" {
			reconciled[e.Name] = true
		}
		if !e.RequestReceived.After(sent) {
			continue
		}
		if e.Resource == "leases" {
			leaseAfter++
			continue
		}
		what := e.Verb + " " + e.Resource
		if e.Subresource != "" {
			what += "/" + e.Subresource
		}
		written[e.Name] = append(written[e.Name], what)
	}
	return written, reconciled, leaseAfter
}

// TestClusterFaultSIGTERMWithABacklogFinishesOnlyTheReconcilesInFlight sends
// SIGTERM to a replica process whose Reconciler takes 2s an object, with
// 500 objects queued and Workers reconciles in flight: it exits 0 well
// within humus's grace period, having finished those reconciles and taken
// no other key (the audit log's writes after the signal are of at most
// Workers objects, each reconcile complete), left the backlog, and
// released the Lease after its last write; and no goroutine of its is left once Run returned.
func TestClusterFaultSIGTERMWithABacklogFinishesOnlyTheReconcilesInFlight(t *testing.T) {
	const (
		objects = 500
		delay   = 2 * time.Second
	)
	w := newWorkload(t)
	createCaches(t, w, objects)
	le := testSettings().LeaderElection // the default Lease timings: 15s, 10s, 2s
	p := newProcLauncher(w, le, delay).start("replica-0")

	// Under way: some reconciles done, and every worker busy.
	c := w.c
	if !underWay(t, w, p) {
		return
	}
	time.Sleep(delay / 2) // mid-reconcile
	sent := p.signal(t, syscall.SIGTERM)
	code := p.exited(t, 2*humus.DefaultGracePeriod)
	exit := time.Since(sent)
	if code != 0 {
		t.Errorf("%s exited %d after SIGTERM, want 0", p.name, code)
	}
	if exit > humus.DefaultGracePeriod {
		t.Errorf("%s exited %s after SIGTERM, want within humus's grace period, %s", p.name, exit, humus.DefaultGracePeriod)
	}
	if h := w.leaseHolder(testSettings().Name); h != "" {
		t.Errorf("the Lease's holder after %s exited = %q, want none", p.name, h)
	}
	returned, _ := p.returned()
	before, after, ok := p.goroutines()
	if !ok {
		t.Errorf("%s didn't say how many goroutines it had", p.name)
	} else if after > before {
		t.Errorf("%s had %d goroutines once Run returned, %d before it", p.name, after, before)
	}

	time.Sleep(time.Second) // for any late write to reach the log
	events := c.Audit(t)
	procReleasedLast(t, events, w.ns, p)
	written, reconciled, leaseAfter := writesAfter(procWrites(events, w.ns, p.user), sent)
	t.Logf("exit %s after SIGTERM (humus.Run returned %s after it, as the process saw it; grace %s); objects written after the signal: %d, %v; Lease writes after it: %d; objects reconciled in all: %d of %d; goroutines %d before Run, %d after",
		exit.Round(time.Millisecond), returned.Round(time.Millisecond), humus.DefaultGracePeriod, len(written), written, leaseAfter, len(reconciled), objects, before, after)
	if len(written) == 0 {
		t.Errorf("no write after the signal: no reconcile was in flight, so the test shows nothing")
	}
	if len(written) > procWorkers {
		t.Errorf("%d objects written after the signal, want at most Workers, %d: a key was taken after SIGTERM", len(written), procWorkers)
	}
	for name, writes := range written {
		if !slices.Contains(writes, "patch memcacheds/status") {
			t.Errorf("%s's reconcile in flight didn't finish: its writes after the signal are %v, with no status apply", name, writes)
		}
	}
	if len(reconciled) >= objects/2 {
		t.Errorf("%d of %d objects reconciled, want the backlog left", len(reconciled), objects)
	}
}
