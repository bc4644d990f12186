package app_test

import (
	"flag"
	"os"
	"testing"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/defaultdeny/app"
)

var update = flag.Bool("update", false, "rewrite the golden RBAC")

// The RBAC that deploys with the controller is the one its code declares:
// Init builds the App as its pod in default-deny would, with no API
// server behind it, and kube.MarshalRBAC derives the rules from the
// controller it returns. A right the code needs that deploy/rbac.yaml
// lacks, or one it grants that the code no longer needs, fails go test;
// go test -run TestDefaultDenyRBAC -update rewrites it.
func TestDefaultDenyRBAC(t *testing.T) {
	h := clustertest.OfflinePodHost(t, "default-deny", "default-deny-5c7b9-qx2lm")
	svcs, err := app.Init(t.Context(), &humus.Setup{Host: h.Host()})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	got, err := kube.MarshalRBAC(app.Name, "default-deny", svcs...)
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
		t.Fatalf("%v (run go test -run TestDefaultDenyRBAC -update to write it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("the App's RBAC isn't %s: run go test -run TestDefaultDenyRBAC -update, and review the diff.\ngot:\n%s", golden, got)
	}
}
