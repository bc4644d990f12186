package admission_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/admission/policytest"
	"github.com/z5labs/humus/kube/clustertest"
)

type SiteSpec struct {
	Hosts []string `json:"hosts,omitempty"`
}

var Site = kube.Resource[SiteSpec, struct{}]{
	Group: "admission.example.com", Version: "v1", Kind: "Site", Plural: "sites", Scope: kube.Namespaced,
}

// TestClusterPolicyOverItsCost checks what policytest says of an
// expression over the cost limit against the API server: the policy is
// created, as policytest says it would be, and a write of a large enough
// object fails, its expression stopped at the limit.
func TestClusterPolicyOverItsCost(t *testing.T) {
	var s kube.Object[SiteSpec, struct{}]
	p := admission.PolicyFor(Site, &s, admission.PolicySettings{},
		admission.Validation("%[1]s.all(a, %[1]s.all(b, a == b || !a.startsWith(b)))", "no host is a prefix of another", admission.Field(&s.Spec.Hosts)))
	objs, err := p.Objects()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := Site.CRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := policytest.Validate(crd, objs...); err == nil || !strings.Contains(err.Error(), "exceeds the API server's limit for one expression") {
		t.Fatalf("policytest.Validate = %v, want the cost over the limit", err)
	}

	c := clustertest.Get(t)
	c.Install(t, Site)
	installPolicy(t, c, p)
	ns := c.Namespace(t)
	res := dynamic.NewForConfigOrDie(c.AdminConfig()).Resource(Site.GVR()).Namespace(ns)
	site := func(name string, n, length int) error {
		hosts := make([]any, n)
		for i := range hosts {
			hosts[i] = fmt.Sprintf("%0*d", length, i)
		}
		_, err := res.Create(t.Context(), objectOf("Site", ns, name, map[string]any{"hosts": hosts}), metav1.CreateOptions{})
		return err
	}
	// In effect once a Site of a host that prefixes another is refused.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := res.Create(t.Context(), objectOf("Site", ns, "probe", map[string]any{"hosts": []any{"a", "ab"}}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "no host is a prefix of another") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy wasn't in effect within 30s: the dry run answered %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := site("small", 10, 10); err != nil {
		t.Errorf("a Site of 10 hosts answered %v, want it stored", err)
	}
	err = site("large", 300, 1000)
	t.Logf("a Site of 300 hosts of 1,000 characters answered %v", err)
	if err == nil || !strings.Contains(err.Error(), "cost") {
		t.Errorf("a Site of 300 hosts of 1,000 characters answered %v, want its expression stopped at the cost limit", err)
	}
}
