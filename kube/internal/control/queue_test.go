package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// journal is a Reconciler that takes a second of the bubble's time for
// each reconcile, and notes when each began, in order; it fails an
// object's first reconciles as often as fail says, and returns after[name]
// as After from the first.
type journal struct {
	mu       sync.Mutex
	began    []string
	at       map[string][]time.Duration // since the first reconcile began, when each of an object's began
	running  map[string]int
	overlaps []string // objects reconciled by two workers at once
	fail     map[string]int
	after    map[string]time.Duration
	took     time.Duration
	start    time.Time
}

func newJournal() *journal {
	return &journal{at: map[string][]time.Duration{}, running: map[string]int{}, fail: map[string]int{},
		after: map[string]time.Duration{}, took: time.Second}
}

func (j *journal) reconcile(ctx context.Context, m memcached) (result, error) {
	j.mu.Lock()
	if len(j.began) == 0 {
		j.start = time.Now()
	}
	j.began = append(j.began, m.Name)
	j.at[m.Name] = append(j.at[m.Name], time.Since(j.start))
	j.running[m.Name]++
	if j.running[m.Name] > 1 {
		j.overlaps = append(j.overlaps, m.Name)
	}
	first := len(j.at[m.Name]) == 1
	fail := j.fail[m.Name] > 0
	if fail {
		j.fail[m.Name]--
	}
	j.mu.Unlock()
	time.Sleep(j.took)
	j.mu.Lock()
	j.running[m.Name]--
	j.mu.Unlock()
	if fail {
		return result{}, errors.New("the memcached image can't be pulled")
	}
	if first {
		return result{After: j.after[m.Name]}, nil
	}
	return result{}, nil
}

func (j *journal) order() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.began)
}

func (j *journal) times(name string) []time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.at[name])
}

// backlog is n Memcacheds, m-00 to m-<n-1>, there before Serve.
func backlog(n int) []runtime.Object {
	var objs []runtime.Object
	for i := range n {
		objs = append(objs, cacheObject("default", fmt.Sprintf("m-%02d", i), 1))
	}
	return objs
}

// relabel changes an object's labels: a change a reconcile reads.
func relabel(t *testing.T, f *fakeCluster, name, value string) {
	t.Helper()
	u := f.Get(t, cachesGVR, "default", name)
	u.SetLabels(map[string]string{"tier": value})
	f.Update(t, cachesGVR, u)
}

func oneWorker() Settings {
	s := testSettings()
	s.Workers = 1
	s.RetryBaseDelay, s.RetryMaxDelay = 2500*time.Millisecond, time.Minute
	return s
}

// A change to an object goes ahead of a cold start's backlog: to an object
// already reconciled, it queues the key at normal priority; to one still
// waiting in the backlog, it moves the key up, once, however many changes
// come, and the object is reconciled once for them all.
func TestAChangeOvertakesTheBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, backlog(20)...)
		j := newJournal()
		stop := served(t, newTestController(t, f, oneWorker(), reconcileFunc(j.reconcile)))
		time.Sleep(3500 * time.Millisecond) // the fourth reconcile is in flight
		before := j.order()
		if len(before) != 4 {
			t.Fatalf("reconciles begun after 3.5s = %v, want 4", before)
		}
		done := before[0]
		var waiting string
		for i := range 20 {
			if name := fmt.Sprintf("m-%02d", i); !slices.Contains(before, name) {
				waiting = name // the last of the backlog not yet reconciled
			}
		}
		relabel(t, f, done, "a")
		relabel(t, f, waiting, "a")
		relabel(t, f, waiting, "b")
		relabel(t, f, waiting, "c")
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}

		got := j.order()
		if len(got) != 21 {
			t.Fatalf("%d reconciles, want 21: each object once, and %s again: %v", len(got), done, got)
		}
		if got[4] != done || got[5] != waiting {
			t.Errorf("after the reconcile in flight came %v, want %s (changed after its reconcile) then %s (moved up from the backlog): %v", got[4:6], done, waiting, got)
		}
		if n := len(j.times(waiting)); n != 1 {
			t.Errorf("%s was reconciled %d times, want once: moved up once for its three changes", waiting, n)
		}
	})
}

// A retry after an error comes back after its backoff, no later and no
// sooner, at the priority the key was taken at: a change's key goes ahead
// of the backlog again; a backlog key's goes to the back of it.
func TestARetryKeepsItsTimeAndItsPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, backlog(10)...)
		j := newJournal()
		j.fail["x"], j.fail["m-00"], j.fail["m-01"] = 1, 1, 1
		stop := served(t, newTestController(t, f, oneWorker(), reconcileFunc(j.reconcile)))
		time.Sleep(500 * time.Millisecond)
		f.Create(t, cachesGVR, cacheObject("default", "x", 1))
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}

		// x: created at 0.5s, taken at 1s (the first reconcile in flight),
		// failed at 2s, due again 2.5s later, at 4.5s, while the fifth
		// reconcile runs: taken at 5s, before the seven left of the backlog.
		if got, want := j.times("x"), []time.Duration{time.Second, 5 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("x's reconciles began at %v, want %v", got, want)
		}
		// m-00 and m-01 failed at 1s and 3s, were due again at 3.5s and
		// 5.5s, at low priority: behind the rest of the backlog.
		want := []string{"m-00", "x", "m-01", "m-02", "m-03", "x", "m-04", "m-05", "m-06", "m-07", "m-08", "m-09", "m-00", "m-01"}
		if got := j.order(); !slices.Equal(got, want) {
			t.Errorf("reconciled in order %v, want %v", got, want)
		}
	})
}

// Result.After comes back after that long, at the priority of what queued
// the key: a change's key goes ahead of the backlog.
func TestAfterKeepsItsTimeAndItsPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, backlog(10)...)
		j := newJournal()
		j.after["x"] = 2500 * time.Millisecond
		stop := served(t, newTestController(t, f, oneWorker(), reconcileFunc(j.reconcile)))
		time.Sleep(500 * time.Millisecond)
		f.Create(t, cachesGVR, cacheObject("default", "x", 1))
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		// Taken at 1s, done at 2s, due again at 4.5s while the fifth
		// reconcile runs: taken at 5s, ahead of the six left of the backlog.
		if got, want := j.times("x"), []time.Duration{time.Second, 5 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("x's reconciles began at %v, want %v", got, want)
		}
		want := []string{"m-00", "x", "m-01", "m-02", "m-03", "x", "m-04", "m-05", "m-06", "m-07", "m-08", "m-09"}
		if got := j.order(); !slices.Equal(got, want) {
			t.Errorf("reconciled in order %v, want %v", got, want)
		}
	})
}

// However many changes come while an object is reconciled, and however
// many workers wait, it is never on two workers at once: the changes queue
// it once more, after its reconcile.
func TestAKeyIsNeverOnTwoWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, backlog(8)...)
		j := newJournal()
		j.took = 5 * time.Second
		s := testSettings()
		s.Workers = 4
		stop := served(t, newTestController(t, f, s, reconcileFunc(j.reconcile)))
		time.Sleep(time.Second)
		inFlight := j.order()
		if len(inFlight) != 4 {
			t.Fatalf("reconciles in flight = %v, want 4", inFlight)
		}
		for i := range 3 {
			for _, name := range inFlight {
				relabel(t, f, name, fmt.Sprint(i))
			}
			time.Sleep(time.Second)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		if len(j.overlaps) != 0 {
			t.Errorf("reconciled by two workers at once: %v", j.overlaps)
		}
		for _, name := range inFlight {
			// Its changes came while it ran: once more, after it, and ahead
			// of the four of the backlog left.
			if got, want := j.times(name), []time.Duration{0, 5 * time.Second}; !slices.Equal(got, want) {
				t.Errorf("%s's reconciles began at %v, want %v", name, got, want)
			}
		}
	})
}

// On shutdown the workers stop taking keys: the keys waiting at either
// priority are left for the next leader.
func TestShutdownLeavesTheBacklogAtBothPriorities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, backlog(5)...)
		j := newJournal()
		j.took = 10 * time.Second
		stop := served(t, newTestController(t, f, oneWorker(), reconcileFunc(j.reconcile)))
		time.Sleep(time.Second)
		f.Create(t, cachesGVR, cacheObject("default", "x", 1))
		relabel(t, f, "m-04", "a")
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		if got := j.order(); len(got) != 1 {
			t.Errorf("reconciled %v, want only the one in flight at shutdown", got)
		}
	})
}

// A new leader's backlog is low priority: the keys a standby queued for
// changes long before it took the Lease, which the former leader handled,
// wait behind a change made since, and behind the backlog.
func TestANewLeadersBacklogIsLowPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, backlog(6)...)
		now := metav1.NewMicroTime(time.Now())
		holder, duration := "replica-2", int32(30)
		if _, err := f.Kube.CoordinationV1().Leases("kube-system").Create(context.Background(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "memcached-controller"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration,
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		j := newJournal()
		stop := served(t, newTestController(t, f, oneWorker(), reconcileFunc(j.reconcile)))
		time.Sleep(time.Second)
		relabel(t, f, "m-01", "a") // long before the takeover, at about 30s
		time.Sleep(24 * time.Second)
		relabel(t, f, "m-03", "a") // within LeaseDuration (15s) of it
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		// m-01's change was the former leader's to handle: its key moved
		// down to the backlog, in the order it came to normal priority.
		want := []string{"m-03", "m-00", "m-02", "m-04", "m-05", "m-01"}
		if got := j.order(); !slices.Equal(got, want) {
			t.Errorf("the new leader reconciled %v, want %v", got, want)
		}
	})
}

// sleepUntil sleeps until d after start, and lets the bubble settle.
func sleepUntil(start time.Time, d time.Duration) {
	time.Sleep(time.Until(start.Add(d)))
	synctest.Wait()
}

// heldReconciler is a Reconciler whose first reconcile waits, in flight,
// until release is closed, and then ends with first; every later one ends
// with rest.
type heldReconciler struct {
	calls    counter
	inFlight chan struct{}
	release  chan struct{}
	first    func() (result, error)
	rest     func() (result, error)
}

func newHeldReconciler(first, rest func() (result, error)) *heldReconciler {
	return &heldReconciler{inFlight: make(chan struct{}), release: make(chan struct{}), first: first, rest: rest}
}

func (h *heldReconciler) Reconcile(ctx context.Context, m memcached) (result, error) {
	if h.calls.Inc(m.Name) == 1 {
		close(h.inFlight)
		<-h.release
		return h.first()
	}
	return h.rest()
}

// changeWhileInFlight waits for h's first reconcile, changes the object
// while it is in flight, so the change queues the key again behind it, and
// then lets the reconcile end.
func (h *heldReconciler) changeWhileInFlight(t *testing.T, f *fakeCluster) {
	t.Helper()
	<-h.inFlight
	time.Sleep(time.Second)
	resize(t, f, "m", 2)
	synctest.Wait() // the change's event has queued the key
	close(h.release)
	synctest.Wait()
}

func TestAChangeSupersedesAPendingAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls counter
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			calls.Inc(m.Name)
			return result{After: 10 * time.Second}, nil
		})
		stop := served(t, newTestController(t, f, testSettings(), rec))

		sleepUntil(start, 5*time.Second)
		if got := calls.Get("m"); got != 1 {
			t.Fatalf("reconciles in 5s = %d, want 1", got)
		}
		resize(t, f, "m", 2)
		sleepUntil(start, 12*time.Second)
		if got := calls.Get("m"); got != 2 {
			t.Errorf("reconciles by 12s = %d, want 2 (at 0 and 5s): the change at 5s replaces the After of 10s due at 10s", got)
		}
		sleepUntil(start, 16*time.Second)
		if got := calls.Get("m"); got != 3 {
			t.Errorf("reconciles by 16s = %d, want 3: the change's own reconcile's After is due at 15s", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestAChangeSupersedesAPendingBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var calls counter
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			if calls.Inc(m.Name) == 1 {
				return result{}, errors.New("the memcached image can't be pulled")
			}
			return result{}, nil
		})
		s := testSettings()
		s.RetryBaseDelay, s.RetryMaxDelay = 10*time.Second, time.Minute
		stop := served(t, newTestController(t, f, s, rec))

		sleepUntil(start, time.Second)
		resize(t, f, "m", 2)
		sleepUntil(start, 2*time.Second)
		if got := calls.Get("m"); got != 2 {
			t.Fatalf("reconciles by 2s = %d, want 2: the failure at 0, and the change at 1s", got)
		}
		sleepUntil(start, 30*time.Second)
		if got := calls.Get("m"); got != 2 {
			t.Errorf("reconciles in 30s = %d, want 2: the change, reconciled, replaced the failure's backoff due at 10s", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestASuccessfulReconcileSupersedesAPendingBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		rec := newHeldReconciler(
			func() (result, error) {
				return result{}, errors.New("the memcached image can't be pulled")
			},
			func() (result, error) { return result{}, nil },
		)
		s := testSettings()
		s.RetryBaseDelay, s.RetryMaxDelay = 10*time.Second, time.Minute
		stop := served(t, newTestController(t, f, s, rec))

		// The change comes while the failing reconcile is in flight: its
		// backoff is set after the change, and only the reconcile that
		// follows, which succeeds, can take it back.
		rec.changeWhileInFlight(t, f)
		if got := rec.calls.Get("m"); got != 2 {
			t.Fatalf("reconciles once the first failed = %d, want 2: the change queued the key behind it", got)
		}
		sleepUntil(start, 30*time.Second)
		if got := rec.calls.Get("m"); got != 2 {
			t.Errorf("reconciles in 30s = %d, want 2: the success forgets the failure's backoff, due at 11s", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

func TestAPanicSupersedesAPendingAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		rec := newHeldReconciler(
			func() (result, error) { return result{After: 10 * time.Second}, nil },
			func() (result, error) { panic("the cache's volume is gone") },
		)
		stop := served(t, newTestController(t, f, testSettings(), rec))

		rec.changeWhileInFlight(t, f)
		if got := rec.calls.Get("m"); got != 2 {
			t.Fatalf("reconciles once the first returned = %d, want 2: the change queued the key behind it", got)
		}
		sleepUntil(start, 30*time.Second)
		if got := rec.calls.Get("m"); got != 2 {
			t.Errorf("reconciles in 30s = %d, want 2: the panic forgets the first reconcile's After, due at 11s", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})
}

// A write's event can come before its answer, so before the write is
// known: while the key is being reconciled, its events are held, and
// judged once the reconcile ends. Its own write's queues nothing; any
// other's queues the key again.
func TestAnEventThatComesBeforeItsWritesAnswerIsJudgedOnceTheReconcileEnds(t *testing.T) {
	obj := func(rv string, generation int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace("default")
		u.SetName("m")
		u.SetGeneration(generation)
		u.SetResourceVersion(rv)
		return u
	}
	input := obj("3", 1)
	for _, tc := range []struct {
		name  string
		event *unstructured.Unstructured
		again bool
	}{
		{"its own write", obj("5", 1), false},
		{"another's change", obj("4", 2), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newCountingQueue(t)
			sh := testWork(q)
			c := &Controller{}
			h := c.ObjectKeys(sh)
			c.InFlight.begin("default/m")
			h.OnUpdate(input, tc.event)
			if len(q.added) != 0 {
				t.Errorf("keys queued while the reconcile runs = %v, want none", q.added)
			}
			c.Versions.Wrote("default/m", "5", input)
			if got, _, _ := c.InFlight.end("default/m"); got != tc.again {
				t.Errorf("queued again once the reconcile ended = %v, want %v", got, tc.again)
			}
			h.OnUpdate(input, obj("6", 1))
			if len(q.added) != 1 {
				t.Errorf("keys queued by a change after the reconcile = %v, want one", q.added)
			}
		})
	}
}
