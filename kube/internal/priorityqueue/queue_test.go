package priorityqueue

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// drain takes every waiting key, in the order Get hands them out, marking
// each done.
func drain(t *testing.T, q *Queue) []Item {
	t.Helper()
	var out []Item
	for q.Len() > 0 {
		it, shutdown := q.Get()
		if shutdown {
			t.Fatal("Get reported shutdown with keys waiting")
		}
		q.Done(it.Key)
		out = append(out, it)
	}
	return out
}

func keys(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Key)
	}
	return out
}

func newTestQueue(t *testing.T) *Queue {
	t.Helper()
	q := New(Config{Name: "test"})
	t.Cleanup(q.ShutDown)
	return q
}

func TestANormalKeyGoesAheadOfTheLowKeysFirstInFirstOutWithinEach(t *testing.T) {
	q := newTestQueue(t)
	for _, k := range []string{"a", "b", "c"} {
		q.Add(k, Low, time.Time{})
	}
	q.Add("x", Normal, time.Time{})
	q.Add("d", Low, time.Time{})
	q.Add("y", Normal, time.Time{})
	got := drain(t, q)
	if want := []string{"x", "y", "a", "b", "c", "d"}; !slices.Equal(keys(got), want) {
		t.Errorf("handed out %v, want %v", keys(got), want)
	}
	for _, it := range got {
		want := Low
		if it.Key == "x" || it.Key == "y" {
			want = Normal
		}
		if it.Priority != want {
			t.Errorf("%s handed out at %s, want %s", it.Key, it.Priority, want)
		}
	}
}

func TestALowKeyMovesUpOnceToTheBackOfTheNormalLine(t *testing.T) {
	q := newTestQueue(t)
	for _, k := range []string{"a", "b", "c", "d"} {
		q.Add(k, Low, time.Time{})
	}
	q.Add("x", Normal, time.Time{})
	// c moves up behind x; adding it again, at either priority, neither
	// queues it twice nor moves it again.
	q.Add("c", Normal, time.Time{})
	q.Add("y", Normal, time.Time{})
	q.Add("c", Normal, time.Time{})
	q.Add("c", Low, time.Time{})
	q.Add("x", Low, time.Time{})
	if got := keys(drain(t, q)); !slices.Equal(got, []string{"x", "c", "y", "a", "b", "d"}) {
		t.Errorf("handed out %v, want x, c, y, then a, b and d", got)
	}
}

func TestAKeyAddedWhileAWorkerHasItWaitsForDoneAtTheHighestPriorityOfItsAdds(t *testing.T) {
	q := newTestQueue(t)
	q.Add("k", Low, time.Time{})
	q.Add("a", Low, time.Time{})
	it, _ := q.Get()
	if it.Key != "k" {
		t.Fatalf("took %s, want k", it.Key)
	}
	q.Add("k", Low, time.Time{})
	q.Add("k", Normal, time.Time{})
	q.Add("k", Low, time.Time{})
	if q.Len() != 1 {
		t.Fatalf("%d keys wait while a worker has k, want 1, a: k waits for Done", q.Len())
	}
	q.Done("k")
	got := drain(t, q)
	if !slices.Equal(keys(got), []string{"k", "a"}) || got[0].Priority != Normal {
		t.Errorf("after Done, handed out %v (k at %s), want k at normal, then a", keys(got), got[0].Priority)
	}
}

func TestAKeyCarriesItsOldestChangeUntilAWorkerTakesIt(t *testing.T) {
	q := newTestQueue(t)
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	q.Add("k", Normal, t0.Add(2*time.Second))
	q.Add("k", Normal, t0)
	q.Add("k", Normal, t0.Add(time.Second))
	q.Add("k", Low, t0.Add(-time.Hour)) // a Low add is for no change
	it, _ := q.Get()
	if !it.Changed.Equal(t0) {
		t.Errorf("changed = %v, want the oldest, %v", it.Changed, t0)
	}
	// Not handled: given back, it goes with the next take, unless an
	// older one comes.
	q.Restamp("k", it.Changed)
	q.Add("k", Normal, t0.Add(5*time.Second))
	q.Done("k")
	it, _ = q.Get()
	if !it.Changed.Equal(t0) {
		t.Errorf("changed after Restamp = %v, want %v", it.Changed, t0)
	}
	q.Done("k")
	q.Add("k", Low, time.Time{})
	if it, _ := q.Get(); !it.Changed.IsZero() {
		t.Errorf("changed of a key no change queued since its last take = %v, want zero", it.Changed)
	}
}

// At the start of a term, the keys that have waited at Normal for longer
// than keep are a former leader's: they join the Low line in the order
// they came; those queued since stay.
func TestLeadMovesTheOlderNormalKeysDownInTheOrderTheyCame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestQueue(t)
		start := time.Now()
		q.Add("old-low-1", Low, time.Time{})
		time.Sleep(time.Second)
		q.Add("old-normal", Normal, time.Now())
		time.Sleep(time.Second)
		q.Add("old-low-2", Low, time.Time{})
		time.Sleep(20 * time.Second)
		q.Add("new-normal", Normal, time.Now())
		q.Add("new-low", Low, time.Time{})
		q.Lead(time.Now(), 15*time.Second)
		got := drain(t, q)
		want := []string{"new-normal", "old-low-1", "old-normal", "old-low-2", "new-low"}
		if !slices.Equal(keys(got), want) {
			t.Fatalf("handed out %v, want %v", keys(got), want)
		}
		if got[0].Changed.IsZero() {
			t.Error("new-normal lost its change's time")
		}
		if !got[2].Changed.IsZero() || got[2].Priority != Low {
			t.Errorf("old-normal handed out at %s, changed %v; want at low, its change a former leader's (%v)", got[2].Priority, got[2].Changed, start.Add(time.Second))
		}
	})
}

func TestOldestWaitIsByPriorityFromTheStartOfTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		reported := map[Priority][]time.Duration{}
		q := New(Config{Name: "test", MetricsProvider: noopProvider{}, OldestWait: func(p Priority, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			reported[p] = append(reported[p], d)
		}})
		q.Add("a", Low, time.Time{})
		time.Sleep(10 * time.Second)
		if n, l := q.OldestWait(time.Now()); n != 0 || l != 0 {
			t.Errorf("outside a term, oldest waits = %v, %v, want 0 and 0", n, l)
		}
		q.Lead(time.Now(), time.Minute)
		time.Sleep(3 * time.Second)
		q.Add("x", Normal, time.Now())
		time.Sleep(2 * time.Second)
		if n, l := q.OldestWait(time.Now()); n != 2*time.Second || l != 5*time.Second {
			t.Errorf("oldest waits = %v at normal, %v at low; want 2s (x's) and 5s (a's, from the term's start)", n, l)
		}
		// The queue reports them every 500ms, as it sets the work in flight.
		synctest.Wait()
		mu.Lock()
		last := reported[Normal][len(reported[Normal])-1]
		lastLow := reported[Low][len(reported[Low])-1]
		mu.Unlock()
		if last != 2*time.Second || lastLow != 5*time.Second {
			t.Errorf("last reported = %v at normal, %v at low; want 2s and 5s", last, lastLow)
		}
		q.ShutDown()
		mu.Lock()
		defer mu.Unlock()
		if reported[Normal][len(reported[Normal])-1] != 0 || reported[Low][len(reported[Low])-1] != 0 {
			t.Errorf("after ShutDown, last reported = %v, %v, want 0 and 0", reported[Normal][len(reported[Normal])-1], reported[Low][len(reported[Low])-1])
		}
	})
}

// ShutDown is client-go's: adds are ignored, and Get hands out what waits
// (a controller that leaves its backlog stops taking keys itself), then
// reports shutdown.
func TestShutDownIgnoresAddsAndGetStillHandsOutWhatWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{Name: "test", MetricsProvider: noopProvider{}})
		q.Add("a", Low, time.Time{})
		q.Add("x", Normal, time.Time{})
		q.ShutDown()
		q.Add("y", Normal, time.Time{})
		got := drain(t, q)
		if !slices.Equal(keys(got), []string{"x", "a"}) {
			t.Errorf("handed out %v after ShutDown, want x and a", keys(got))
		}
		if _, shutdown := q.Get(); !shutdown {
			t.Error("Get on an empty queue after ShutDown didn't report shutdown")
		}
		// The queue's goroutine stopped with ShutDown: synctest's bubble
		// ends with none left.
	})
}

type noopProvider struct{}

func (noopProvider) NewDepthMetric(string) workqueue.GaugeMetric       { return noop{} }
func (noopProvider) NewAddsMetric(string) workqueue.CounterMetric      { return noop{} }
func (noopProvider) NewLatencyMetric(string) workqueue.HistogramMetric { return noop{} }
func (noopProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return noop{}
}
func (noopProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (noopProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (noopProvider) NewRetriesMetric(string) workqueue.CounterMetric { return noop{} }

type noop struct{}

func (noop) Inc()            {}
func (noop) Dec()            {}
func (noop) Set(float64)     {}
func (noop) Observe(float64) {}

// At Normal, namespaces take turns: a change in one namespace waits behind
// at most one key of each other namespace, not behind another's burst;
// within a namespace, and at Low, first in, first out.
func TestNamespacesTakeTurnsAtNormal(t *testing.T) {
	q := newTestQueue(t)
	q.Add("z/backlog", Low, time.Time{})
	for _, k := range []string{"a/1", "a/2", "a/3", "a/4", "a/5"} {
		q.Add(k, Normal, time.Time{})
	}
	q.Add("b/1", Normal, time.Time{})
	q.Add("a/6", Normal, time.Time{})
	q.Add("cluster-scoped", Normal, time.Time{})
	q.Add("b/2", Normal, time.Time{})
	want := []string{"a/1", "b/1", "cluster-scoped", "a/2", "b/2", "a/3", "a/4", "a/5", "a/6", "z/backlog"}
	if got := keys(drain(t, q)); !slices.Equal(got, want) {
		t.Errorf("handed out %v, want %v", got, want)
	}
}

// A key that moves up from Low takes its place in its namespace's line,
// and a namespace whose keys were all handed out takes its next turn after
// the others.
func TestAKeyMovedUpJoinsItsNamespacesTurn(t *testing.T) {
	q := newTestQueue(t)
	q.Add("b/9", Low, time.Time{})
	for _, k := range []string{"a/1", "a/2", "a/3"} {
		q.Add(k, Normal, time.Time{})
	}
	q.Add("b/9", Normal, time.Time{})
	it, _ := q.Get()
	q.Done(it.Key)
	q.Add("c/1", Normal, time.Time{})
	want := []string{"b/9", "a/2", "c/1", "a/3"}
	if got := keys(drain(t, q)); it.Key != "a/1" || !slices.Equal(got, want) {
		t.Errorf("handed out %s then %v, want a/1 then %v", it.Key, got, want)
	}
}

// OldestWait at Normal is the oldest key's of any namespace, not that of
// the namespace whose turn is next; and Lead moves the older Normal keys
// of every namespace down, in the order they came in.
func TestOldestWaitAndLeadSeeEveryNamespace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestQueue(t)
		q.Lead(time.Now(), time.Hour)
		q.Add("a/1", Normal, time.Now())
		time.Sleep(time.Second)
		q.Add("a/2", Normal, time.Now())
		time.Sleep(time.Second)
		q.Add("b/1", Normal, time.Now())
		q.Add("x/low", Low, time.Time{})
		time.Sleep(time.Second)
		if n, _ := q.OldestWait(time.Now()); n != 3*time.Second {
			t.Errorf("OldestWait at Normal = %s, want 3s, a/1's", n)
		}
		it, _ := q.Get()
		q.Done(it.Key)
		// b's turn is next, but a/2 has waited longer than b/1.
		if n, _ := q.OldestWait(time.Now()); it.Key != "a/1" || n != 2*time.Second {
			t.Errorf("took %s, and then OldestWait at Normal = %s; want a/1, then 2s, a/2's", it.Key, n)
		}
		q.Add("a/1", Normal, time.Now())
		time.Sleep(20 * time.Second)
		q.Add("b/2", Normal, time.Now())
		q.Lead(time.Now(), 15*time.Second)
		want := []string{"b/2", "a/2", "b/1", "x/low", "a/1"}
		if got := keys(drain(t, q)); !slices.Equal(got, want) {
			t.Errorf("handed out %v, want %v", got, want)
		}
	})
}

// A change in one namespace behind a burst of 10,000 changes in another,
// 4 workers taking 10ms a key: with the turns, it is taken within one
// key's time of being added; first in, first out, it would wait 25s, the
// burst's.
func TestABurstInOneNamespaceHoldsBackAChangeInAnotherByOneKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestQueue(t)
		for i := range 10000 {
			q.Add("burst/"+strconv.Itoa(i), Normal, time.Now())
		}
		var took sync.Map // key: when a worker took it
		var workers sync.WaitGroup
		for range 4 {
			workers.Go(func() {
				for {
					it, shutdown := q.Get()
					if shutdown {
						return
					}
					took.Store(it.Key, time.Now())
					time.Sleep(10 * time.Millisecond)
					q.Done(it.Key)
				}
			})
		}
		time.Sleep(time.Second)
		added := time.Now()
		q.Add("other/change", Normal, time.Now())
		time.Sleep(time.Minute)
		q.ShutDown()
		workers.Wait()
		at, ok := took.Load("other/change")
		if !ok {
			t.Fatal("the other namespace's change was never taken")
		}
		if wait := at.(time.Time).Sub(added); wait > 10*time.Millisecond {
			t.Errorf("the other namespace's change waited %s behind the burst, want at most one key's 10ms", wait)
		}
	})
}

// A Low key waits no longer than LowMaxWait, however steadily Normal keys
// come (issue 35, point 5: before, a Low key waited for as long as Normal
// keys kept coming, here forever). One worker takes a key every 100ms
// while a Normal key comes every 50ms, faster than it, and a Low key every
// second: each Low key is taken within LowMaxWait and the take after it,
// the Normal keys still have every other take at least, and the oldest
// wait at Low that the queue reports never passes the bound.
func TestALowKeyWaitsNoLongerThanLowMaxWaitUnderASteadyStreamOfNormalKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			maxWait = 10 * time.Second
			take    = 100 * time.Millisecond
			bound   = maxWait + 2*take
			run     = time.Minute
		)
		var mu sync.Mutex
		var reportedLow []time.Duration
		q := New(Config{Name: "test", MetricsProvider: noopProvider{}, LowMaxWait: maxWait, OldestWait: func(p Priority, d time.Duration) {
			if p == Low {
				mu.Lock()
				reportedLow = append(reportedLow, d)
				mu.Unlock()
			}
		}})
		start := time.Now()
		q.Lead(start, time.Minute)

		lowAdded := map[string]time.Time{}
		go addEvery(q, Normal, take/2, start.Add(run), nil)
		go addEvery(q, Low, time.Second, start.Add(run-bound), func(key string) {
			mu.Lock()
			lowAdded[key] = time.Now()
			mu.Unlock()
		})
		lowTaken := map[string]time.Time{}
		var normals, lows int
		for time.Since(start) < run {
			it, _ := q.Get()
			if it.Priority == Low {
				lowTaken[it.Key] = time.Now()
				lows++
			} else {
				normals++
			}
			time.Sleep(take)
			q.Done(it.Key)
		}
		synctest.Wait()
		q.ShutDown()

		mu.Lock()
		defer mu.Unlock()
		var longest time.Duration
		for key, added := range lowAdded {
			taken, ok := lowTaken[key]
			if !ok {
				t.Errorf("%s, added %s into the run, was never taken", key, added.Sub(start))
				continue
			}
			if wait := taken.Sub(added); wait > bound {
				t.Errorf("%s waited %s, want at most %s", key, wait, bound)
			}
			longest = max(longest, taken.Sub(added))
		}
		t.Logf("%d Low keys, the longest wait %s; %d Normal keys taken", len(lowAdded), longest, normals)
		if normals < lows {
			t.Errorf("%d Normal keys taken and %d Low keys, want Normal keys to have every other take at least", normals, lows)
		}
		if len(reportedLow) == 0 {
			t.Fatal("no oldest wait at Low reported")
		}
		if most := slices.Max(reportedLow); most > bound || most < maxWait-time.Second {
			t.Errorf("the longest oldest wait at Low reported = %s, want between %s and %s", most, maxWait-time.Second, bound)
		}
	})
}

// addEvery adds a new key at p every d until end, calling added, if set,
// with each before its add.
func addEvery(q *Queue, p Priority, d time.Duration, end time.Time, added func(key string)) {
	for i := 0; time.Now().Before(end); i++ {
		key := p.String() + "/" + strconv.Itoa(i)
		if added != nil {
			added(key)
		}
		q.Add(key, p, time.Now())
		time.Sleep(d)
	}
}

// Low keys that waited LowMaxWait go ahead of the Normal keys every other
// take, so neither priority waits behind the other's backlog: a cold
// start's backlog past its bound doesn't hold back a change by the
// backlog, nor a steady stream of changes the backlog.
func TestOverdueLowKeysTakeEveryOtherTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{Name: "test", LowMaxWait: time.Second})
		t.Cleanup(q.ShutDown)
		q.Lead(time.Now(), time.Minute)
		for _, k := range []string{"l1", "l2", "l3"} {
			q.Add(k, Low, time.Time{})
		}
		time.Sleep(500 * time.Millisecond)
		for _, k := range []string{"n1", "n2", "n3", "n4"} {
			q.Add(k, Normal, time.Now())
		}
		if got, want := keys(drain(t, q)), []string{"n1", "n2", "n3", "n4", "l1", "l2", "l3"}; !slices.Equal(got, want) {
			t.Errorf("before the bound, took %v, want %v", got, want)
		}
		for _, k := range []string{"l1", "l2", "l3"} {
			q.Add(k, Low, time.Time{})
		}
		time.Sleep(time.Second)
		for _, k := range []string{"n1", "n2", "n3", "n4"} {
			q.Add(k, Normal, time.Now())
		}
		if got, want := keys(drain(t, q)), []string{"l1", "n1", "l2", "n2", "l3", "n3", "n4"}; !slices.Equal(got, want) {
			t.Errorf("past the bound, took %v, want %v", got, want)
		}
	})
}
