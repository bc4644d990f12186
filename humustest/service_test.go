package humustest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/humustest"
)

// recorder is a testing.TB that keeps what TestService reports, in place of
// failing the test.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) reports() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs
}

// leakyService starts a goroutine in Serve that nobody stops.
type leakyService struct{ release chan struct{} }

func (s leakyService) Serve(ctx context.Context) error {
	go s.forgotten()
	<-ctx.Done()
	return nil
}

func (s leakyService) forgotten() { <-s.release }

func (leakyService) Shutdown(context.Context) error { return nil }

func TestTestServiceCatchesALeakedGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := leakyService{release: make(chan struct{})}
		defer close(svc.release)
		r := &recorder{TB: t}

		start := time.Now()
		humustest.TestService(r, svc)

		got := r.reports()
		if len(got) != 1 {
			t.Fatalf("TestService reported %d problems, want the one leak: %q", len(got), got)
		}
		if !strings.HasPrefix(got[0], "humustest: 1 goroutine(s) outlived the Service:") ||
			!strings.Contains(got[0], "leakyService.forgotten") {
			t.Errorf("TestService reported %q, want the leaked goroutine and its stack", got[0])
		}
		if waited := time.Since(start); waited < 10*time.Second {
			t.Errorf("TestService reported the leak after %s, want after its grace of 10s", waited)
		}
	})
}

// tidyService's goroutine ends with Serve.
type tidyService struct{}

func (tidyService) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { <-ctx.Done() })
	wg.Wait()
	return nil
}

func (tidyService) Shutdown(context.Context) error { return nil }

func TestTestServicePassesAWellBehavedService(t *testing.T) {
	r := &recorder{TB: t}
	ran := false
	humustest.TestService(r, tidyService{}, humustest.During(func(ctx context.Context) {
		ran = ctx.Err() == nil
	}))
	if got := r.reports(); len(got) != 0 {
		t.Errorf("TestService reported %q on a well-behaved Service, want nothing", got)
	}
	if !ran {
		t.Error("During's function didn't run while the Service served")
	}
}

// service is a Service made of functions.
type service struct {
	serve    func(ctx context.Context) error
	shutdown func(ctx context.Context) error
}

func (s service) Serve(ctx context.Context) error    { return s.serve(ctx) }
func (s service) Shutdown(ctx context.Context) error { return s.shutdown(ctx) }

func TestTestServiceReportsBrokenContracts(t *testing.T) {
	nilShutdown := func(context.Context) error { return nil }
	untilDone := func(ctx context.Context) error { <-ctx.Done(); return nil }
	tests := []struct {
		name string
		svc  service
		want []string
	}{
		{
			name: "Serve returns before it is cancelled",
			svc:  service{serve: func(context.Context) error { return errors.New("app: gave up") }, shutdown: nilShutdown},
			want: []string{"humustest: Serve returned before its context was cancelled: app: gave up"},
		},
		{
			name: "Serve returns an error once cancelled",
			svc:  service{serve: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, shutdown: nilShutdown},
			want: []string{"humustest: Serve returned context canceled once cancelled, want nil"},
		},
		{
			name: "Shutdown returns an error",
			svc:  service{serve: untilDone, shutdown: func(context.Context) error { return errors.New("app: flushing: broken pipe") }},
			want: []string{"humustest: Shutdown returned app: flushing: broken pipe, want nil"},
		},
		{
			name: "Shutdown ignores its deadline",
			svc: service{serve: untilDone, shutdown: func(context.Context) error {
				time.Sleep(time.Hour)
				return nil
			}},
			want: []string{"humustest: Shutdown didn't return within 10s"},
		},
		{
			name: "Serve ignores its cancellation",
			svc: service{serve: func(context.Context) error {
				time.Sleep(time.Hour)
				return nil
			}, shutdown: nilShutdown},
			want: []string{"humustest: Serve didn't return within 10s of its context being cancelled"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &recorder{TB: t}
				humustest.TestService(r, tt.svc, humustest.During(func(context.Context) {
					time.Sleep(time.Second)
				}))
				got := r.reports()
				if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
					t.Errorf("TestService reported %q, want %q", got, tt.want)
				}
				// Let a Service that ignored its bound finish, so the
				// bubble ends.
				time.Sleep(2 * time.Hour)
			})
		})
	}
}

func TestWithinSetsTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{TB: t}
		svc := service{
			serve: func(ctx context.Context) error { <-ctx.Done(); return nil },
			shutdown: func(context.Context) error {
				time.Sleep(2 * time.Second)
				return nil
			},
		}
		humustest.TestService(r, svc, humustest.Within(time.Second))
		time.Sleep(time.Hour) // for Shutdown to finish
		if got, want := r.reports(), []string{"humustest: Shutdown didn't return within 1s"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("TestService reported %q, want %q", got, want)
		}
	})
}
