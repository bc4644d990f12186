package control

import (
	"context"
	"time"
)

// Waiting on a channel or a clock, for the loops of the package.

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sleep waits d, or until ctx ends, and reports whether it waited d: the
// waits of step 1's retries, the served checks and a read of the App's
// own write.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
