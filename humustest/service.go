package humustest

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus"
)

// ServiceOption configures TestService.
type ServiceOption func(*serviceTest)

type serviceTest struct {
	during  func(ctx context.Context)
	timeout time.Duration
}

// During runs f while the Service serves, before TestService stops it. f's
// ctx is done if Serve returns first.
func During(f func(ctx context.Context)) ServiceOption {
	return func(s *serviceTest) { s.during = f }
}

// Within bounds how long Serve and Shutdown each have to return once the
// Service is stopped, overriding the default of 10s.
func Within(d time.Duration) ServiceOption {
	return func(s *serviceTest) { s.timeout = d }
}

// TestService checks that svc behaves as a humus.Service must, and reports
// every violation on t:
//
//   - Serve keeps serving until its context is cancelled (a Serve that
//     returns before, with or without an error, is a failure);
//   - once it is cancelled and Shutdown is called, as Run does, Serve returns
//     nil and Shutdown returns nil, each within the bound (see Within);
//   - no goroutine started while svc ran outlives Serve and Shutdown, after
//     a grace of the same bound for goroutines that are on their way out.
//
// Between starting and stopping it, TestService runs During's function, if
// given; without one, svc is stopped as soon as Serve has been called. Its
// goroutine check sees every goroutine of the process, so a test that calls
// it must not run in parallel with others. Inside a testing/synctest
// bubble, its waits are on the bubble's fake clock.
func TestService(t testing.TB, svc humus.Service, opts ...ServiceOption) {
	t.Helper()
	st := serviceTest{timeout: 10 * time.Second}
	for _, opt := range opts {
		opt(&st)
	}
	before := goroutines()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx) }()

	// During's function runs until it returns, or until Serve does.
	var early error
	returnedEarly := false
	duringCtx, stopDuring := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case err := <-served:
			early, returnedEarly = err, true
			stopDuring()
		case <-duringCtx.Done():
		}
	}()
	if st.during != nil {
		st.during(duringCtx)
	}
	stopDuring()
	<-watched
	if returnedEarly {
		t.Errorf("humustest: Serve returned before its context was cancelled: %v", early)
	}
	cancel()

	shutCtx, cancelShut := context.WithTimeout(context.Background(), st.timeout)
	defer cancelShut()
	shut := make(chan error, 1)
	go func() { shut <- svc.Shutdown(shutCtx) }()
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("humustest: Shutdown returned %v, want nil", err)
		}
	case <-time.After(st.timeout):
		t.Errorf("humustest: Shutdown didn't return within %s", st.timeout)
		return
	}
	if !returnedEarly {
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("humustest: Serve returned %v once cancelled, want nil", err)
			}
		case <-time.After(st.timeout):
			t.Errorf("humustest: Serve didn't return within %s of its context being cancelled", st.timeout)
			return
		}
	}

	if leaked := leakedSince(before, st.timeout); len(leaked) > 0 {
		t.Errorf("humustest: %d goroutine(s) outlived the Service:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}

// goroutines returns the stacks of the process's goroutines, by id.
func goroutines() map[int]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := map[int]string{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		header, _, _ := strings.Cut(string(g), " [")
		id, err := strconv.Atoi(strings.TrimPrefix(header, "goroutine "))
		if err == nil {
			all[id] = string(g)
		}
	}
	return all
}

// leakedSince waits up to d for every goroutine not in before to end, and
// returns the stacks of those that didn't.
func leakedSince(before map[int]string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		var leaked []string
		for id, stack := range goroutines() {
			if _, ok := before[id]; !ok && !harmless(stack) {
				leaked = append(leaked, stack)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// harmless is a goroutine that, once started, lives as long as the
// process does by design: os/signal's, which the first signal.Notify starts.
func harmless(stack string) bool {
	return strings.Contains(stack, "os/signal.loop")
}
