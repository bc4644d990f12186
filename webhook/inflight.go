package webhook

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// inflight knows the requests whose bodies are still being read, so that
// Shutdown can cut a slow client off instead of waiting out its context
// for it. A request whose body is read (or whose handler stopped reading
// it) is no longer its concern: Shutdown lets it finish.
type inflight struct {
	mu       sync.Mutex
	reading  map[*trackedBody]struct{}
	deadline time.Time // once Shutdown is called: when a body still being read is cut
}

func newInflight() *inflight {
	return &inflight{reading: map[*trackedBody]struct{}{}}
}

// track is h with each request's body tracked while it is read, and the
// request's context done after WriteTimeout: the API server has given up
// on it by then.
func (in *inflight) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), WriteTimeout)
		defer cancel()
		b := &trackedBody{ReadCloser: r.Body, in: in, rc: http.NewResponseController(w)}
		in.add(b)
		defer in.done(b)
		r = r.WithContext(ctx)
		r.Body = b
		h.ServeHTTP(w, r)
	})
}

// add tracks b; once Shutdown is called, its read deadline is set at once.
func (in *inflight) add(b *trackedBody) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.reading[b] = struct{}{}
	if !in.deadline.IsZero() {
		b.cut(in.deadline)
	}
}

// done forgets b: its body is read, or its handler has returned.
func (in *inflight) done(b *trackedBody) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.reading, b)
}

// shutdown gives each body still being read until deadline.
func (in *inflight) shutdown(deadline time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.deadline.IsZero() {
		in.deadline = deadline
	}
	for b := range in.reading {
		b.cut(in.deadline)
	}
}

// trackedBody is a request's body, tracked by in until a read of it
// fails or ends it.
type trackedBody struct {
	io.ReadCloser
	in *inflight
	rc *http.ResponseController
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.in.done(b)
	}
	return n, err
}

// cut sets the read deadline of b's request: its connection's over
// HTTP/1.1, its stream's over HTTP/2. Only a body still being read is
// cut: over HTTP/1.1 a deadline set once it is read would end the
// request's context.
func (b *trackedBody) cut(deadline time.Time) {
	_ = b.rc.SetReadDeadline(deadline) // a ResponseWriter that can't: nothing to cut
}
