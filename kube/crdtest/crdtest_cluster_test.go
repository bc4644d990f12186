package crdtest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/crdtest"
)

// TestMain starts the real control plane only when a TestCluster test asks
// for it, and stops it when the tests end.
// The repository's tests build the control plane, never download it: its
// machines reach no download location.
func TestMain(m *testing.M) { os.Exit(clustertest.Run(m, clustertest.Fetch(clustertest.BuildOnly))) }

// TestClusterRuleCost checks crdtest's verdict on a CEL rule's cost
// against the API server's own: the rule over unbounded items, which the
// API server refuses with the message crdtest quotes; the same rule with
// the bound crdtest names, which the API server takes; and one item more
// than that bound, which both refuse.
func TestClusterRuleCost(t *testing.T) {
	ext, err := apiextensionsclient.NewForConfig(clustertest.Get(t).AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	const rule = allDNSLabels
	for _, tt := range []struct {
		name     string
		maxItems int // 0 for none
		taken    bool
	}{
		{"unbounded", 0, false},
		{"the bound crdtest names", 10, true},
		{"one more", 11, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var spec MirrorSpec
			targets := kube.Field(&spec.Targets)
			if tt.maxItems > 0 {
				targets = targets.MaxItems(tt.maxItems)
			}
			r := kube.Resource[MirrorSpec, struct{}]{
				Group: fmt.Sprintf("cost%d.crd.humus.test", tt.maxItems), Version: "v1", Kind: "Mirror", Plural: "mirrors", Scope: kube.Namespaced,
				Rules: []kube.TypeRules{kube.Rules(&spec, targets).Validation(rule, "")},
			}
			crd, err := r.CRD()
			if err != nil {
				t.Fatal(err)
			}
			checked := crdtest.Validate(crd)
			_, created := ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{})
			if created == nil {
				t.Cleanup(func() {
					_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
				})
			}
			switch {
			case tt.taken && (checked != nil || created != nil):
				t.Fatalf("crdtest says %v, the API server %v; want both to take it", checked, created)
			case !tt.taken && (checked == nil || created == nil):
				t.Fatalf("crdtest says %v, the API server %v; want both to refuse it", checked, created)
			case tt.taken:
				return
			}
			// The API server's message for the rule, which crdtest quotes
			// whole.
			const prefix = "Forbidden: estimated rule cost exceeds budget by factor of "
			i := strings.Index(created.Error(), prefix)
			if i < 0 {
				t.Fatalf("the API server says %v, want %q", created, prefix)
			}
			said, _, _ := strings.Cut(created.Error()[i:], ", spec.validation")
			said, _, _ = strings.Cut(said, "]")
			if !strings.Contains(checked.Error(), `spec: x-kubernetes-validations[0].rule "`+rule+`": `+said) {
				t.Errorf("crdtest says:\n%v\nthe API server:\n%v\nwant crdtest to quote %q", checked, created, said)
			}
		})
	}
}
