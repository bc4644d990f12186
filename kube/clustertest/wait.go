package clustertest

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// pollInterval is how often Eventually checks again.
const pollInterval = 50 * time.Millisecond

// Eventually calls check every 50ms, from at once, until it returns nil, and
// fails t with check's last error when that hasn't happened within timeout.
// An error is "not yet": to give up at once, check calls t.Fatal itself.
//
// check's context ends at the timeout; it is not t's, so a cleanup, which
// runs once t's context is done, can wait too. A last error that is only
// that context ending is passed over for the one before it, which says
// what was awaited.
func Eventually(t testing.TB, timeout time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("clustertest: not within %s: %v", timeout, last)
		case <-time.After(pollInterval):
		}
	}
}

// Gone is nil when err, a Get's of what, says it is not found: a check for
// Eventually that waits for what to be deleted.
func Gone(what string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return errors.New(what + " is still there")
}
