package humustest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
)

func TestStartRunsTheAppUntilItsSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := humustest.NewHost()
		var cause error
		init := func(context.Context, *humus.Setup) ([]humus.Service, error) {
			return []humus.Service{service{
				serve: func(ctx context.Context) error {
					<-ctx.Done()
					cause = ctx.Err()
					return nil
				},
				shutdown: func(context.Context) error { return errors.New("app: closing: broken pipe") },
			}}, nil
		}
		p := humustest.Start(t, h.Host(), init)

		time.Sleep(time.Hour)
		select {
		case <-p.Done():
			t.Fatal("the App exited before its signal")
		default:
		}
		p.Signal()
		if code := p.Wait(); code != 1 {
			t.Errorf("exit code = %d, want 1", code)
		}
		if !errors.Is(cause, context.Canceled) {
			t.Errorf("Serve's context ended with %v, want context.Canceled", cause)
		}
		if got, want := h.Stderr(), "app: closing: broken pipe\n"; got != want {
			t.Errorf("stderr = %q, want %q", got, want)
		}
	})
}

func TestStartSignalsAnAppStillRunningAtTheTestsEnd(t *testing.T) {
	var stopped bool
	synctest.Test(t, func(t *testing.T) {
		init := func(context.Context, *humus.Setup) ([]humus.Service, error) {
			return []humus.Service{service{
				serve: func(ctx context.Context) error {
					<-ctx.Done()
					stopped = true
					return nil
				},
				shutdown: func(context.Context) error { return nil },
			}}, nil
		}
		humustest.Start(t, humustest.NewHost().Host(), init)
	})
	if !stopped {
		t.Error("the App was still serving once the test ended")
	}
}
