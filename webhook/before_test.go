package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/webhook"
)

// after is a Service served after the webhook, as a controller is. It asks
// the webhook, and records whether it was answered, as a controller's
// requests need it: when its Serve starts (its first list), once its
// context is done (the last status apply of a reconcile in flight) and in
// its Shutdown.
type after struct {
	ask  func() error // asks the webhook: nil once answered
	fail error        // when set, Serve returns it at once

	served chan struct{} // closed once Serve is called
	asked1 chan struct{} // closed once Serve's first request is answered, or not
	over   chan struct{} // closed once Serve has returned

	mu       sync.Mutex
	asked    []string // "<when>: <answer>", in order
	returned bool     // Serve has returned
	shut     bool     // Shutdown was called
}

func newAfter() *after {
	return &after{served: make(chan struct{}), asked1: make(chan struct{}), over: make(chan struct{})}
}

func (a *after) record(when string) {
	answer := "answered"
	if err := a.ask(); err != nil {
		answer = err.Error()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, when+": "+answer)
}

func (a *after) Serve(ctx context.Context) error {
	close(a.served)
	defer func() {
		a.mu.Lock()
		a.returned = true
		a.mu.Unlock()
		close(a.over)
	}()
	if a.fail != nil {
		return a.fail
	}
	a.record("serve")
	close(a.asked1)
	<-ctx.Done()
	a.record("last")
	return nil
}

// Shutdown waits for Serve to return, as a kube.Controller's does, and
// then asks.
func (a *after) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	a.shut = true
	a.mu.Unlock()
	select {
	case <-a.over:
	case <-ctx.Done():
		return ctx.Err()
	}
	if a.ask != nil && a.fail == nil {
		a.record("shutdown")
	}
	return nil
}

func (a *after) state() (asked []string, returned, shut bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...), a.returned, a.shut
}

// asker returns a function asking hook, as the API server would: an error
// when it isn't ready, or doesn't answer.
func asker(authority *ca, h humus.Host, hook *webhook.Service) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := hook.Ready().Healthy(ctx); err != nil {
			return fmt.Errorf("not ready: %w", err)
		}
		addr, err := hook.Addr(ctx)
		if err != nil {
			return err
		}
		return (<-authority.post(h, addr.String())).err
	}
}

// gated is h whose Listen waits for open to be closed.
func gated(h humus.Host) (humus.Host, chan struct{}) {
	open := make(chan struct{})
	listen := h.Listen
	h.Listen = func(ctx context.Context, network, addr string) (net.Listener, error) {
		<-open
		return listen(ctx, network, addr)
	}
	return h, open
}

// Under humus.Run, the Services after the webhook serve only once it
// listens, and it answers them until they have stopped: their requests
// once their context is done, and in their Shutdown. Then it stops.
func TestBeforeOrder(t *testing.T) {
	authority, volume := mounted(t)
	th := humustest.NewHost()
	base := th.Host()
	base.FS, base.Dir = volume.FS, "/app"
	h, open := gated(base)
	first, second := newAfter(), newAfter()
	hooks := make(chan *webhook.Service, 1)
	p := humustest.Start(t, h, func(_ context.Context, s *humus.Setup) ([]humus.Service, error) {
		hook, err := webhook.NewService(s, webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/tls"}, echo())
		if err != nil {
			return nil, err
		}
		first.ask, second.ask = asker(authority, h, hook), asker(authority, h, hook)
		hooks <- hook
		return []humus.Service{hook.Before(first, second)}, nil
	})
	hook := <-hooks

	select {
	case <-first.served:
		t.Error("a Service after the webhook served before the webhook listened")
	case <-second.served:
		t.Error("a Service after the webhook served before the webhook listened")
	case <-time.After(100 * time.Millisecond):
	}
	close(open)
	<-first.asked1
	<-second.asked1
	p.Signal()
	if code := p.Wait(); code != 0 {
		t.Errorf("exit code %d, want 0; stderr:\n%s", code, th.Stderr())
	}

	want := []string{"serve: answered", "last: answered", "shutdown: answered"}
	for i, a := range []*after{first, second} {
		asked, returned, shut := a.state()
		if strings.Join(asked, "\n") != strings.Join(want, "\n") {
			t.Errorf("Service %d after the webhook was answered:\n%s\nwant:\n%s", i, strings.Join(asked, "\n"), strings.Join(want, "\n"))
		}
		if !returned || !shut {
			t.Errorf("Service %d after the webhook: Serve returned %v, Shutdown called %v; want both", i, returned, shut)
		}
	}
	addr, err := hook.Addr(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := h.Dial(context.Background(), "tcp", addr.String()); err == nil {
		_ = conn.Close()
		t.Error("the webhook accepted a connection once the App had stopped")
	}
}

// A webhook that can't listen ends Serve with its error, and none of the
// Services after it is served or shut down.
func TestBeforeListenFails(t *testing.T) {
	_, h := mounted(t)
	hook := echoHook(t, h, "10.0.0.1:9443")
	then := newAfter()
	svc := hook.Before(then)
	err := svc.Serve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "webhook: listening on 10.0.0.1:9443: ") {
		t.Errorf("Serve = %v, want the webhook's error listening", err)
	}
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown = %v, want nil: the error was Serve's", err)
	}
	select {
	case <-then.served:
		t.Error("the Service after a webhook that never listened was served")
	default:
	}
	if _, _, shut := then.state(); shut {
		t.Error("the Service after a webhook that never listened was shut down")
	}
}

// A webhook that fails while the Services after it serve ends Serve with
// its error, once, having stopped them.
func TestBeforeWebhookFails(t *testing.T) {
	authority, h := mounted(t)
	listeners := make(chan net.Listener, 1)
	listen := h.Listen
	h.Listen = func(ctx context.Context, network, addr string) (net.Listener, error) {
		l, err := listen(ctx, network, addr)
		if err == nil {
			listeners <- l
		}
		return l, err
	}
	hook := echoHook(t, h, "127.0.0.1:0")
	then := newAfter()
	then.ask = asker(authority, h, hook)
	svc := hook.Before(then)
	served := make(chan error, 1)
	go func() { served <- svc.Serve(context.Background()) }()
	<-then.asked1

	// The listener fails under the server, as a closed socket does.
	_ = (<-listeners).Close()
	err := <-served
	if err == nil || !strings.Contains(err.Error(), "webhook: serving on 127.0.0.1:") || strings.Count(err.Error(), "webhook: serving on") != 1 {
		t.Errorf("Serve = %v, want the webhook's error serving, once", err)
	}
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown = %v, want nil: the error was Serve's", err)
	}
	if asked, returned, shut := then.state(); !returned || !shut || len(asked) < 2 || asked[0] != "serve: answered" || !strings.HasPrefix(asked[1], "last: not ready: ") {
		t.Errorf("the Service after the webhook: Serve returned %v, Shutdown called %v, asked %q; want it stopped, its last request unanswered", returned, shut, asked)
	}
}

// A Service after the webhook whose Serve fails ends Serve with its error,
// once; the webhook answers on until Shutdown.
func TestBeforeThenFails(t *testing.T) {
	authority, h := mounted(t)
	hook := echoHook(t, h, "127.0.0.1:0")
	failing := newAfter()
	failing.fail = errors.New("the controller's resource isn't served")
	other := newAfter()
	other.ask = asker(authority, h, hook)
	svc := hook.Before(failing, other)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := svc.Serve(ctx); err == nil || err.Error() != "the controller's resource isn't served" {
		t.Errorf("Serve = %v, want the failing Service's error alone", err)
	}
	if err := asker(authority, h, hook)(); err != nil {
		t.Errorf("the webhook once Serve returned: %v, want it answering until Shutdown", err)
	}
	cancel()
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown = %v, want nil: the error was Serve's", err)
	}
	if asked, returned, _ := other.state(); !returned || strings.Join(asked, ",") != "serve: answered,last: answered,shutdown: answered" {
		t.Errorf("the other Service after the webhook: returned %v, asked %q; want all answered", returned, asked)
	}
	if err := asker(authority, h, hook)(); err == nil {
		t.Error("the webhook answered after Shutdown")
	}
}

// What Before returns keeps humus.Service's contract, and leaves no
// goroutine behind.
func TestBeforeContract(t *testing.T) {
	authority, h := mounted(t)
	hook := echoHook(t, h, "127.0.0.1:0")
	then := newAfter()
	then.ask = asker(authority, h, hook)
	humustest.TestService(t, hook.Before(then), humustest.During(func(context.Context) { <-then.served }))
	if asked, _, _ := then.state(); strings.Join(asked, ",") != "serve: answered,last: answered,shutdown: answered" {
		t.Errorf("the Service after the webhook was answered %q, want all three", asked)
	}
}

// Shut down before it serves, it serves nothing: Serve returns nil at
// once, and the Services after the webhook are neither served nor shut
// down.
func TestBeforeShutdownFirst(t *testing.T) {
	_, h := mounted(t)
	hook := echoHook(t, h, "127.0.0.1:0")
	then := newAfter()
	svc := hook.Before(then)
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if err := svc.Serve(context.Background()); err != nil {
		t.Errorf("Serve after Shutdown = %v, want nil", err)
	}
	if err := hook.Ready().Healthy(context.Background()); err == nil {
		t.Error("the webhook is ready, after Shutdown")
	}
	select {
	case <-then.served:
		t.Error("the Service after the webhook was served after Shutdown")
	default:
	}
	if _, _, shut := then.state(); shut {
		t.Error("the Service after the webhook, never served, was shut down")
	}
}

// mounted is a new CA, and a Host whose /tls holds a serving pair it
// signed, as a mounted Secret would.
func mounted(t *testing.T) (*ca, humus.Host) {
	t.Helper()
	root := t.TempDir()
	authority := newCA(t)
	newVolume(t, filepath.Join(root, "tls"), authority.valid(t))
	return authority, hostOn(root)
}

// echoHook is a webhook Service of echo on addr, its pair read from h's
// /tls.
func echoHook(t *testing.T, h humus.Host, addr string) *webhook.Service {
	t.Helper()
	hook, err := webhook.NewService(&humus.Setup{Host: h}, webhook.Settings{Addr: addr, CertDir: "/tls"}, echo())
	if err != nil {
		t.Fatal(err)
	}
	return hook
}

// The Service Before returns says what it holds, for a caller that looks
// into it, as kube.MarshalRBAC does: the webhook's, then the others.
func TestBeforeSaysWhatItHolds(t *testing.T) {
	_, volume := mounted(t)
	h := humustest.NewHost().Host()
	h.FS, h.Dir = volume.FS, "/app"
	hook, err := webhook.NewService(&humus.Setup{Host: h}, webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/tls"}, echo())
	if err != nil {
		t.Fatal(err)
	}
	first, second := newAfter(), newAfter()
	held, ok := hook.Before(first, second).(interface{ Services() []humus.Service })
	if !ok {
		t.Fatal("Before's Service has no Services method")
	}
	if got := held.Services(); len(got) != 3 || got[0] != humus.Service(hook) || got[1] != humus.Service(first) || got[2] != humus.Service(second) {
		t.Errorf("Services() = %v, want the webhook's, then the two after it", got)
	}
}
