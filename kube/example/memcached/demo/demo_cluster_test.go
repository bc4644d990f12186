package main

import (
	"testing"

	"github.com/z5labs/humus/kube/clustertest"
)

// TestClusterDemo runs make demo's program, on a control plane of its own,
// so the demo can't rot: every step it tells of must happen, in time.
func TestClusterDemo(t *testing.T) {
	clustertest.SkipShort(t)
	if err := run(t.Context(), options{out: t.Output(), dir: t.TempDir(), bin: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
}
