package kube

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// signalContext is done on SIGINT or SIGTERM, as humus.Main's is: for the
// tests' child processes.
func signalContext(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	return signal.NotifyContext(t.Context(), os.Interrupt, syscall.SIGTERM)
}
