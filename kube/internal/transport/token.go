package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// The token's periods. TokenRefresh is the one client-go re-reads a
// BearerTokenFile with. TokenRefused bounds how often a token the API
// server refuses is replaced: however many requests get a 401, Token is
// called at most once a TokenRefused.
const (
	TokenRefresh = time.Minute // between calls, normally
	TokenRefused = time.Second // between calls, once a 401 refused the token
)

// tokenCache calls Config.Token (kube's Connection.Token, as its errors
// say) at most once every TokenRefresh, and keeps the last token it
// returned while a call fails. A 401 to a request
// that carried the last token marks it refused: the next request at least
// TokenRefused after the last call calls Token again, so a revoked or
// rotated token is replaced within a second or so, not a minute. Its clock
// is time.Now, so a synctest bubble's fake clock drives it.
type tokenCache struct {
	server string
	call   func(context.Context) (string, error)
	// refused401, when set, is called once for each token a 401 refuses.
	refused401 func()

	// sem is held while a request reads the cache or calls Token, so Token
	// never runs twice at once and concurrent requests share one call; a
	// request waiting for it can give up with its context.
	sem chan struct{}

	// mu guards the fields below, which a 401 changes without waiting for
	// sem, held by a Token call perhaps.
	mu       sync.Mutex
	token    string    // the last token Token returned, or "" before one
	err      error     // the last call's error, or nil when it succeeded
	calledAt time.Time // when the last call that counts began; zero before one
	refused  bool      // a 401 answered a request carrying token
}

func newTokenCache(server string, call func(context.Context) (string, error)) *tokenCache {
	return &tokenCache{server: server, call: call, sem: make(chan struct{}, 1)}
}

// get returns the token a request with ctx carries.
func (c *tokenCache) get(ctx context.Context) (string, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("kube: waiting for a token for %s: %w", c.server, context.Cause(ctx))
	}
	defer func() { <-c.sem }()

	if !c.due() {
		return c.cached()
	}
	start := time.Now()
	tok, err := c.call(ctx)
	if err == nil && tok == "" {
		err = errors.New("it returned an empty token")
	}
	if err != nil && ctx.Err() != nil {
		// Cut short by its request, so it says nothing of the token: the
		// next request calls again.
		return "", fmt.Errorf("kube: calling Connection.Token for %s: %w", c.server, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calledAt = start
	if err != nil {
		// The last token, refused or not, is kept, and a refused one is
		// still replaced a TokenRefused after this call.
		c.err = fmt.Errorf("kube: calling Connection.Token for %s: %w", c.server, err)
		return c.cachedLocked()
	}
	c.token, c.err, c.refused = tok, nil, false
	return tok, nil
}

// due reports whether Token is to be called: before its first call that
// counts, a TokenRefresh after the last one, or a TokenRefused after it
// once the token was refused.
func (c *tokenCache) due() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calledAt.IsZero() {
		return true
	}
	since := time.Since(c.calledAt)
	return since >= TokenRefresh || (c.refused && since >= TokenRefused)
}

// refuse records that the API server answered 401 to a request carrying
// tok. Only the current token can be refused: a 401 to a request that
// carried an older one, answered after Token replaced it, changes nothing.
func (c *tokenCache) refuse(tok string) {
	c.mu.Lock()
	first := tok != "" && tok == c.token && !c.refused
	if first {
		c.refused = true
	}
	c.mu.Unlock()
	if first && c.refused401 != nil {
		c.refused401()
	}
}

// cached returns the last token, or the last call's error before there is
// one.
func (c *tokenCache) cached() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cachedLocked()
}

func (c *tokenCache) cachedLocked() (string, error) {
	if c.token != "" {
		return c.token, nil
	}
	return "", c.err
}

// tokenTransport adds the cache's token to every request that carries no
// Authorization header of its own, as client-go's bearer token round
// tripper does, and tells the cache when the API server refuses it with a
// 401. A 401 to a request with its own Authorization says nothing of the
// cache's token.
type tokenTransport struct {
	tokens *tokenCache
	next   http.RoundTripper
}

func (t *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") != "" {
		return t.next.RoundTrip(r)
	}
	tok, err := t.tokens.get(r.Context())
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body, even on an error
		}
		return nil, err
	}
	r = r.Clone(r.Context()) // a RoundTripper doesn't change its request
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.tokens.refuse(tok)
	}
	return resp, err
}
