package kube

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// The fault suite: the Memcached controller, with Owns and Finalize, on the
// real control plane, through a fault (the nemesis), then checked against
// what the API server holds (converged) and who wrote what and when (the
// audit log: no two writers at once). docs/reliability.md lists each
// scenario, its figures, and how it was seen to fail.

// faultObjects is how many Memcacheds a scenario reconciles.
const faultObjects = 200

// workload is a namespace of Memcacheds and the replicas of the controller
// that reconciles them, each with an identity of its own, so the audit log
// tells their writes apart.
type workload struct {
	t     *testing.T
	c     *clustertest.Cluster
	ns    string
	admin dynamic.Interface
	kube  kubernetes.Interface
}

func newWorkload(t *testing.T) *workload {
	t.Helper()
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	return &workload{
		t:     t,
		c:     c,
		ns:    c.Namespace(t),
		admin: dynamic.NewForConfigOrDie(c.AdminConfig()),
		kube:  kubernetes.NewForConfigOrDie(c.AdminConfig()),
	}
}

// create creates n Memcacheds of size 1, named m-0 to m-(n-1).
func (w *workload) create(n int) {
	w.t.Helper()
	for i := range n {
		createCache(w.t, w.admin, clusterCaches.GVR(), w.ns, fmt.Sprintf("m-%d", i), 1)
	}
}

// resize sets every Memcached's size, a change each must converge to.
func (w *workload) resize(n int, size int64) {
	w.t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)
	for i := range n {
		_, err := w.admin.Resource(clusterCaches.GVR()).Namespace(w.ns).Patch(w.t.Context(), fmt.Sprintf("m-%d", i), types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			w.t.Fatal(err)
		}
	}
}

// unconverged returns what keeps the workload's Memcacheds from having
// converged: each must have a Deployment it controls, of its size, and a
// status reporting that size.
func (w *workload) unconverged(ctx context.Context) error {
	return w.unconvergedBut(ctx, func(string) bool { return false })
}

// unconvergedBut is unconverged, for the objects skip doesn't name.
func (w *workload) unconvergedBut(ctx context.Context, skip func(name string) bool) error {
	return unconvergedIn(ctx, w.admin, w.kube, clusterCaches.GVR(), w.ns, skip)
}

// unconvergedIn is unconverged, for the Memcacheds of gvr in ns that skip
// doesn't name.
func unconvergedIn(ctx context.Context, admin dynamic.Interface, kube kubernetes.Interface, gvr schema.GroupVersionResource, ns string, skip func(name string) bool) error {
	list, err := admin.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	deps, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	replicas := map[types.UID]int32{}
	for _, d := range deps.Items {
		if ref := metav1.GetControllerOf(&d); ref != nil && d.Spec.Replicas != nil {
			replicas[ref.UID] = *d.Spec.Replicas
		}
	}
	var errs []error
	for _, m := range list.Items {
		if skip(m.GetName()) {
			continue
		}
		size, _, _ := unstructured.NestedInt64(m.Object, "spec", "size")
		ready, _, _ := unstructured.NestedInt64(m.Object, "status", "readyReplicas")
		got, ok := replicas[m.GetUID()]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: no Deployment it controls", m.GetName()))
		case int64(got) != size:
			errs = append(errs, fmt.Errorf("%s: its Deployment has %d replicas, want %d", m.GetName(), got, size))
		case ready != size:
			errs = append(errs, fmt.Errorf("%s: status.readyReplicas = %d, want %d", m.GetName(), ready, size))
		}
		if len(errs) >= 3 {
			errs = append(errs, errors.New("..."))
			break
		}
	}
	return errors.Join(errs...)
}

// converged waits for the workload to converge.
func (w *workload) converged(within time.Duration) {
	w.t.Helper()
	clustertest.Eventually(w.t, within, w.unconverged)
}

// faultReplica is one replica of the controller: its own ServiceAccount,
// its own network Link to the API server, and its Serve's result.
type faultReplica struct {
	name  string
	user  string // as the audit log names it
	link  *clustertest.Link
	tel   *humustest.Telemetry
	ctrl  *Controller
	stop  func() error // cancels Serve's context, and returns what Serve returned
	calls *counter
}

// replica starts a replica named name with s, its Identity set to name.
func (w *workload) replica(name string, s Settings) *faultReplica {
	w.t.Helper()
	return w.replicaWith(name, s, nil)
}

// replicaWith starts a replica whose Reconciler is wrap's, given the
// deployer; nil is the deployer itself.
func (w *workload) replicaWith(name string, s Settings, wrap func(*deployer) Reconciler[cacheSpec, cacheStatus]) *faultReplica {
	w.t.Helper()
	gvr := clusterCaches.GVR()
	token := w.c.ServiceAccount(w.t, w.ns, name, controllerRBAC(gvr.Group, gvr.Resource, w.ns)...)
	link := clustertest.NewLink(w.t)
	host := humustest.NewHost().Host()
	host.Dial = link.Dial
	tel := humustest.NewTelemetry()
	setup := &humus.Setup{Host: host, Telemetry: tel.Telemetry()}
	client, err := NewClient(setup, Connection{
		Server: w.c.Server(),
		TLS:    &tls.Config{RootCAs: w.c.CA()},
		Token:  func(context.Context) (string, error) { return token, nil },
	})
	if err != nil {
		w.t.Fatal(err)
	}
	ctrl, dep := suiteController(w.t, setup, client, w.ns, name, s, clusterCaches, wrap)
	logOnFailure(w.t, name, tel)
	return &faultReplica{
		name: name, user: "system:serviceaccount:" + w.ns + ":" + name,
		link: link, tel: tel, ctrl: ctrl, stop: served(w.t, ctrl), calls: &dep.calls,
	}
}

// suiteController is the suite's controller of r for the replica name in
// ns, with s: the deployer, or the Reconciler wrap makes of it (nil: the
// deployer itself), Owns(deployments), the finalizer, 4 workers, and
// Identity name. It returns the controller and its deployer.
func suiteController(t *testing.T, setup *humus.Setup, client *Client, ns, name string, s Settings, r Resource[cacheSpec, cacheStatus], wrap func(*deployer) Reconciler[cacheSpec, cacheStatus]) (*Controller, *deployer) {
	t.Helper()
	dep := &deployer{kube: kubernetes.NewForConfigOrDie(client.Config())}
	var rec Reconciler[cacheSpec, cacheStatus] = dep
	if wrap != nil {
		rec = wrap(dep)
	}
	s.Namespace, s.LeaderElection.Namespace, s.LeaderElection.Identity = ns, ns, name
	s.Workers = 4
	ctrl, err := NewController(setup, client, s, r, rec,
		Owns(deployments),
		Finalize(testFinalizer, func(context.Context, Object[cacheSpec, cacheStatus]) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	return ctrl, dep
}

// leaderAndStandby creates faultObjects Memcacheds, and starts replica-a,
// which takes the Lease, then replica-b, its standby; it returns once the
// objects have converged.
func (w *workload) leaderAndStandby(s Settings) (leader, standby *faultReplica) {
	w.t.Helper()
	w.create(faultObjects)
	leader = w.replica("replica-a", s)
	w.holds(s.Name, "replica-a", 30*time.Second)
	standby = w.replica("replica-b", s)
	w.converged(2 * time.Minute)
	return leader, standby
}

// holds waits up to within for the Lease named name to be held by
// identity.
func (w *workload) holds(name, identity string, within time.Duration) {
	w.t.Helper()
	clustertest.Eventually(w.t, within, func(context.Context) error {
		if h := w.leaseHolder(name); h != identity {
			return fmt.Errorf("the Lease's holder = %q, want %s", h, identity)
		}
		return nil
	})
}

// leaseHolder returns the Lease's holder, or "" for none.
func (w *workload) leaseHolder(name string) string {
	w.t.Helper()
	l, err := w.kube.CoordinationV1().Leases(w.ns).Get(w.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return holder(l)
}

// writes is the audit log's writes by the replicas to the workload's
// objects: everything but the Lease, in the namespace.
func (w *workload) writes(events []clustertest.AuditEvent, users ...string) []clustertest.AuditEvent {
	var out []clustertest.AuditEvent
	for _, e := range events {
		if e.Namespace == w.ns && e.Resource != "leases" && slices.Contains(users, e.User) && e.Code < 300 {
			out = append(out, e)
		}
	}
	return out
}

// renewals is user's successful writes of the Lease.
func (w *workload) renewals(events []clustertest.AuditEvent, user string) []clustertest.AuditEvent {
	var out []clustertest.AuditEvent
	for _, e := range events {
		if e.Namespace == w.ns && e.Resource == "leases" && e.User == user && e.Code < 300 {
			out = append(out, e)
		}
	}
	return out
}

// oneWriterAtATime checks the audit log for a handover from old to new:
// every write old's requests made was complete before new's first write was
// received, and before old's Lease could expire (LeaseDuration after its
// last renewal was received). It returns how many writes broke each.
func (w *workload) oneWriterAtATime(events []clustertest.AuditEvent, old, new *faultReplica, leaseDuration time.Duration) (overlapping, afterExpiry int) {
	w.t.Helper()
	newWrites := w.writes(events, new.user)
	if len(newWrites) == 0 {
		w.t.Fatalf("%s made no write after the handover", new.name)
	}
	firstNew := newWrites[0].RequestReceived
	renewals := w.renewals(events, old.user)
	if len(renewals) == 0 {
		w.t.Fatalf("%s never renewed the Lease", old.name)
	}
	expiry := renewals[len(renewals)-1].RequestReceived.Add(leaseDuration)
	for _, e := range w.writes(events, old.user) {
		if !e.StageTime.Before(firstNew) {
			overlapping++
			w.t.Errorf("%s wrote %s %s/%s (received %s, complete %s) after %s's first write, received %s",
				old.name, e.Verb, e.Resource, e.Name, e.RequestReceived.Format(time.StampMicro), e.StageTime.Format(time.StampMicro), new.name, firstNew.Format(time.StampMicro))
		}
		if !e.StageTime.Before(expiry) {
			afterExpiry++
		}
	}
	return overlapping, afterExpiry
}

// TestClusterFaultALeaderCutOffStopsWritingBeforeAnotherTakesOver is the fault
// seen on the real control plane with the library as it was: the leader's
// connection to the API server held, neither refused nor dropped, for
// longer than LeaseDuration, while a standby reaches the API server; then
// released. The old leader must have stopped writing before the standby
// took the Lease, never write after, and never blank the new holder's
// Lease; the standby takes over and every change converges.
func TestClusterFaultALeaderCutOffStopsWritingBeforeAnotherTakesOver(t *testing.T) {
	t.Parallel() // a namespace of its own; it waits more than it works, and touches no process of the control plane
	for _, hold := range []time.Duration{16 * time.Second, 20 * time.Second} {
		t.Run(hold.String(), func(t *testing.T) {
			w := newWorkload(t)
			s := testSettings() // the default Lease timings: 15s, 10s, 2s
			le := s.LeaderElection
			a, b := w.leaderAndStandby(s)

			// Work in flight, then the leader is cut off.
			w.resize(faultObjects, 2)
			a.link.Hold()
			held := time.Now()
			type returned struct {
				err error
				at  time.Duration
			}
			aServed := make(chan returned, 1)
			go func() {
				<-a.ctrl.engine.Done
				at := time.Since(held)
				aServed <- returned{err: a.stop(), at: at}
			}()
			time.Sleep(hold)
			a.link.Release()
			var aReturned time.Duration
			select {
			case r := <-aServed:
				aReturned = r.at
				if !errors.Is(r.err, ErrLostLeadership) {
					t.Errorf("replica-a's Serve = %v, want ErrLostLeadership", r.err)
				}
			case <-time.After(time.Minute):
				t.Fatal("replica-a's Serve didn't return")
			}
			if aReturned > le.LeaseDuration {
				t.Errorf("replica-a's Serve returned %s after its link was held, want within LeaseDuration, %s", aReturned, le.LeaseDuration)
			}
			// A write released by the link now would show in the audit log
			// after the standby's first writes.
			w.resize(faultObjects, 3)
			w.converged(2 * time.Minute)
			w.holds(s.Name, "replica-b", 30*time.Second)
			time.Sleep(2 * time.Second) // for any late write to reach the log
			overlapping, afterExpiry := w.oneWriterAtATime(w.c.Audit(t), a, b, le.LeaseDuration)
			t.Logf("hold %s: replica-a's Serve returned %s after the hold began; writes overlapping replica-b's: %d; after replica-a's Lease could expire: %d",
				hold, aReturned.Round(time.Millisecond), overlapping, afterExpiry)
			if afterExpiry != 0 {
				t.Errorf("replica-a made %d writes after its Lease could expire, want 0", afterExpiry)
			}
			if err := b.stop(); err != nil {
				t.Errorf("replica-b's Serve = %v, want nil", err)
			}
		})
	}
}

// longLease are Lease timings that outlast a restart of kube-apiserver or
// etcd: a replica keeps its Lease through an outage shorter than
// RenewDeadline.
func longLease(s Settings) Settings {
	s.LeaderElection.LeaseDuration, s.LeaderElection.RenewDeadline, s.LeaderElection.RetryPeriod = 40*time.Second, 30*time.Second, 2*time.Second
	return s
}

// stillServing fails t if r's Serve has returned.
func stillServing(t *testing.T, r *faultReplica) {
	t.Helper()
	select {
	case <-r.ctrl.engine.Done:
		t.Fatalf("%s's Serve returned %v, want it still serving", r.name, r.stop())
	default:
	}
}

// TestClusterFaultAnAPIServerKilledAndRestartedKeepsTheLease kills
// kube-apiserver with SIGKILL and starts it again five times, each outage
// shorter than RenewDeadline, with a change to every object before each:
// every change converges, and the replica keeps its Lease and serves on.
func TestClusterFaultAnAPIServerKilledAndRestartedKeepsTheLease(t *testing.T) {
	w := newWorkload(t)
	w.create(faultObjects)
	s := longLease(testSettings())
	a := w.replica("replica-a", s)
	w.converged(2 * time.Minute)
	var outages []time.Duration
	for i := range 5 {
		w.resize(faultObjects, int64(i+2))
		down := time.Now()
		w.c.KillAPIServer(t)
		w.c.StartAPIServer(t)
		outages = append(outages, time.Since(down).Round(10*time.Millisecond))
		w.converged(2 * time.Minute)
		stillServing(t, a)
		if h := w.leaseHolder(s.Name); h != "replica-a" {
			t.Fatalf("after restart %d the Lease's holder = %q, want replica-a", i+1, h)
		}
	}
	t.Logf("outages: %v; converged after each, the Lease kept", outages)
	if err := a.stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

// TestClusterFaultAnEtcdKilledAndRestartedConverges kills etcd with SIGKILL and
// starts it again while changes are under way: they converge, and the
// replica keeps its Lease.
func TestClusterFaultAnEtcdKilledAndRestartedConverges(t *testing.T) {
	w := newWorkload(t)
	w.create(faultObjects)
	s := longLease(testSettings())
	a := w.replica("replica-a", s)
	w.converged(2 * time.Minute)
	w.resize(faultObjects, 2)
	down := time.Now()
	w.c.KillEtcd(t)
	w.c.StartEtcd(t)
	outage := time.Since(down)
	w.resize(faultObjects, 3)
	w.converged(2 * time.Minute)
	stillServing(t, a)
	t.Logf("etcd's outage: %s; converged, the Lease kept", outage.Round(10*time.Millisecond))
	if err := a.stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

// TestClusterFaultAnAPIServerHungPastRenewDeadlineHandsOver pauses
// kube-apiserver (SIGSTOP) for longer than RenewDeadline, and shorter than
// LeaseDuration less RetryPeriod, then resumes it; and, in the other case,
// refuses the leader's connections for as long. The leader stops at its
// renew deadline, Serve returns ErrLostLeadership, the standby takes over,
// every change converges, and no write of the old leader's comes after the
// new one's first or after the old Lease could expire.
func TestClusterFaultAnAPIServerHungPastRenewDeadlineHandsOver(t *testing.T) {
	s := testSettings() // 15s, 10s, 2s
	le := s.LeaderElection
	outage := le.RenewDeadline + 2*time.Second
	for _, fault := range []struct {
		name       string
		start, end func(w *workload, a *faultReplica)
	}{
		{"paused", func(w *workload, _ *faultReplica) { w.c.PauseAPIServer(w.t) }, func(w *workload, _ *faultReplica) { w.c.ResumeAPIServer(w.t) }},
		{"refused", func(_ *workload, a *faultReplica) { a.link.Refuse() }, func(_ *workload, a *faultReplica) { a.link.Accept() }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			w := newWorkload(t)
			a, b := w.leaderAndStandby(s)

			w.resize(faultObjects, 2)
			began := time.Now()
			fault.start(w, a)
			aReturned, aErr := awaitServe(a.ctrl, a.stop, outage)
			if !aReturned {
				t.Fatalf("replica-a's Serve hadn't returned %s into the outage", outage)
			}
			returned := time.Since(began)
			time.Sleep(time.Until(began.Add(outage)))
			fault.end(w, a)
			if !errors.Is(aErr, ErrLostLeadership) {
				t.Errorf("replica-a's Serve = %v, want ErrLostLeadership", aErr)
			}
			w.resize(faultObjects, 3)
			w.converged(2 * time.Minute)
			w.holds(s.Name, "replica-b", 30*time.Second)
			time.Sleep(2 * time.Second)
			overlapping, afterExpiry := w.oneWriterAtATime(w.c.Audit(t), a, b, le.LeaseDuration)
			t.Logf("%s for %s: replica-a's Serve returned %s in; writes overlapping replica-b's: %d; after replica-a's Lease could expire: %d",
				fault.name, outage, returned.Round(time.Millisecond), overlapping, afterExpiry)
			if afterExpiry != 0 {
				t.Errorf("replica-a made %d writes after its Lease could expire, want 0", afterExpiry)
			}
			if err := b.stop(); err != nil {
				t.Errorf("replica-b's Serve = %v, want nil", err)
			}
		})
	}
}

// expired reports whether a watch of ns's Deployments from rv is 410 Gone.
func expired(t *testing.T, kube kubernetes.Interface, ns, rv string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	wi, err := kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		}
	}
	return false
}

// TestClusterFaultAWatchExpiredRelistsAndSeesTheDeletionsInTheGap deletes
// Deployments while the leader's connections are refused, compacts etcd, and
// restarts kube-apiserver, so its watch cache starts after the gap: the
// leader's watches, resumed from their last resourceVersion, get 410 Gone,
// its informers list again, and the deletions they missed are seen, so
// every Deployment is applied again.
func TestClusterFaultAWatchExpiredRelistsAndSeesTheDeletionsInTheGap(t *testing.T) {
	w := newWorkload(t)
	const n = 50
	w.create(n)
	s := longLease(testSettings())
	a := w.replica("replica-a", s)
	w.converged(2 * time.Minute)

	// The leader's connections are reset and refused, so no event of the
	// gap reaches it.
	list, err := w.kube.AppsV1().Deployments(w.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := list.ResourceVersion
	a.link.Refuse()
	for i := range n / 2 {
		err := w.kube.AppsV1().Deployments(w.ns).Delete(t.Context(), fmt.Sprintf("m-%d", i), metav1.DeleteOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	w.c.CompactEtcd(t)
	w.c.KillAPIServer(t)
	w.c.StartAPIServer(t)
	a.link.Accept()
	w.converged(2 * time.Minute)
	// Every watch resumed from before the gap is expired, so the
	// informer saw the deletions by listing again: a watch from a
	// resourceVersion taken just before the gap, newer than any the
	// leader's informer had, is 410 Gone.
	if !expired(t, w.kube, w.ns, before) {
		t.Errorf("a watch of Deployments from resourceVersion %s, before the gap, isn't expired: the scenario doesn't force a relist", before)
	}
	stillServing(t, a)
	if err := a.stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

// TestClusterFaultAPoisonObjectDelaysNoOther: one object whose Reconcile always
// errors backs off, doubling to RetryMaxDelay, and one that always panics
// is reconciled once per change; neither delays the others, whose settle
// time is measured with and without them.
func TestClusterFaultAPoisonObjectDelaysNoOther(t *testing.T) {
	s := testSettings()
	s.RetryBaseDelay, s.RetryMaxDelay = 100*time.Millisecond, 4*time.Second
	var errored, panicked counter
	poison := func(d *deployer) Reconciler[cacheSpec, cacheStatus] {
		return poisonedDeployer(d, &errored, &panicked)
	}
	settle := func(withPoison bool) time.Duration {
		w := newWorkload(t)
		if withPoison {
			createCache(t, w.admin, clusterCaches.GVR(), w.ns, "poison-error", 1)
			createCache(t, w.admin, clusterCaches.GVR(), w.ns, "poison-panic", 1)
		}
		a := w.replicaWith("replica-a", s, poison)
		clustertest.Eventually(t, 30*time.Second, a.ctrl.Synced().Healthy)
		start := time.Now()
		w.create(faultObjects)
		clustertest.Eventually(t, 2*time.Minute, w.othersUnconverged)
		took := time.Since(start)
		if withPoison {
			checkThePoisonObjectsRetries(t, w, s, &errored, &panicked)
		}
		if err := a.stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		return took
	}
	clean := settle(false)
	poisoned := settle(true)
	t.Logf("%d objects settled in %s alone, and in %s beside a poison object that errors and one that panics", faultObjects, clean.Round(time.Millisecond), poisoned.Round(time.Millisecond))
	if poisoned > 2*clean+5*time.Second {
		t.Errorf("the others settled in %s beside the poison objects, %s without: delayed", poisoned, clean)
	}
}

// poisonedDeployer is d, but for the objects poison-error, whose every
// reconcile errors (errored counts them), and poison-panic, whose every
// reconcile panics (panicked counts them).
func poisonedDeployer(d *deployer, errored, panicked *counter) Reconciler[cacheSpec, cacheStatus] {
	return ReconcilerFunc[cacheSpec, cacheStatus](func(ctx context.Context, m Object[cacheSpec, cacheStatus]) (Result[cacheStatus], error) {
		switch m.Name {
		case "poison-error":
			errored.Inc(m.Name)
			return Result[cacheStatus]{}, errors.New("poisoned")
		case "poison-panic":
			panicked.Inc(m.Name)
			panic("poisoned")
		}
		return d.Reconcile(ctx, m)
	})
}

// checkThePoisonObjectsRetries checks, once the others settled, that the
// erroring object backs off, doubling to s.RetryMaxDelay, and that the
// panicking one is reconciled once, and once more for a change.
func checkThePoisonObjectsRetries(t *testing.T, w *workload, s Settings, errored, panicked *counter) {
	t.Helper()
	// Let the backoff reach RetryMaxDelay: 0.1+0.2+...+3.2 is 6.3s,
	// then every 4s.
	time.Sleep(30 * time.Second)
	n := errored.Get("poison-error")
	// 7 attempts reach the cap by 6.3s, then one each 4s: about 13
	// in 30s, and never the hundreds an unbounded retry makes.
	if n < 8 || n > 16 {
		t.Errorf("the erroring object was reconciled %d times in about 30s, want about 13: a doubling backoff capped at %s", n, s.RetryMaxDelay)
	}
	// Once: the change its finalizer's apply made, before the
	// Reconciler panicked, is the reconcile's own, and a panic is not
	// retried.
	if n := panicked.Get("poison-panic"); n != 1 {
		t.Errorf("the panicking object was reconciled %d times, want 1: its finalizer's change is its own, and a panic is not retried", n)
	}
	patch := []byte(`{"spec":{"size":2}}`)
	if _, err := w.admin.Resource(clusterCaches.GVR()).Namespace(w.ns).Patch(t.Context(), "poison-panic", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		if n := panicked.Get("poison-panic"); n != 2 {
			return fmt.Errorf("the panicking object was reconciled %d times, want 2: once more for its change", n)
		}
		return nil
	})
	time.Sleep(5 * time.Second)
	if n := panicked.Get("poison-panic"); n != 2 {
		t.Errorf("the panicking object was reconciled %d times after one change, want 2", n)
	}
}

// othersUnconverged is unconverged, for every object but the poison ones.
func (w *workload) othersUnconverged(ctx context.Context) error {
	return w.unconvergedBut(ctx, func(name string) bool { return strings.HasPrefix(name, "poison-") })
}

// logOnFailure logs the last records of a replica's logs when t has
// failed, so a fault test that fails says what the replica saw.
func logOnFailure(t *testing.T, name string, tel *humustest.Telemetry) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		records := tel.Records()
		const last = 60
		if len(records) > last {
			records = records[len(records)-last:]
		}
		for _, r := range records {
			line := fmt.Sprintf("%s: %s %s %s", name, r.Timestamp().Format("15:04:05.000"), r.Severity(), r.Body().AsString())
			r.WalkAttributes(func(kv attribute.KeyValue) bool {
				line += " " + string(kv.Key) + "=" + kv.Value.String()
				return true
			})
			t.Log(line)
		}
	})
}
