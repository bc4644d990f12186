package apptest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/example/internal/apptest"
)

// A recorder is a testing.TB that keeps what would fail the test: a check
// under test runs on it, in a goroutine of its own, so its Fatalf ends only
// that goroutine.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// check runs f on a recorder of t's, and returns what failed it.
func check(t *testing.T, f func(testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failures
}

// idle is a Service that serves until its signal.
type idle struct{}

func (idle) Serve(ctx context.Context) error { <-ctx.Done(); return nil }
func (idle) Shutdown(context.Context) error  { return nil }

func TestStopPassesAnAppThatExits0(t *testing.T) {
	host := humustest.NewHost()
	p := humustest.Start(t, host.Host(), func(context.Context, *humus.Setup) ([]humus.Service, error) {
		return []humus.Service{idle{}}, nil
	})
	if got := check(t, func(t testing.TB) { apptest.Stop(t, p, host) }); len(got) != 0 {
		t.Errorf("failures %q, want none", got)
	}
	select {
	case <-p.Done():
	default:
		t.Error("Stop returned before the App exited")
	}
}

func TestStopFailsAnAppThatExits1AndShowsItsStderr(t *testing.T) {
	host := humustest.NewHost()
	p := humustest.Start(t, host.Host(), func(context.Context, *humus.Setup) ([]humus.Service, error) {
		return nil, errors.New("no settings")
	})
	got := check(t, func(t testing.TB) { apptest.Stop(t, p, host) })
	if len(got) != 1 || !strings.HasPrefix(got[0], "exit code 1, want 0; stderr:\n") || !strings.Contains(got[0], "no settings") {
		t.Errorf("failures %q, want exit code 1 with the stderr that says why", got)
	}
}

func TestLeaseReleased(t *testing.T) {
	lease := func(holder *string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ctrl"},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: holder},
		}
	}
	empty, pod := "", "ctrl-0"
	for _, tc := range []struct {
		name  string
		lease *coordinationv1.Lease // nil for none
		want  []string
	}{
		{"no holder", lease(nil), nil},
		{"an empty holder", lease(&empty), nil},
		{"still held", lease(&pod), []string{`the Lease's holder = "ctrl-0" after exit, want none: the next leader takes over at once`}},
		{"no Lease", nil, []string{`the Lease: leases.coordination.k8s.io "ctrl" not found`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := kubefake.NewClientset()
			if tc.lease != nil {
				kc = kubefake.NewClientset(tc.lease)
			}
			got := check(t, func(t testing.TB) { apptest.LeaseReleased(t, kc, "ns", "ctrl") })
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("failures %q, want %q", got, tc.want)
			}
		})
	}
}
