package crd_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/z5labs/humus/kube/internal/crd"
)

// TestMarshalLeavesOutTheStatus checks that Marshal writes the CRD's YAML
// without the zero status, which the API server writes, and refuses no
// CRD.
func TestMarshalLeavesOutTheStatus(t *testing.T) {
	c, err := crd.Build(thing, reflect.TypeFor[struct{}](), reflect.TypeFor[struct{}](), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := crd.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	if !strings.HasPrefix(y, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n") {
		t.Errorf("the YAML doesn't begin with the CRD's apiVersion, kind and metadata, keys sorted:\n%s", y)
	}
	if strings.Contains(y, "\nstatus:") || strings.Contains(y, "acceptedNames") || strings.Contains(y, "storedVersions") {
		t.Errorf("the YAML has a status:\n%s", y)
	}
	if _, err := crd.Marshal(nil); err == nil || err.Error() != "kube: MarshalCRD: the CRD is nil" {
		t.Errorf("Marshal(nil) = %v, want kube: MarshalCRD: the CRD is nil", err)
	}
}
