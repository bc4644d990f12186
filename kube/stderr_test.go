package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus/humustest"
)

// stderrHelperEnv marks the child process TestNothingReachesTheRealStderr
// starts.
const stderrHelperEnv = "HUMUS_KUBE_STDERR_HELPER"

// TestNothingReachesTheRealStderr runs a controller in a child process,
// this test binary run again, and reads that process's real stderr: klog's
// global logger writes there, so a code path of client-go's that finds no
// logger in its context would show.
func TestNothingReachesTheRealStderr(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStderrHelperProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), stderrHelperEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Errorf("the child process: %v\nstdout:\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "--- PASS: TestStderrHelperProcess") || !strings.Contains(stdout.String(), stderrHelperRan) {
		t.Errorf("the child process didn't run the controller; stdout:\n%s", stdout.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("the child process wrote %d bytes to its real stderr, want none:\n%s", stderr.Len(), stderr.String())
	}
}

const stderrHelperRan = "stderr helper: ran the controller"

// TestStderrHelperProcess is the child process of
// TestNothingReachesTheRealStderr, and does nothing in any other process.
// It runs a controller on the fakes through leader election, its
// informers, a reflector's failed list, a failed Lease renewal, reconciles
// that succeed, fail and panic, a failed status apply, and shutdown.
//
// It runs in real time, as a process does, not in a synctest bubble: in a
// bubble, whose clock starts in 2000, the first utilruntime.HandleError,
// such as the reflector's failed list, sleeps until the real time its
// package was initialised at, decades of the bubble's time, since
// apimachinery's rudimentaryErrorBackoff compares the two clocks.
func TestStderrHelperProcess(t *testing.T) {
	if os.Getenv(stderrHelperEnv) != "1" {
		t.Skip("the child process of TestNothingReachesTheRealStderr")
	}
	tel := humustest.NewTelemetry()
	f := newFakeCluster(t, listKinds, append(outcomeObjects(), cacheObject("default", "rejected", 2))...)
	updates := failSomeRequests(f)
	var calls counter
	stop := served(t, observedController(t, f, tel, stderrHelperSettings(), stderrHelperReconciler(tel, &calls), Owns(deployments)))

	// Until it has done everything it should, or a minute has passed.
	happened := func() error { return stderrHelperRanAll(tel, &calls, updates) }
	deadline := time.Now().Add(time.Minute)
	for happened() != nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
	if err := happened(); err != nil {
		bodies := map[string]int{}
		for _, b := range recordBodies(tel) {
			bodies[b]++
		}
		t.Fatalf("the child didn't run what it should:\n%v\nrecords, by body: %v", err, bodies)
	}
	if h := holder(f.Lease(t, "kube-system", "memcached-controller")); h != "" {
		t.Errorf("the Lease's holder after shutdown = %q, want none", h)
	}
	fmt.Printf("%s: %d records, %d spans\n", stderrHelperRan, len(tel.Records()), len(tel.Spans()))
}

// failSomeRequests makes f fail the owned resource's informer's first
// list (after Serve's check), one renewal of the Lease, and every status
// apply of the object named rejected. It returns the count of the Lease's
// updates.
func failSomeRequests(f *fakeCluster) *atomic.Int32 {
	// The reflector retries the failed list, and reports the error.
	var listed atomic.Int32
	f.Meta.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		if listed.Add(1) == 2 {
			return true, nil, errors.New("the server is currently unable to handle the request")
		}
		return false, nil, nil
	})
	// One renewal of the Lease fails; the next succeeds.
	updates := new(atomic.Int32)
	f.Kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if updates.Add(1) == 3 {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	f.Dyn.PrependReactor("patch", "memcacheds", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if pa := a.(k8stesting.PatchAction); pa.GetName() == "rejected" && pa.GetSubresource() == "status" {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	return updates
}

// stderrHelperReconciler reports rejected's size as ready, and reconciles
// every other object as outcomes does.
func stderrHelperReconciler(tel *humustest.Telemetry, calls *counter) ReconcilerFunc[cacheSpec, cacheStatus] {
	ready, outcome := readyReplicas(calls), outcomes(tel, calls)
	return func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
		if m.Name == "rejected" {
			return ready(ctx, m)
		}
		return outcome(ctx, m)
	}
}

// stderrHelperSettings are two workers, quick retries, and a Lease renewed
// often.
func stderrHelperSettings() Settings {
	s := testSettings()
	s.Workers = 2
	s.RetryBaseDelay, s.RetryMaxDelay = 50*time.Millisecond, 200*time.Millisecond
	// Short enough to renew often, long enough that a loaded machine,
	// under the race detector, doesn't stall past the renew deadline: the
	// replica stops leading the moment it can't prove the Lease.
	s.LeaderElection.LeaseDuration = 6 * time.Second
	s.LeaderElection.RenewDeadline = 4 * time.Second
	s.LeaderElection.RetryPeriod = 100 * time.Millisecond
	return s
}

// stderrHelperRanAll is nil once the helper's controller has done all it
// should: taken the Lease, failed, retried and panicked reconciles,
// reconciled ok, seen a failed list, and renewed the Lease after its
// failed renewal.
func stderrHelperRanAll(tel *humustest.Telemetry, calls *counter, updates *atomic.Int32) error {
	var errs []error
	for _, body := range []string{"Successfully acquired lease", "reconcile failed", "reconcile panicked", "Failed to watch"} {
		if len(recordsWithBody(tel, body)) == 0 {
			errs = append(errs, fmt.Errorf("no record %q", body))
		}
	}
	if n := calls.Get("rejected") + calls.Get("fail"); n < 6 {
		errs = append(errs, fmt.Errorf("%d failed reconciles, want retries", n))
	}
	if calls.Get("ok") == 0 {
		errs = append(errs, errors.New("ok wasn't reconciled"))
	}
	if n := updates.Load(); n < 5 {
		errs = append(errs, fmt.Errorf("%d updates of the Lease, want renewals after the failed one", n))
	}
	return errors.Join(errs...)
}
