package app_test

import (
	"flag"
	"os"
	"testing"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/crdtest"
	"github.com/z5labs/humus/kube/example/memcached/app"
)

var update = flag.Bool("update", false, "rewrite the golden files: the CRD and the RBAC")

// The CRD that deploys with the controller is the one the Go types
// reflect: a change to the types that isn't in the YAML fails go test, in
// place of a make manifests that someone forgot to run. Rewrite it with
// go test -run TestMemcachedCRD -update. crdtest checks it as the API
// server will, CEL rules' costs included.
func TestMemcachedCRD(t *testing.T) {
	crd, err := app.Memcached.CRD()
	if err != nil {
		t.Fatalf("Memcached.CRD: %v", err)
	}
	if err := crdtest.Validate(crd); err != nil {
		t.Fatal(err)
	}
	got, err := kube.MarshalCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	const golden = "../deploy/crds/memcacheds.cache.example.com.yaml"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestMemcachedCRD -update to write it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("Memcached.CRD() isn't %s: run go test -run TestMemcachedCRD -update, and review the diff.\ngot:\n%s", golden, got)
	}
}
