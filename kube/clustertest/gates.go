package clustertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// FeatureGates restarts kube-apiserver with --feature-gates set to gates
// joined by commas, such as "ShardedListAndWatch=true", in place of any
// it had, and returns once it is ready. At t's cleanup it is restarted
// with the flags it had before, so later tests find it as they expect.
// Clients keep working across the restarts, as across StopAPIServer and
// StartAPIServer. The control plane is shared: call it only from tests
// that don't run in parallel. On an existing cluster (FromKubeconfig) it
// fails t saying so.
func (c *Cluster) FeatureGates(t testing.TB, gates ...string) {
	t.Helper()
	c.ownsProcesses(t, "FeatureGates")
	if len(gates) == 0 {
		t.Fatal("clustertest: FeatureGates needs at least one gate")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	args := c.apiserver.args
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if err := c.restartAPIServer(context.Background(), args); err != nil {
			t.Error(err)
		}
	})
	gated := withFlag(args, "--feature-gates", strings.Join(gates, ","))
	if err := c.restartAPIServer(t.Context(), gated); err != nil {
		t.Fatal(err)
	}
}

// restartAPIServer stops kube-apiserver if it runs, paused or not, and
// starts it with args, waiting until it is ready. It starts it even when
// it had exited on its own, and then reports that too.
func (c *Cluster) restartAPIServer(ctx context.Context, args []string) error {
	stopErr := c.apiserver.stop(stopGrace)
	c.apiserver.args = args
	return errors.Join(stopErr, c.startAPIServer(ctx))
}

// withFlag is a copy of args with "name=value" in place of every argument
// setting name.
func withFlag(args []string, name, value string) []string {
	args = slices.DeleteFunc(slices.Clone(args), func(arg string) bool {
		return strings.HasPrefix(arg, name+"=")
	})
	return append(args, name+"="+value)
}
