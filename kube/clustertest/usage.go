package clustertest

import (
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/procutil"
)

// CPU is the CPU time, user and system, that each component of the
// control plane this package runs has used since it last started, by its
// name: "etcd", "kube-apiserver" and "kube-controller-manager". A
// component restarted (StopAPIServer and StartAPIServer, a fault, a
// feature gate) counts from its restart, so a difference of two readings
// means something only when neither restarted in between. A component
// that isn't running is left out; an existing cluster's (FromKubeconfig)
// aren't this package's to read, so its map is empty. It reads /proc, and
// fails the test on a system without it.
func (c *Cluster) CPU(t testing.TB) map[string]time.Duration {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	used := map[string]time.Duration{}
	for _, p := range []*process{c.etcd, c.apiserver, c.controllerManager} {
		if p == nil || !p.running() {
			continue
		}
		d, err := procutil.CPU(p.pid())
		if err != nil {
			t.Fatalf("clustertest: the CPU time of %s: %v", p.name, err)
		}
		used[p.name] = d
	}
	return used
}
