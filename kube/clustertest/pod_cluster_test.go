package clustertest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest/internal/fataltest"
)

// podManifest grants list on ConfigMaps cluster-wide, and get on Leases in
// the controller's namespace.
const podManifest = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: shop-controller
  namespace: shop-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: shop-controller
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: shop-controller
  namespace: shop-system
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get]
`

func TestClusterPodHost(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	path := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(path, []byte(podManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := adminClient(t, c)

	t.Run("is the pod's", func(t *testing.T) {
		h := c.PodHost(t, ns, "shop-controller-0", "shop-controller", RBACGrants(t, path, ns)...)
		host, port, _ := net.SplitHostPort(c.Server())
		for k, want := range map[string]string{
			"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port,
			"POD_NAMESPACE": ns, "POD_NAME": "shop-controller-0",
		} {
			if got := h.Env[k]; got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		l, err := net.Listen("tcp", h.Env["PROBES_ADDR"])
		if err != nil {
			t.Errorf("listening on PROBES_ADDR %q: %v", h.Env["PROBES_ADDR"], err)
		} else {
			_ = l.Close()
		}
		if got := string(h.Files[CAFile].Data); got != string(c.CAPEM()) {
			t.Errorf("the CA file holds %q, want CAPEM", got)
		}
		if got := string(h.Files[NamespaceFile].Data); got != ns {
			t.Errorf("the namespace file holds %q, want %q", got, ns)
		}

		// As the pod's client would connect: from the Host alone.
		client := podClient(t, h)
		review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":shop-controller"; got != want {
			t.Errorf("the token authenticates as %q, want %q", got, want)
		}
		if _, err := client.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Errorf("listing ConfigMaps in default, by the ClusterRole: %v", err)
		}
		if _, err := client.CoordinationV1().Leases(ns).Get(t.Context(), "absent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("getting a Lease in %s, by the Role: %v, want 404", ns, err)
		}
		if _, err := client.CoordinationV1().Leases("default").Get(t.Context(), "absent", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("getting a Lease in default, outside the Role's namespace: %v, want 403", err)
		}
		if _, err := client.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("listing Secrets: %v, want 403", err)
		}
	})

	if _, err := admin.CoreV1().ServiceAccounts(ns).Get(t.Context(), "shop-controller", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ServiceAccount after its test's cleanup: %v, want 404", err)
	}
	roles, err := admin.RbacV1().Roles(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(roles.Items) != 0 {
		t.Errorf("the Roles in %s after the test's cleanup: %d, %v; want none", ns, len(roles.Items), err)
	}
}

// podClient is a clientset made as a pod's is, from its Host's
// environment and service account files.
func podClient(t *testing.T, h *humustest.Host) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(&rest.Config{
		Host:            "https://" + net.JoinHostPort(h.Env["KUBERNETES_SERVICE_HOST"], h.Env["KUBERNETES_SERVICE_PORT"]),
		BearerToken:     string(h.Files[TokenFile].Data),
		TLSClientConfig: rest.TLSClientConfig{CAData: h.Files[CAFile].Data},
	})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// crdResource is a Resource whose CRD is crd, or err.
type crdResource struct {
	crd *apiextensionsv1.CustomResourceDefinition
	err error
}

func (r crdResource) CRD() (*apiextensionsv1.CustomResourceDefinition, error) { return r.crd, r.err }

// gadgetCRD is widgetCRD renamed to plural, of Kind kind.
func gadgetCRD(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	crd := widgetCRD()
	crd.Name = plural + "." + widgets.Group
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind}
	return crd
}

func TestClusterInstall(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	crds, err := c.crdClient()
	if err != nil {
		t.Fatal(err)
	}

	got := fataltest.Message(t, func(tb testing.TB) {
		c.Install(tb, crdResource{err: errors.New("kube: Spec: bad")}, crdResource{crd: gadgetCRD("spares", "Spare")}, crdResource{err: errors.New("kube: Status: bad")})
	})
	if want := "clustertest: Install: kube: Spec: bad\nkube: Status: bad"; got != want {
		t.Errorf("Install of failing resources failed with %q, want %q", got, want)
	}
	if _, err := crds.Get(t.Context(), "spares."+widgets.Group, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the CRD of the resource beside the failing ones: %v, want 404: nothing installed", err)
	}

	c.Install(t, crdResource{crd: gadgetCRD("gadgets", "Gadget")}, crdResource{crd: gadgetCRD("gizmos", "Gizmo")})
	for _, kind := range []string{"Gadget", "Gizmo"} {
		gvr := schema.GroupVersionResource{Group: widgets.Group, Version: widgets.Version, Resource: map[string]string{"Gadget": "gadgets", "Gizmo": "gizmos"}[kind]}
		obj := widget(ns, "one", map[string]any{"replicas": int64(2)})
		obj.SetKind(kind)
		got, err := dynamicClient(t, c).Resource(gvr).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating a %s at once after Install: %v", kind, err)
		}
		if size, _, _ := unstructured.NestedString(got.Object, "spec", "size"); size != "small" {
			t.Errorf("the %s's spec.size = %q, want the CRD's default, small", kind, size)
		}
	}
	if msg := fataltest.Message(t, c.RequireControllers); msg != "" {
		t.Errorf("RequireControllers on the control plane built from source failed with %q", msg)
	}
}
