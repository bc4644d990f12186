package control

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
)

// failingLists answers the first n lists of the controller's resource with
// err, or every list when n is negative, and counts them all.
type failingLists struct {
	mu    sync.Mutex
	n     int
	err   error
	lists int
}

func (l *failingLists) react(k8stesting.Action) (bool, runtime.Object, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lists++
	if l.n < 0 || l.lists <= l.n {
		return true, nil, l.err
	}
	return false, nil, nil
}

func (l *failingLists) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lists
}

// listsFailing is a controller of one Memcached, m, on fakes whose first
// n lists of Memcacheds (every one, when n is negative) answer err: lists
// counts them, and calls the reconciles.
func listsFailing(t *testing.T, n int, err error) (ctrl *Controller, lists *failingLists, calls *counter) {
	t.Helper()
	f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
	lists = &failingLists{n: n, err: err}
	f.Dyn.PrependReactor("list", "memcacheds", lists.react)
	calls = &counter{}
	return newTestController(t, f, testSettings(), readyReplicas(calls)), lists, calls
}

const listingCaches = "kube: listing cache.example.com/v1alpha1, Resource=memcacheds: "

var (
	errRefused  = errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	unavailable = apierrors.NewServiceUnavailable("the API server is shutting down")
	forbidden   = apierrors.NewForbidden(cachesGVR.GroupResource(), "", errors.New("the ServiceAccount default/memcached may not list it"))
	notServed   = apierrors.NewNotFound(cachesGVR.GroupResource(), "")
)

func TestServeRetriesATransientErrorAtStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"ServiceUnavailable", unavailable},
		{"TooManyRequests", apierrors.NewTooManyRequests("slow down", 1)},
		{"ConnectionRefused", errRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctrl, lists, calls := listsFailing(t, 3, tc.err)
				stop := served(t, ctrl)

				if returned, err := awaitServe(ctrl, stop, 30*time.Second); returned {
					t.Fatalf("Serve = %v at start, want the transient error retried", err)
				}
				synctest.Wait()
				if got := lists.count(); got < 4 {
					t.Errorf("lists = %d, want 3 that failed and then one that didn't", got)
				}
				if err := ctrl.Ready.Healthy(t.Context()); err != nil {
					t.Errorf("Synced once the list answered: %v", err)
				}
				if got := calls.Get("m"); got == 0 {
					t.Error("the object wasn't reconciled")
				}
				if err := stop(); err != nil {
					t.Errorf("Serve, cancelled = %v, want nil", err)
				}
			})
		})
	}
}

func TestATransientErrorOutlastingStartRetryEndsServe(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"ServiceUnavailable", unavailable},
		{"ConnectionRefused", errRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctrl, lists, calls := listsFailing(t, -1, tc.err)
				start := time.Now()
				stop := served(t, ctrl)

				returned, err := awaitServe(ctrl, stop, 2*time.Minute)
				if !returned {
					t.Fatalf("Serve didn't return within 2 minutes of a transient error; Serve, cancelled = %v", stop())
				}
				took := time.Since(start)
				// The last retry is the last whose backoff ends within
				// startRetry: no sooner than a maximal backoff before it.
				if took <= startRetry-retryMax || took > startRetry {
					t.Errorf("Serve returned after %v, want after about startRetry (%v), retrying the error meanwhile", took, startRetry)
				}
				if err == nil || !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), listingCaches) {
					t.Errorf("Serve = %v, want %q followed by the error, and wrapping it", err, listingCaches)
				}
				if got := lists.count(); got < 5 {
					t.Errorf("lists = %d, want the transient error retried with backoff", got)
				}
				if got := calls.Get("m"); got != 0 {
					t.Errorf("reconciles = %d, want none", got)
				}
			})
		})
	}
}

func TestServeEndsAtOnceWhenTheResourceIsNotServedOrForbidden(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"NotFound", notServed},
		{"Forbidden", forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctrl, lists, _ := listsFailing(t, -1, tc.err)
				start := time.Now()
				err := ctrl.Serve(t.Context())
				if took := time.Since(start); took != 0 {
					t.Errorf("Serve returned after %v, want at once: no retry mends it", took)
				}
				if err == nil || !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), listingCaches) {
					t.Errorf("Serve = %v, want %q followed by the error, and wrapping it", err, listingCaches)
				}
				if got := lists.count(); got != 1 {
					t.Errorf("lists = %d, want 1", got)
				}
			})
		})
	}
}

func TestServeEndsWhenAnOwnedResourceIsNotServedOrForbidden(t *testing.T) {
	deploymentsGR := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"NotFound", apierrors.NewNotFound(deploymentsGR, "")},
		{"Forbidden", apierrors.NewForbidden(deploymentsGR, "", errors.New("the ServiceAccount default/memcached may not list it"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Should Serve start the informers anyway, the owned one's list
			// error reaches HandleError: the test then fails, not hangs.
			resetErrorBackoff(t)
			synctest.Test(t, func(t *testing.T) {
				f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
				f.Meta.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.err
				})
				var calls counter
				ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls), owning(deployments, ""))
				start := time.Now()
				stop := served(t, ctrl)

				returned, err := awaitServe(ctrl, stop, 2*time.Minute)
				if !returned {
					t.Fatalf("Serve didn't return within 2 minutes; Serve, cancelled = %v", stop())
				}
				if took := time.Since(start); took != 0 {
					t.Errorf("Serve returned after %v, want at once", took)
				}
				const want = "kube: listing apps/v1, Resource=deployments: "
				if err == nil || !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), want) {
					t.Errorf("Serve = %v, want %q followed by the error, and wrapping it", err, want)
				}
				if got := calls.Get("m"); got != 0 {
					t.Errorf("reconciles = %d, want none", got)
				}
			})
		})
	}
}

// resetErrorBackoff readies apimachinery's global error backoff for a test
// whose bubble reaches utilruntime.HandleError, as client-go's watch error
// handler does. The backoff sleeps for however long time went backwards
// since its last error: made with the real clock, it would hold the first
// error in a bubble, whose clock starts in 2000, for decades of fake time.
// Handled once in a bubble of its own, where those decades pass at once,
// the last error is at the time every bubble starts at.
func resetErrorBackoff(t *testing.T) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		ctx := klog.NewContext(t.Context(), logr.Discard())
		utilruntime.HandleErrorWithContext(ctx, nil, "resetting the error backoff")
	})
}

// outage makes the controller's resource stop being served, as when its
// CRD is deleted: while down, every list and watch of it answers NotFound,
// and going down ends the watches open.
type outage struct {
	f *fakeCluster

	mu      sync.Mutex
	down    bool
	refused int // lists and watches answered NotFound
	watches []watch.Interface
}

func newOutage(f *fakeCluster) *outage {
	o := &outage{f: f}
	f.Dyn.PrependReactor("list", "memcacheds", func(k8stesting.Action) (bool, runtime.Object, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.down {
			o.refused++
			return true, nil, notServed
		}
		return false, nil, nil
	})
	f.Dyn.PrependWatchReactor("memcacheds", func(a k8stesting.Action) (bool, watch.Interface, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.down {
			o.refused++
			return true, nil, notServed
		}
		w, err := f.Dyn.Tracker().Watch(cachesGVR, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		o.watches = append(o.watches, w)
		return true, w, nil
	})
	return o
}

func (o *outage) begin() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = true
	for _, w := range o.watches {
		w.Stop()
	}
	o.watches = nil
}

// end serves the resource again, and returns how many lists and watches
// the outage refused.
func (o *outage) end() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = false
	return o.refused
}

func TestServeEndsWhenTheResourceStopsBeingServed(t *testing.T) {
	resetErrorBackoff(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		o := newOutage(f)
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		stop := served(t, ctrl)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if err := ctrl.Ready.Healthy(t.Context()); err != nil {
			t.Fatalf("Synced before the outage: %v", err)
		}

		start := time.Now()
		o.begin()
		if returned, err := awaitServe(ctrl, stop, UnservedGrace-time.Second); returned {
			t.Fatalf("Serve = %v after %v, want it to wait out unservedGrace (%v)", err, time.Since(start), UnservedGrace)
		}
		returned, err := awaitServe(ctrl, stop, 5*time.Second)
		if !returned {
			t.Fatalf("Serve didn't return within unservedGrace+4s of the resource no longer being served; Serve, cancelled = %v", stop())
		}
		if !apierrors.IsNotFound(err) || !strings.HasPrefix(err.Error(), listingCaches) {
			t.Errorf("Serve = %v, want %q followed by the NotFound", err, listingCaches)
		}
		if err := ctrl.Ready.Healthy(t.Context()); err == nil {
			t.Error("Synced is healthy after Serve returned")
		}
	})
}

// Rights taken away from a running controller: its list and watch of the
// resource forbidden while its watch stays open, as the API server leaves
// an open watch (RBAC is checked when a request begins). The controller
// looks again every rightsProbe, so Serve ends within rightsProbe and
// unservedGrace with the 403, and Synced goes unhealthy. Before, Serve
// ran on, Ready, until the open watch ended (5 to 10 minutes on a real
// API server; never on the fake).
func TestServeEndsWhenItsRightsAreTakenAwayWhileItsWatchIsOpen(t *testing.T) {
	resetErrorBackoff(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		var mu sync.Mutex
		forbidden := false
		denied := apierrors.NewForbidden(cachesGVR.GroupResource(), "", errors.New("the ServiceAccount may not"))
		refuse := func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if forbidden {
				return true, nil, denied
			}
			return false, nil, nil
		}
		f.Dyn.PrependReactor("list", "memcacheds", refuse)
		f.Dyn.PrependWatchReactor("memcacheds", func(a k8stesting.Action) (bool, watch.Interface, error) {
			handled, _, err := refuse(a)
			return handled, nil, err
		})
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		stop := served(t, ctrl)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if err := ctrl.Ready.Healthy(t.Context()); err != nil {
			t.Fatalf("Synced before the rights are taken away: %v", err)
		}

		mu.Lock()
		forbidden = true
		mu.Unlock()
		taken := time.Now()
		returned, err := awaitServe(ctrl, stop, RightsProbe+UnservedGrace+2*time.Second)
		if !returned {
			t.Fatalf("Serve didn't return within rightsProbe+unservedGrace+2s (%s) of its rights taken away; Serve, cancelled = %v",
				RightsProbe+UnservedGrace+2*time.Second, stop())
		}
		if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), listingCaches) {
			t.Errorf("Serve = %v after %s, want %q followed by the Forbidden", err, time.Since(taken), listingCaches)
		}
		if err := ctrl.Ready.Healthy(t.Context()); err == nil {
			t.Error("Synced is healthy after Serve returned")
		}
	})
}

// The rights probe lists one name, which the API server reads by its key,
// not going through every object of the namespace; a controller of every
// namespace names the namespace too. The controller's start lists with no
// selector, as its informers do. Each probe's watch starts from its list's
// resourceVersion: a watch without one begins with every object there is,
// which the API server makes and sends (at 100,000 objects, a watch
// cache's worth every rightsProbe) until the watch is stopped. The fake
// tracker does the same, and records each list's field selector and each
// watch's resourceVersion.
func TestTheRightsProbe(t *testing.T) {
	for _, tc := range []struct{ namespace, probe string }{
		{"", "metadata.name=humus-kube-rights-probe,metadata.namespace=default"},
		{"default", "metadata.name=humus-kube-rights-probe"},
	} {
		t.Run("namespace="+tc.namespace, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
				var mu sync.Mutex
				selectors, versions := map[string][]string{}, map[string][]string{}
				listed := func(a k8stesting.Action) (bool, runtime.Object, error) {
					mu.Lock()
					defer mu.Unlock()
					r := a.GetResource().Resource
					selectors[r] = append(selectors[r], a.(k8stesting.ListAction).GetListRestrictions().Fields.String())
					return false, nil, nil
				}
				watched := func(a k8stesting.Action) (bool, watch.Interface, error) {
					mu.Lock()
					defer mu.Unlock()
					r := a.GetResource().Resource
					versions[r] = append(versions[r], a.(k8stesting.WatchAction).GetWatchRestrictions().ResourceVersion)
					return false, nil, nil
				}
				f.Dyn.PrependReactor("list", "memcacheds", listed)
				f.Meta.PrependReactor("list", "deployments", listed)
				f.Dyn.PrependWatchReactor("memcacheds", watched)
				f.Meta.PrependWatchReactor("deployments", watched)
				settings := testSettings()
				settings.Namespace = tc.namespace
				var calls counter
				stop := served(t, newTestController(t, f, settings, readyReplicas(&calls), owning(deployments, "")))
				time.Sleep(2*RightsProbe + time.Second)
				synctest.Wait()
				if err := stop(); err != nil {
					t.Fatal(err)
				}

				mu.Lock()
				defer mu.Unlock()
				for _, r := range []string{"memcacheds", "deployments"} {
					// The start's and the informer's lists, then 2 probes'.
					got := selectors[r]
					if len(got) != 4 || got[0] != "" || got[1] != "" || got[2] != tc.probe || got[3] != tc.probe {
						t.Errorf("the lists of %s had field selectors %q, want the start's and the informer's none, then 2 probes' %q", r, got, tc.probe)
					}
					// The informer's watch, and one for each probe.
					if got := versions[r]; len(got) < 3 || slices.Contains(got, "") {
						t.Errorf("the watches of %s had resourceVersions %q, want at least 3 (the informer's and 2 probes'), none empty", r, got)
					}
				}
			})
		})
	}
}

func TestAResourceUnservedForLessThanTheGraceKeepsServing(t *testing.T) {
	resetErrorBackoff(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		o := newOutage(f)
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		stop := served(t, ctrl)
		time.Sleep(10 * time.Second)
		synctest.Wait()

		o.begin()
		time.Sleep(3 * time.Second)
		if refused := o.end(); refused < 3 {
			t.Errorf("lists and watches during the outage = %d, want it seen, and the resource listed again each second", refused)
		}
		if returned, err := awaitServe(ctrl, stop, time.Minute); returned {
			t.Fatalf("Serve = %v after a NotFound of 3s, want it to go on", err)
		}
		if err := ctrl.Ready.Healthy(t.Context()); err != nil {
			t.Errorf("Synced after the outage: %v", err)
		}
		before := calls.Get("m")
		resize(t, f, "m", 2)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := calls.Get("m"); got <= before {
			t.Errorf("reconciles after a change once served again = %d, want more than %d", got, before)
		}
		if err := stop(); err != nil {
			t.Errorf("Serve, cancelled = %v, want nil", err)
		}
	})
}

func TestServeEndsWhenTheResourceMayBeListedButNotWatched(t *testing.T) {
	resetErrorBackoff(t)
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		f.Dyn.PrependWatchReactor("memcacheds", func(k8stesting.Action) (bool, watch.Interface, error) {
			return true, nil, apierrors.NewForbidden(cachesGVR.GroupResource(), "", errors.New("watch not allowed"))
		})
		var calls counter
		ctrl := newTestController(t, f, testSettings(), readyReplicas(&calls))
		stop := served(t, ctrl)
		returned, err := awaitServe(ctrl, stop, UnservedGrace+5*time.Second)
		if !returned {
			t.Fatalf("Serve didn't return within unservedGrace+5s of every watch being forbidden; Serve, cancelled = %v", stop())
		}
		const want = "kube: watching cache.example.com/v1alpha1, Resource=memcacheds: "
		if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Serve = %v, want %q followed by the Forbidden", err, want)
		}
	})
}
