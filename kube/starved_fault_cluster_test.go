package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/clustertest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestClusterFaultAStarvedLeadersLateWritesAreRefused starves the leader
// across its renew deadline with writes of its already sent: a replica
// process whose traffic is held (its requests leave it, as bytes handed to
// the kernel do, and reach nobody), then SIGSTOPped, so its own deadline
// can't abort them. Its Lease expires, the standby takes it over and
// reconciles the objects, changed all the while; then the partition heals
// while the old leader is still starved, and what it had sent reaches the
// API server, seconds after the new leader's first writes. What the audit
// log must show: none of the old leader's fenced writes (the Lease's
// renewals, its objects' finalizers and statuses, each conditioned on the
// resourceVersion it was computed from) is stored after the new leader's
// acquisition of the Lease: the API server refuses each. (The Reconciler's
// own writes to other objects can't be fenced so: this scenario's writes
// none; docs/reliability.md says what that means.)
//
// Seen failing with the controller's two writes unconditioned (no
// resourceVersion in either apply): the old leader's late status applies
// were stored after the new leader's first.
func TestClusterFaultAStarvedLeadersLateWritesAreRefused(t *testing.T) {
	const objects = 40
	le := shortLease(testSettings()).LeaderElection
	w := newWorkload(t)
	w.create(objects)
	// Every write of a reconcile's is the controller's own, fenced: the
	// finalizer and the status, no Deployment. Each reconcile takes 0.2 s,
	// so once the traffic is held, every busy worker's next write is
	// held within 0.2 s.
	l := newProcLauncher(w, le, 200*time.Millisecond)
	l.statusOnly = true
	proxy := newHoldProxy(t, w.c.Server())
	old := l.startVia("replica-0", proxy.addr)
	name := testSettings().Name
	w.holds(name, old.name, time.Minute)
	standby := l.start("replica-1")
	standby.synced(t, time.Minute)
	w.statusesConverged(objects, 2*time.Minute)

	churned := time.Now()
	stopChurn := w.churn(objects)
	defer stopChurn()
	w.statusesSince(old, churned, 2*procWorkers, time.Minute)
	// Its requests now leave it and go nowhere, for a second of its work,
	// well inside RenewDeadline: then it is starved, so its deadline
	// can't abort them.
	proxy.Hold()
	held := time.Now()
	time.Sleep(time.Second)
	old.signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { _ = old.cmd.Process.Signal(syscall.SIGCONT) })

	w.holds(name, standby.name, le.LeaseDuration+le.RetryPeriod+10*time.Second)
	acq := w.c.AwaitAudit(t, 30*time.Second, func(e clustertest.AuditEvent) bool {
		return e.Namespace == w.ns && e.Resource == "leases" && e.User == standby.user && e.Code < 300
	})
	w.statusesSince(standby, acq.StageTime, 2*procWorkers, time.Minute)
	// The partition heals while the old leader is still starved: what it
	// sent before reaches the API server, seconds after the new leader's
	// first writes. Then it wakes.
	proxy.Release()
	released := time.Now()
	time.Sleep(2 * time.Second)
	old.signal(t, syscall.SIGCONT)
	stopChurn()
	w.statusesConverged(objects, 2*time.Minute)

	var late, refused, fencedLate int
	for _, e := range w.c.Audit(t) {
		if e.Namespace != w.ns || e.User != old.user || !e.RequestReceived.After(acq.RequestReceived) {
			continue
		}
		late++
		if e.Resource == clusterCaches.GVR().Resource {
			fencedLate++
		}
		if e.Code >= 300 {
			refused++
			continue
		}
		t.Errorf("%s's %s of %s %s/%s (subresource %q) was stored (%d, received %s, complete %s) after %s's acquisition of the Lease (received %s): a fenced write of the old leader's, stored late",
			old.name, e.Verb, e.Resource, e.Namespace, e.Name, e.Subresource, e.Code, stamp(e.RequestReceived), stamp(e.StageTime), standby.name, stamp(acq.RequestReceived))
	}
	if fencedLate == 0 {
		t.Fatalf("no write of %s's to its objects reached the API server after %s's acquisition: the scenario held none (held %s, released %s)", old.name, standby.name, stamp(held), stamp(released))
	}
	t.Logf("held %s's traffic for %s, starved it from a second in; %s took the Lease at %s; after it, %d writes of %s's reached the API server (%d to its objects): %d refused",
		old.name, released.Sub(held).Round(time.Millisecond), standby.name, stamp(acq.RequestReceived), late, old.name, fencedLate, refused)
}

// statusesSince waits until p has applied n statuses received after
// since: it is reconciling what changed since.
func (w *workload) statusesSince(p *replicaProc, since time.Time, n int, within time.Duration) {
	w.t.Helper()
	clustertest.Eventually(w.t, within, func(context.Context) error {
		got := 0
		for _, e := range procWrites(w.c.Audit(w.t), w.ns, p.user) {
			if e.Subresource == "status" && e.RequestReceived.After(since) {
				got++
			}
		}
		if got < n {
			return fmt.Errorf("%s applied %d statuses since %s, want %d", p.name, got, stamp(since), n)
		}
		return nil
	})
}

// statusesConverged waits until the first n Memcacheds' statuses report
// their size.
func (w *workload) statusesConverged(n int, within time.Duration) {
	w.t.Helper()
	clustertest.Eventually(w.t, within, func(ctx context.Context) error {
		for i := range n {
			name := fmt.Sprintf("m-%d", i)
			u, err := w.admin.Resource(clusterCaches.GVR()).Namespace(w.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
			if ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas"); ready != size {
				return fmt.Errorf("%s: status.readyReplicas = %d, want %d", name, ready, size)
			}
		}
		return nil
	})
}

// startVia is start, with the replica reaching the API server at addr: a
// holdProxy's.
func (l *procLauncher) startVia(name, addr string) *replicaProc {
	l.w.t.Helper()
	l.server = addr
	defer func() { l.server = "" }()
	return l.start(name)
}

// holdProxy is a TCP proxy to one address whose traffic the test can
// hold: while held it goes on reading what each side sends, as the
// kernel takes what a process writes, and forwards nothing until
// Release, which forwards it all, in order. What a client sent before it
// closed its connection is still forwarded, and the connection to the
// server kept open: the server answers every request it was sent.
type holdProxy struct {
	addr string

	mu    sync.Mutex
	cond  *sync.Cond
	held  bool
	conns []net.Conn
}

func newHoldProxy(t *testing.T, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{addr: ln.Addr().String()}
	p.cond = sync.NewCond(&p.mu)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		p.Release()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			wg.Go(func() { p.pump(client, server, false) })
			wg.Go(func() { p.pump(server, client, true) })
		}
	})
	return p
}

// pump reads src all the while and writes what it read to dst whenever
// the proxy isn't held. At src's end it stops; when down (the server's
// answers to the client), it closes both once dst refuses a write.
func (p *holdProxy) pump(src, dst net.Conn, down bool) {
	var (
		mu    sync.Mutex
		cond  = sync.NewCond(&mu)
		queue [][]byte
		ended bool
	)
	go func() {
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			mu.Lock()
			if n > 0 {
				queue = append(queue, b[:n])
			}
			if err != nil {
				ended = true
			}
			cond.Broadcast()
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	for {
		mu.Lock()
		for len(queue) == 0 && !ended {
			cond.Wait()
		}
		if len(queue) == 0 {
			mu.Unlock()
			return
		}
		chunk := queue[0]
		queue = queue[1:]
		mu.Unlock()
		p.waitReleased()
		if _, err := dst.Write(chunk); err != nil {
			if down {
				_ = src.Close()
				_, _ = io.Copy(io.Discard, src)
			}
			return
		}
	}
}

func (p *holdProxy) waitReleased() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.held {
		p.cond.Wait()
	}
}

// Hold stops forwarding, in both directions, until Release.
func (p *holdProxy) Hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// Release forwards what Hold queued, and goes on forwarding.
func (p *holdProxy) Release() {
	p.mu.Lock()
	p.held = false
	p.cond.Broadcast()
	p.mu.Unlock()
}
