package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// await calls check every 200ms until it returns nil, and returns an
// error saying what didn't happen, with check's last error, if that
// hasn't happened within timeout. A check that must give up at once
// returns a permanent error.
func await(ctx context.Context, term *terminal, timeout time.Duration, what string, check func(context.Context) error) error {
	return poll(ctx, term, timeout, 0, what, check)
}

// awaitReminding is await that says every 10s that it still waits.
func awaitReminding(ctx context.Context, term *terminal, timeout time.Duration, what string, check func(context.Context) error) error {
	return poll(ctx, term, timeout, remindInterval, what, check)
}

func poll(ctx context.Context, term *terminal, timeout, remind time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	begin := time.Now()
	next := begin.Add(remind)
	var last error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
		err := check(callCtx)
		callCancel()
		if err == nil {
			return nil
		}
		var stop permanent
		if errors.As(err, &stop) {
			return fmt.Errorf("waiting for %s: %w", what, stop.err)
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		if remind > 0 && time.Now().After(next) && term != nil {
			term.say("... still waiting for %s, %s so far.", what, time.Since(begin).Round(time.Second))
			next = next.Add(remind)
		}
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return context.Cause(ctx)
			}
			return fmt.Errorf("%s didn't happen within %s: %w", what, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// permanent is a check's error that ends the wait at once.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
