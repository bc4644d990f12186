package kubeconfigtest

import (
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/clustertest/internal/fataltest"
)

func TestClusterKubeconfigIsTheExistingCluster(t *testing.T) {
	c := clustertest.Get(t)
	if c == existing {
		t.Fatal("Get returned the cluster TestMain started, not one of its kubeconfig")
	}
	if c.Server() != existing.Server() || c.KubeconfigPath() != existing.KubeconfigPath() ||
		c.AdminToken() != existing.AdminToken() || string(c.CAPEM()) != string(existing.CAPEM()) {
		t.Errorf("Server %q, KubeconfigPath %q, AdminToken %q; want the existing cluster's %q, %q, %q and its CA",
			c.Server(), c.KubeconfigPath(), c.AdminToken(), existing.Server(), existing.KubeconfigPath(), existing.AdminToken())
	}
	if msg := fataltest.Message(t, c.RequireControllers); msg != "" {
		t.Errorf("RequireControllers on an existing cluster failed with %q", msg)
	}
}

// TestClusterKubeconfigRefuses checks that what needs the control plane's
// processes or CA fails the test, saying why.
func TestClusterKubeconfigRefuses(t *testing.T) {
	c := clustertest.Get(t)
	this := " needs a control plane this package starts, and this is the existing cluster of the kubeconfig " + existing.KubeconfigPath()
	for what, call := range map[string]func(testing.TB){
		"KillAPIServer":   c.KillAPIServer,
		"KillEtcd":        c.KillEtcd,
		"PauseAPIServer":  c.PauseAPIServer,
		"ResumeAPIServer": c.ResumeAPIServer,
		"PauseEtcd":       c.PauseEtcd,
		"ResumeEtcd":      c.ResumeEtcd,
		"StopAPIServer":   c.StopAPIServer,
		"StartAPIServer":  c.StartAPIServer,
		"StopEtcd":        c.StopEtcd,
		"StartEtcd":       c.StartEtcd,
		"CompactEtcd":     func(tb testing.TB) { c.CompactEtcd(tb) },
		"FeatureGates":    func(tb testing.TB) { c.FeatureGates(tb, "ShardedListAndWatch=true") },
		"the audit log":   func(tb testing.TB) { c.Audit(tb) },
		"ClientCert, which signs with the control plane's CA,": func(tb testing.TB) { c.ClientCert(tb, "someone") },
	} {
		want := "clustertest: " + what + this
		if got := fataltest.Message(t, call); got != want {
			t.Errorf("%s failed with\n%q, want\n%q", what, got, want)
		}
	}
	got := fataltest.Message(t, func(tb testing.TB) { c.AwaitAudit(tb, time.Second, func(clustertest.AuditEvent) bool { return true }) })
	if want := "clustertest: the audit log" + this; got != want {
		t.Errorf("AwaitAudit failed with\n%q, want\n%q", got, want)
	}
}

// gadgetsCRD is the name of gadgetResource's CRD.
const gadgetsCRD = "gadgets.kubeconfig.humus.test"

// installed is whether TestClusterKubeconfigInstall installed it.
var installed bool

// gadgetResource is a Resource of a namespaced Gadget.
type gadgetResource struct{}

func (gadgetResource) CRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: gadgetsCRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kubeconfig.humus.test",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Kind: "Gadget"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: new(true),
				}},
			}},
		},
	}, nil
}

// TestClusterKubeconfigPodHost runs what a whole App's test needs on the
// existing cluster: a CRD, a namespace, and a pod's Host whose
// ServiceAccount has exactly its grants.
func TestClusterKubeconfigPodHost(t *testing.T) {
	c := clustertest.Get(t)
	c.Install(t, gadgetResource{})
	installed = true
	ns := c.Namespace(t)
	h := c.PodHost(t, ns, "gadget-controller-0", "gadget-controller", clustertest.Grant{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"kubeconfig.humus.test"}, Resources: []string{"gadgets"}, Verbs: []string{"list", "create"}},
	}})
	cfg := &rest.Config{
		Host:            "https://" + h.Env["KUBERNETES_SERVICE_HOST"] + ":" + h.Env["KUBERNETES_SERVICE_PORT"],
		BearerToken:     string(h.Files[clustertest.TokenFile].Data),
		TLSClientConfig: rest.TLSClientConfig{CAData: h.Files[clustertest.CAFile].Data},
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":gadget-controller"; got != want {
		t.Errorf("the pod's token authenticates as %q, want %q", got, want)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gadgets := dyn.Resource(schema.GroupVersionResource{Group: "kubeconfig.humus.test", Version: "v1", Resource: "gadgets"}).Namespace(ns)
	if _, err := gadgets.Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeconfig.humus.test/v1", "kind": "Gadget", "metadata": map[string]any{"name": "one"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a Gadget as the pod: %v", err)
	}
	if _, err := gadgets.Get(t.Context(), "one", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("getting a Gadget as the pod, which may only list and create: %v, want 403", err)
	}
}
