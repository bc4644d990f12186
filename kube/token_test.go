package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recordingRoundTripper stands in for the connections under the token's
// round tripper: it records each request's Authorization header and
// answers 200.
type recordingRoundTripper struct {
	mu    sync.Mutex
	auths []string
}

func (rt *recordingRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.auths = append(rt.auths, r.Header.Get("Authorization"))
	rt.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

func (rt *recordingRoundTripper) last() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.auths) == 0 {
		return ""
	}
	return rt.auths[len(rt.auths)-1]
}

// tokenFunc is a Connection.Token whose answers a test sets, and which
// counts its calls.
type tokenFunc struct {
	mu    sync.Mutex
	calls int
	token string
	err   error
}

func (f *tokenFunc) set(token string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token, f.err = token, err
}

func (f *tokenFunc) Token(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.token, f.err
}

func (f *tokenFunc) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func roundTrip(t testing.TB, rt http.RoundTripper, ctx context.Context) error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", "https://kube.test:443/api/v1/namespaces", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if req.Header.Get("Authorization") != "" {
		t.Errorf("the round tripper changed its request's headers")
	}
	return nil
}

func TestTokenCalledOnceAMinuteAcrossARotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &recordingRoundTripper{}
		tok := &tokenFunc{token: "tok-1"}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", tok.Token), next: next}
		start := time.Now()

		// step is one request at an offset from start, and what it must see.
		type step struct {
			at       time.Duration
			set      func() // changes the token before the request, if not nil
			wantAuth string
			calls    int
		}
		errRotating := errors.New("open token: file does not exist")
		steps := []step{
			{at: 0, wantAuth: "Bearer tok-1", calls: 1},
			{at: 1 * time.Second, wantAuth: "Bearer tok-1", calls: 1},
			// The kubelet rotates the token: it isn't read before the minute.
			{at: 30 * time.Second, set: func() { tok.set("tok-2", nil) }, wantAuth: "Bearer tok-1", calls: 1},
			{at: 59*time.Second + 999*time.Millisecond, wantAuth: "Bearer tok-1", calls: 1},
			{at: 60 * time.Second, wantAuth: "Bearer tok-2", calls: 2},
			{at: 90 * time.Second, wantAuth: "Bearer tok-2", calls: 2},
			// A failing call keeps the last token, and isn't retried within
			// the minute.
			{at: 120 * time.Second, set: func() { tok.set("", errRotating) }, wantAuth: "Bearer tok-2", calls: 3},
			{at: 150 * time.Second, set: func() { tok.set("tok-3", nil) }, wantAuth: "Bearer tok-2", calls: 3},
			{at: 180 * time.Second, wantAuth: "Bearer tok-3", calls: 4},
			// An empty token is a failure too.
			{at: 240 * time.Second, set: func() { tok.set("", nil) }, wantAuth: "Bearer tok-3", calls: 5},
		}
		for _, s := range steps {
			time.Sleep(time.Until(start.Add(s.at)))
			if s.set != nil {
				s.set()
			}
			for range 3 { // several requests at each instant: still one call
				if err := roundTrip(t, rt, t.Context()); err != nil {
					t.Fatalf("at %v: %v", s.at, err)
				}
			}
			if got := next.last(); got != s.wantAuth {
				t.Errorf("at %v: Authorization = %q, want %q", s.at, got, s.wantAuth)
			}
			if got := tok.Calls(); got != s.calls {
				t.Errorf("at %v: Token called %d times, want %d", s.at, got, s.calls)
			}
		}
	})
}

func TestTokenFailureBeforeAnyTokenFailsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &recordingRoundTripper{}
		errNoFile := errors.New("open token: file does not exist")
		tok := &tokenFunc{err: errNoFile}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", tok.Token), next: next}

		want := "kube: calling Connection.Token for kube.test:443: open token: file does not exist"
		for range 2 {
			err := roundTrip(t, rt, t.Context())
			assertErrText(t, err, want)
			if !errors.Is(err, errNoFile) {
				t.Errorf("error %v doesn't wrap the Token's", err)
			}
		}
		if got := tok.Calls(); got != 1 {
			t.Errorf("Token called %d times within a minute, want 1", got)
		}
		if len(next.auths) != 0 {
			t.Errorf("%d requests went on without a token", len(next.auths))
		}

		time.Sleep(time.Minute)
		tok.set("tok-1", nil)
		if err := roundTrip(t, rt, t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := next.last(); got != "Bearer tok-1" {
			t.Errorf("Authorization = %q after the Token recovered, want Bearer tok-1", got)
		}
	})
}

func TestTokenEmptyBeforeAnyTokenFailsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &tokenTransport{
			tokens: newTokenCache("kube.test:443", func(context.Context) (string, error) { return "", nil }),
			next:   &recordingRoundTripper{},
		}
		assertErrText(t, roundTrip(t, rt, t.Context()), "kube: calling Connection.Token for kube.test:443: it returned an empty token")
	})
}

func TestTokenConcurrentRequestsCallItOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &recordingRoundTripper{}
		var calls, inFlight, maxInFlight int
		var mu sync.Mutex
		token := func(context.Context) (string, error) {
			mu.Lock()
			calls++
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			n := calls
			mu.Unlock()
			time.Sleep(time.Second) // a slow source, such as a cloud's
			mu.Lock()
			inFlight--
			mu.Unlock()
			return fmt.Sprintf("tok-%d", n), nil
		}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", token), next: next}

		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if err := roundTrip(t, rt, t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if calls != 1 || maxInFlight != 1 {
			t.Errorf("10 concurrent requests called Token %d times, %d at once; want once", calls, maxInFlight)
		}
		for i, a := range next.auths {
			if a != "Bearer tok-1" {
				t.Errorf("request %d: Authorization = %q, want Bearer tok-1", i, a)
			}
		}

		// Past the minute, concurrent requests again share one call.
		time.Sleep(time.Minute)
		for range 10 {
			wg.Go(func() {
				if err := roundTrip(t, rt, t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if calls != 2 || maxInFlight != 1 {
			t.Errorf("after a minute, Token was called %d times in all, %d at once; want 2 and 1", calls, maxInFlight)
		}
	})
}

func TestTokenCallCutShortByItsRequestDoesNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &recordingRoundTripper{}
		var calls int
		token := func(ctx context.Context) (string, error) {
			calls++
			if calls == 1 {
				<-ctx.Done() // the first request gives up while the call runs
				return "", ctx.Err()
			}
			return "tok-2", nil
		}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", token), next: next}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := roundTrip(t, rt, ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error = %v, want the request's deadline", err)
		}
		// The next request, within the minute, calls Token again.
		if err := roundTrip(t, rt, t.Context()); err != nil {
			t.Fatal(err)
		}
		if calls != 2 || next.last() != "Bearer tok-2" {
			t.Errorf("calls = %d, Authorization = %q; want 2 and Bearer tok-2", calls, next.last())
		}
	})
}

func TestTokenWaitingRequestGivesUpWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		token := func(context.Context) (string, error) {
			<-release
			return "tok-1", nil
		}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", token), next: &recordingRoundTripper{}}

		var first sync.WaitGroup
		first.Go(func() {
			if err := roundTrip(t, rt, t.Context()); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait() // the first request is inside Token

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := roundTrip(t, rt, ctx)
		assertErrText(t, err, "kube: waiting for a token for kube.test:443: context deadline exceeded")
		close(release)
		first.Wait()
	})
}

func TestTokenKeepsARequestsOwnAuthorization(t *testing.T) {
	next := &recordingRoundTripper{}
	tok := &tokenFunc{token: "tok-1"}
	rt := &tokenTransport{tokens: newTokenCache("kube.test:443", tok.Token), next: next}
	req, err := http.NewRequestWithContext(t.Context(), "GET", "https://kube.test:443/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer own")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if next.last() != "Bearer own" || tok.Calls() != 0 {
		t.Errorf("Authorization = %q with %d Token calls, want the request's own and none", next.last(), tok.Calls())
	}
}
