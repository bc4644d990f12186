package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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
			if err == nil || err.Error() != want {
				t.Errorf("error = %v, want %q", err, want)
			}
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
		want := "kube: calling Connection.Token for kube.test:443: it returned an empty token"
		if err := roundTrip(t, rt, t.Context()); err == nil || err.Error() != want {
			t.Errorf("error = %v, want %q", err, want)
		}
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
		if want := "kube: waiting for a token for kube.test:443: context deadline exceeded"; err == nil || err.Error() != want {
			t.Errorf("error = %v, want %q", err, want)
		}
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

// handlerRoundTripper stands in for the API server under the token's
// round tripper: it serves each request with h, in memory, and records its
// Authorization header.
type handlerRoundTripper struct {
	h http.HandlerFunc

	mu    sync.Mutex
	auths []string
}

func (rt *handlerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.auths = append(rt.auths, r.Header.Get("Authorization"))
	rt.mu.Unlock()
	rec := httptest.NewRecorder()
	rt.h(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

func (rt *handlerRoundTripper) last() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.auths) == 0 {
		return ""
	}
	return rt.auths[len(rt.auths)-1]
}

// acceptOnly is an API server that answers a request carrying token with
// a 200, and every other one with its 401.
func acceptOnly(token string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+token {
			w.WriteHeader(http.StatusOK)
			return
		}
		refuse(w, r)
	}
}

// refuse answers 401 as the API server does.
func refuse(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
}

// tokenSeq is a Connection.Token returning tokens in turn, then the last
// one again, or "tok-N" for its Nth call when tokens is empty; it records
// when it was called.
type tokenSeq struct {
	tokens []string

	mu    sync.Mutex
	calls []time.Time
}

func (s *tokenSeq) Token(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, time.Now())
	n := len(s.calls)
	if len(s.tokens) == 0 {
		return fmt.Sprintf("tok-%d", n), nil
	}
	return s.tokens[min(n, len(s.tokens))-1], nil
}

func (s *tokenSeq) Calls() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// statusOf sends a request through rt and returns its response's status.
func statusOf(t testing.TB, rt http.RoundTripper, ctx context.Context) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", "https://kube.test:443/api/v1/namespaces", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestToken401CallsTokenAgain: the server accepts "b" only, and Token
// returns "a" first. The first request gets a 401, and a request a second
// after the call carries "b", not "a" for the rest of the minute.
func TestToken401CallsTokenAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &handlerRoundTripper{h: acceptOnly("b")}
		tok := &tokenSeq{tokens: []string{"a", "b"}}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", tok.Token), next: srv}
		start := time.Now()

		steps := []struct {
			at         time.Duration
			wantStatus int
			wantAuth   string
			calls      int
		}{
			{at: 0, wantStatus: http.StatusUnauthorized, wantAuth: "Bearer a", calls: 1},
			// Within the second of the call, the refused token is still
			// sent: Token is called at most once a second.
			{at: 500 * time.Millisecond, wantStatus: http.StatusUnauthorized, wantAuth: "Bearer a", calls: 1},
			{at: TokenRefused, wantStatus: http.StatusOK, wantAuth: "Bearer b", calls: 2},
			// "b" isn't refused: back to once a minute.
			{at: 30 * time.Second, wantStatus: http.StatusOK, wantAuth: "Bearer b", calls: 2},
			{at: TokenRefused + TokenRefresh - time.Millisecond, wantStatus: http.StatusOK, wantAuth: "Bearer b", calls: 2},
			{at: TokenRefused + TokenRefresh, wantStatus: http.StatusOK, wantAuth: "Bearer b", calls: 3},
		}
		for _, s := range steps {
			time.Sleep(time.Until(start.Add(s.at)))
			if got := statusOf(t, rt, t.Context()); got != s.wantStatus {
				t.Errorf("at %v: status %d, want %d", s.at, got, s.wantStatus)
			}
			if got := srv.last(); got != s.wantAuth {
				t.Errorf("at %v: Authorization = %q, want %q", s.at, got, s.wantAuth)
			}
			if got := len(tok.Calls()); got != s.calls {
				t.Errorf("at %v: Token called %d times, want %d", s.at, got, s.calls)
			}
		}
	})
}

// TestToken401LongAfterTheCallCallsTokenAtOnce: a token refused more than
// a second after it was fetched, as when it is revoked mid-minute, is
// replaced by the very next request.
func TestToken401LongAfterTheCallCallsTokenAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		accepted := "a"
		srv := &handlerRoundTripper{h: func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			a := accepted
			mu.Unlock()
			acceptOnly(a)(w, r)
		}}
		tok := &tokenSeq{tokens: []string{"a", "b"}}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", tok.Token), next: srv}

		if got := statusOf(t, rt, t.Context()); got != http.StatusOK {
			t.Fatalf("status %d, want 200", got)
		}
		time.Sleep(20 * time.Second)
		mu.Lock()
		accepted = "b" // "a" is revoked
		mu.Unlock()
		if got := statusOf(t, rt, t.Context()); got != http.StatusUnauthorized {
			t.Fatalf("status %d with the revoked token, want 401", got)
		}
		if got := statusOf(t, rt, t.Context()); got != http.StatusOK || srv.last() != "Bearer b" {
			t.Errorf("the request after the 401: status %d with %q, want 200 with Bearer b", got, srv.last())
		}
		if got := len(tok.Calls()); got != 2 {
			t.Errorf("Token called %d times, want 2", got)
		}
	})
}

// TestToken401sCallTokenAtMostOnceASecond: a server that refuses every
// token gets 100 requests over 10 seconds, and 100 at once; Token is
// called about once a second, never sooner than a second after its last
// call.
func TestToken401sCallTokenAtMostOnceASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &handlerRoundTripper{h: refuse}
		tok := &tokenSeq{}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", tok.Token), next: srv}
		start := time.Now()

		const n = 10 // seconds
		for i := range 100 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * n * time.Second / 100)))
			if got := statusOf(t, rt, t.Context()); got != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", got)
			}
		}
		calls := tok.Calls()
		// One call at the start, and one each second after it.
		if len(calls) > n+1 || len(calls) < n {
			t.Errorf("100 refused requests over %ds called Token %d times, want %d", n, len(calls), n)
		}

		time.Sleep(time.Until(start.Add(n * time.Second)))
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				if got := statusOf(t, rt, t.Context()); got != http.StatusUnauthorized {
					t.Errorf("status %d, want 401", got)
				}
			})
		}
		wg.Wait()
		if got := len(tok.Calls()) - len(calls); got != 1 {
			t.Errorf("100 concurrent refused requests called Token %d times, want 1", got)
		}

		calls = tok.Calls()
		for i := 1; i < len(calls); i++ {
			if d := calls[i].Sub(calls[i-1]); d < TokenRefused {
				t.Errorf("Token called %v after its last call, want at least %v", d, TokenRefused)
			}
		}
	})
}

// TestToken401ForAnOlderTokenChangesNothing: a slow request that carried
// "a" gets its 401 after a minute's call replaced "a" with "b": "b" isn't
// refused, and Token isn't called again.
func TestToken401ForAnOlderTokenChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		srv := &handlerRoundTripper{h: func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "Bearer a" {
				<-release
			}
			acceptOnly("b")(w, r)
		}}
		tok := &tokenSeq{tokens: []string{"a", "b"}}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", tok.Token), next: srv}

		var slow sync.WaitGroup
		slow.Go(func() {
			if got := statusOf(t, rt, t.Context()); got != http.StatusUnauthorized {
				t.Errorf("the slow request: status %d, want 401", got)
			}
		})
		synctest.Wait() // the slow request, carrying "a", waits for its answer

		time.Sleep(TokenRefresh)
		if got := statusOf(t, rt, t.Context()); got != http.StatusOK {
			t.Fatalf("status %d a minute later, want 200 with b", got)
		}
		close(release)
		slow.Wait() // its 401 refuses "a", which is no longer the token

		time.Sleep(2 * TokenRefused)
		if got := statusOf(t, rt, t.Context()); got != http.StatusOK || srv.last() != "Bearer b" {
			t.Errorf("status %d with %q, want 200 with Bearer b", got, srv.last())
		}
		if got := len(tok.Calls()); got != 2 {
			t.Errorf("Token called %d times, want 2: the 401 for the older token called it again", got)
		}
	})
}

// TestToken401WithItsOwnAuthorizationChangesNothing: a request whose
// caller set its Authorization header says nothing of the cache's token
// when it gets a 401.
func TestToken401WithItsOwnAuthorizationChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &handlerRoundTripper{h: acceptOnly("tok-1")}
		tok := &tokenSeq{}
		rt := &tokenTransport{tokens: newTokenCache("kube.test:443", tok.Token), next: srv}

		if got := statusOf(t, rt, t.Context()); got != http.StatusOK {
			t.Fatalf("status %d, want 200", got)
		}
		time.Sleep(2 * TokenRefused)
		req, err := http.NewRequestWithContext(t.Context(), "GET", "https://kube.test:443/version", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tok-1") // the cache's token, set by the caller
		resp, err := (&tokenTransport{tokens: rt.tokens, next: &handlerRoundTripper{h: refuse}}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}

		time.Sleep(2 * TokenRefused)
		if got := statusOf(t, rt, t.Context()); got != http.StatusOK || srv.last() != "Bearer tok-1" {
			t.Errorf("status %d with %q, want 200 with Bearer tok-1", got, srv.last())
		}
		if got := len(tok.Calls()); got != 1 {
			t.Errorf("Token called %d times, want 1", got)
		}
	})
}

// A 401 is said once for each token it refuses: refused401 is called for
// the first 401 to a request carrying the current token, not for the
// requests refused with it after, nor for one carrying an older token.
func TestARefusedTokenIsSaidOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tokens := []string{"a", "b"}
		c := newTokenCache("127.0.0.1:6443", func(context.Context) (string, error) {
			tok := tokens[0]
			tokens = tokens[1:]
			return tok, nil
		})
		var said int
		c.refused401 = func() { said++ }
		if tok, err := c.get(t.Context()); tok != "a" || err != nil {
			t.Fatalf("get = %q, %v, want a", tok, err)
		}
		c.refuse("a")
		c.refuse("a")
		if said != 1 {
			t.Errorf("refused401 called %d times for two 401s carrying a, want once", said)
		}
		time.Sleep(TokenRefused)
		if tok, err := c.get(t.Context()); tok != "b" || err != nil {
			t.Fatalf("get after the 401 = %q, %v, want b", tok, err)
		}
		c.refuse("a")
		c.refuse("b")
		if said != 2 {
			t.Errorf("refused401 called %d times in all, want twice: once for a, once for b", said)
		}
	})
}
