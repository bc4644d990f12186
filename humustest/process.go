package humustest

import (
	"context"
	"testing"
	"time"

	"github.com/z5labs/humus"
)

// Process is a whole App running as the process would, through humus.Run:
// Init, the Services, the signal, the shutdown and the exit code.
type Process struct {
	cancel context.CancelFunc
	done   chan struct{}
	code   int
}

// Start runs the App that init builds on h, with opts, as humus.Main would,
// and returns at once. Signal stands for the first SIGTERM; Wait returns the
// exit code. h's Stderr holds what the App wrote there, such as each error
// that made the code 1. When the test ends, an App still running is
// signalled and waited for.
func Start(t testing.TB, h humus.Host, init humus.Init, opts ...humus.Option) *Process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Process{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.code = humus.Run(ctx, h, init, opts...)
	}()
	t.Cleanup(func() {
		p.Signal()
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			t.Errorf("humustest: the App didn't exit within a minute of its signal")
		}
	})
	return p
}

// Signal sends the App its shutdown signal, as the first SIGTERM does.
func (p *Process) Signal() { p.cancel() }

// Done is closed once the App has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the App to exit, and returns its exit code.
func (p *Process) Wait() int {
	<-p.done
	return p.code
}
