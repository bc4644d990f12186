package app_test

import (
	"os"
	"testing"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/memcached/app"
)

// The RBAC that deploys with the controller is the one its code declares:
// Init builds the App as its pod in memcached-system would, with no API
// server behind it, and kube.MarshalRBAC derives the rules from the
// controller and the Recorder it returns. A right the code needs that
// deploy/rbac.yaml lacks, or one it grants that the code no longer
// needs, fails go test; go test -run TestMemcachedRBAC -update rewrites
// it.
func TestMemcachedRBAC(t *testing.T) {
	h := clustertest.OfflinePodHost(t, "memcached-system", "memcached-controller-7d9f-x2k4q")
	svcs, err := app.Init(t.Context(), &humus.Setup{Host: h.Host()})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	got, err := kube.MarshalRBAC(app.Name, "memcached-system", svcs...)
	if err != nil {
		t.Fatal(err)
	}
	const golden = "../deploy/rbac.yaml"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestMemcachedRBAC -update to write it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("the App's RBAC isn't %s: run go test -run TestMemcachedRBAC -update, and review the diff.\ngot:\n%s", golden, got)
	}
}
