// Package apptest holds the checks the examples' whole-App tests make
// alike, so each is written once: an App, started by humustest.Start as
// its pod would run, stops on its signal, and leaves its Lease for the
// next leader.
//
//   - Stop signals the App and fails the test, with the App's stderr, unless
//     it exits 0 within clustertest.AwaitExit's minute.
//   - LeaseReleased fails the test unless the Lease has no holder, so a next
//     leader takes over at once instead of after the Lease's duration.
//
// It is internal to the examples: a controller of one's own tests itself
// with humustest and clustertest, whose calls these are.
package apptest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// Stop sends p its signal, as the kubelet sends SIGTERM to a pod, and
// waits for it to exit. It fails t at once, showing host's stderr, unless
// the exit code is 0.
func Stop(t testing.TB, p *humustest.Process, host *humustest.Host) {
	t.Helper()
	p.Signal()
	if code := clustertest.AwaitExit(t, p); code != 0 {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", code, host.Stderr())
	}
}

// LeaseReleased fails t unless the Lease ns/name, read with kc, has no
// holder: an App that exited released it, and the next leader takes
// over at once. It fails t at once if the Lease can't be read.
func LeaseReleased(t testing.TB, kc kubernetes.Interface, ns, name string) {
	t.Helper()
	l, err := kc.CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Lease: %v", err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease's holder = %q after exit, want none: the next leader takes over at once", *h)
	}
}
