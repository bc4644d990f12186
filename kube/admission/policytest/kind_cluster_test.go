package policytest_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"

	"github.com/z5labs/humus/kube/admission/policytest"
	"github.com/z5labs/humus/kube/clustertest"
)

// TestClusterAKindsEstimateIsTheAPIServers: the cost ValidateKind
// estimates of an expression of Deployments, typed by the schema it
// reflects from appsv1.Deployment, is the one the same estimator gives
// typed by the API server's own schema of Deployments, as its type
// checking resolves it from its OpenAPI: neither stricter nor looser.
// (Reflected with the required fields of the Go type, every list's
// estimate was a quarter of the API server's: looser.) The API server's
// schema gives a resource.Quantity no type (oneOf string or number), so
// its type checking finds no field of Quantities, such as a container's
// resources.limits, which the reflected schema types as
// x-kubernetes-int-or-string, as a CRD's: left out here.
func TestClusterAKindsEstimateIsTheAPIServers(t *testing.T) {
	c := clustertest.Get(t)
	r := &resolver.ClientDiscoveryResolver{Discovery: discovery.NewDiscoveryClientForConfigOrDie(c.AdminConfig())}
	server, err := r.ResolveSchema(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err != nil {
		t.Fatal(err)
	}
	for _, expr := range []string{
		"object.spec.replicas <= 10",
		"size(object.spec.template.spec.containers) <= 5",
		"object.spec.template.spec.containers.all(c, c.image.contains(':'))",
		"object.spec.template.spec.containers.all(c, c.env.all(e, e.name != ''))",
		"object.spec.template.spec.containers.all(c, c.env.all(e, object.spec.template.spec.containers.all(o, o.env.all(f, f.name != e.name || f.value == e.value))))",
		"object.spec.template.spec.volumes.all(v, !has(v.hostPath))",
		"!has(object.spec.strategy.rollingUpdate) || has(object.spec.strategy.rollingUpdate.maxSurge)",
	} {
		ours, theirs, err := policytest.KindCosts(deployments, server, expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		t.Logf("%s: %d reflected, %d the API server's", expr, ours, theirs)
		if ours != theirs {
			t.Errorf("%s: estimated %d typed by the reflected schema, %d by the API server's", expr, ours, theirs)
		}
	}
}
