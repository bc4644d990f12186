package clustertest

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/clustertest/internal/fataltest"
)

// TestEventuallyFails checks Eventually's failure: the package's prefix,
// the timeout, and the check's last error that says what was awaited, not
// its context's end.
func TestEventuallyFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tries := 0
		got := fataltest.Message(t, func(tb testing.TB) {
			Eventually(tb, 1010*time.Millisecond, func(ctx context.Context) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				tries++
				return fmt.Errorf("try %d: not yet", tries)
			})
		})
		if want := "clustertest: not within 1.01s: try 21: not yet"; got != want {
			t.Errorf("Eventually failed with %q, want %q", got, want)
		}
	})
}

func TestEventuallySucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		tries := 0
		Eventually(t, time.Second, func(context.Context) error {
			if tries++; tries < 3 {
				return fmt.Errorf("try %d", tries)
			}
			return nil
		})
		if took := time.Since(begin); tries != 3 || took != 100*time.Millisecond {
			t.Errorf("Eventually returned after %d tries, %s; want 3 tries, 100ms", tries, took)
		}
	})
}
