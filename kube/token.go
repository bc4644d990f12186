package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// tokenRefresh is how often Connection.Token is called at most: the period
// client-go re-reads a BearerTokenFile with.
const tokenRefresh = time.Minute

// tokenCache calls Connection.Token at most once every tokenRefresh, and
// keeps the last token it returned while a call fails. Its clock is
// time.Now, so a synctest bubble's fake clock drives it.
type tokenCache struct {
	server string
	call   func(context.Context) (string, error)

	// sem is held while the cache is read or Token is called, so Token never
	// runs twice at once; a request waiting for it can give up with its
	// context.
	sem chan struct{}

	// Guarded by sem.
	token    string    // the last token Token returned, or "" before one
	err      error     // the last call's error, or nil when it succeeded
	calledAt time.Time // when the last call that counts began; zero before one
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

	if !c.calledAt.IsZero() && time.Since(c.calledAt) < tokenRefresh {
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
	c.calledAt = start
	if err != nil {
		c.err = fmt.Errorf("kube: calling Connection.Token for %s: %w", c.server, err)
		return c.cached()
	}
	c.token, c.err = tok, nil
	return tok, nil
}

// cached returns the last token, or the last call's error before there is
// one.
func (c *tokenCache) cached() (string, error) {
	if c.token != "" {
		return c.token, nil
	}
	return "", c.err
}

// tokenTransport adds the cache's token to every request that carries no
// Authorization header of its own, as client-go's bearer token round
// tripper does.
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
	return t.next.RoundTrip(r)
}
