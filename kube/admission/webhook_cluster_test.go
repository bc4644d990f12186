package admission_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/webhook"
)

// servedWebhook is a Webhooks' Handler served as an App serves it.
type servedWebhook struct {
	hooks admission.Webhooks // its Endpoint the Service's URL and CA
	svc   *webhook.Service
	stop  func() // stops the Service; Cleanup calls it too
}

// serveWebhooks serves w's Handler on a webhook.Service, the core's HTTPS
// Service, listening on 127.0.0.1 through a humustest Host whose files hold
// a serving certificate of a CA of its own, as a cert-manager Secret
// volume would, and returns w with its Endpoint the Service's URL and CA.
func serveWebhooks(t *testing.T, tel *humustest.Telemetry, w admission.Webhooks) *servedWebhook {
	t.Helper()
	authority, err := clustertest.NewCA("admission webhook CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := authority.Serving("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	host := humustest.NewHost()
	host.Files["etc/webhook/tls/tls.crt"] = &fstest.MapFile{Data: certPEM}
	host.Files["etc/webhook/tls/tls.key"] = &fstest.MapFile{Data: keyPEM}
	h, err := w.Handler(tel.Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /admission/", h)
	svc, err := webhook.NewService(&humus.Setup{Host: host.Host(), Telemetry: tel.Telemetry()},
		webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/etc/webhook/tls"}, mux)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("the webhook's Serve = %v", err)
			}
			_ = svc.Shutdown(context.Background())
		})
	}
	t.Cleanup(stop)
	addr, err := svc.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Endpoint = admission.Endpoint{URL: "https://" + addr.String() + "/admission", CABundle: authority.PEM()}
	return &servedWebhook{hooks: w, svc: svc, stop: stop}
}

// install creates w's configurations, deleting them at t's end.
func install(t testing.TB, c *clustertest.Cluster, w admission.Webhooks) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(c.AdminConfig())
	ctx := t.Context()
	v, err := w.Validating()
	if err != nil {
		t.Fatal(err)
	}
	m, err := w.Mutating()
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), v.Name, metav1.DeleteOptions{})
		})
	}
	if m != nil {
		if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), m.Name, metav1.DeleteOptions{})
		})
	}
}

// warnings collects the warnings the API server sends a client.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// widgets is a dynamic client of Widgets in ns, and the warnings it is
// sent.
func widgets(t *testing.T, c *clustertest.Cluster, ns string) (dynamic.ResourceInterface, *warnings) {
	t.Helper()
	cfg := c.AdminConfig()
	w := &warnings{}
	cfg.WarningHandler = w
	return dynamic.NewForConfigOrDie(cfg).Resource(Widget.GVR()).Namespace(ns), w
}

func widgetObject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return objectOf("Widget", ns, name, spec)
}

// objectOf is an object of kind, a Widget's twin, in ns.
func objectOf(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admission.example.com/v1", "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     spec,
	}}
}

// calls records what a webhook's function was handed.
type calls struct {
	mu   sync.Mutex
	reqs []admission.Request
}

func (c *calls) add(r admission.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, r)
}

func (c *calls) of(name string) []admission.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []admission.Request
	for _, r := range c.reqs {
		if r.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// clusterWebhooks are the Widget's validating and defaulting webhooks the
// cluster tests serve: a size of at most 3, a host that doesn't change,
// the image operator-only only for the group widget-operators, a warning
// for an image of the latest tag; a size of 1 and an image of
// nginx:1 by default.
func clusterWebhooks(seen *calls) admission.Webhooks {
	return admission.Webhooks{
		Name: "widget-operator",
		Hooks: []admission.Webhook{
			admission.Validating(Widget, admission.Settings{}, func(_ context.Context, req admission.Request, old, obj *widget) ([]string, error) {
				seen.add(req)
				var warns []string
				if strings.HasSuffix(obj.Spec.Image, ":latest") {
					warns = append(warns, fmt.Sprintf("spec.image %q: a :latest tag moves under the Widget; pin a version", obj.Spec.Image))
				}
				var errs field.ErrorList
				if obj.Spec.Size > 3 {
					errs = append(errs, field.Invalid(field.NewPath("spec", "size"), obj.Spec.Size, "must be 3 or less"))
				}
				if old != nil && old.Spec.Host != obj.Spec.Host {
					errs = append(errs, field.Invalid(field.NewPath("spec", "host"), obj.Spec.Host, "is immutable: it was "+old.Spec.Host))
				}
				if obj.Spec.Image == "operator-only" && !slices.Contains(req.UserInfo.Groups, "widget-operators") {
					errs = append(errs, field.Forbidden(field.NewPath("spec", "image"), req.UserInfo.Username+" isn't a widget-operator"))
				}
				return warns, errs.ToAggregate()
			}),
			admission.Defaulting(Widget, admission.Settings{}, func(_ context.Context, req admission.Request, _, obj *widget) ([]string, error) {
				if obj.Spec.Size == 0 {
					obj.Spec.Size = 1
				}
				if obj.Spec.Image == "" {
					obj.Spec.Image = "nginx:1"
				}
				return nil, nil
			}),
		},
	}
}

// awaitInEffect waits for the API server to call the webhooks: until a
// dry run of a Widget of size 4 is refused.
func awaitInEffect(t *testing.T, res dynamic.ResourceInterface, ns string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := res.Create(t.Context(), widgetObject(ns, "probe", map[string]any{"size": int64(4), "host": "probe"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "denied the request") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhooks weren't called within 30s: the last dry run answered %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterWebhooks runs a Widget's validating and defaulting webhooks
// on the real control plane: a create and an update refused with the
// validator's message and field path, a warning shown to the client,
// defaults applied on a create, and a dry run honoured.
//
// And a rule of who asks: the image operator-only refused to the admin,
// and stored for a user of the group widget-operators.
func TestClusterWebhooks(t *testing.T) {
	c := clustertest.Get(t)
	c.Install(t, Widget)
	seen := &calls{}
	served := serveWebhooks(t, humustest.NewTelemetry(), clusterWebhooks(seen))
	install(t, c, served.hooks)
	ns := c.Namespace(t)
	res, warned := widgets(t, c, ns)
	awaitInEffect(t, res, ns)
	ctx := t.Context()

	t.Run("a create refused with the message and field path", func(t *testing.T) {
		_, err := res.Create(ctx, widgetObject(ns, "big", map[string]any{"size": int64(5), "host": "big.example.com"}), metav1.CreateOptions{})
		checkInvalid(t, err, "spec.size", `admission webhook "validate.widgets.admission.example.com" denied the request: Widget.admission.example.com "big" is invalid: spec.size: Invalid value: 5: must be 3 or less`)
		if _, err := res.Get(ctx, "big", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused Widget is there: Get = %v", err)
		}
	})

	t.Run("defaults applied on a create", func(t *testing.T) {
		got, err := res.Create(ctx, widgetObject(ns, "plain", map[string]any{"host": "plain.example.com"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkSpec(t, got, 1, "nginx:1")
		stored, err := res.Get(ctx, "plain", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkSpec(t, stored, 1, "nginx:1")
	})

	t.Run("an update refused with the message and field path", func(t *testing.T) {
		obj, err := res.Get(ctx, "plain", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(obj.Object, "other.example.com", "spec", "host")
		_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
		checkInvalid(t, err, "spec.host", `Widget.admission.example.com "plain" is invalid: spec.host: Invalid value: "other.example.com": is immutable: it was plain.example.com`)
	})

	t.Run("a warning shown to the client", func(t *testing.T) {
		warned.take()
		if _, err := res.Create(ctx, widgetObject(ns, "latest", map[string]any{"host": "latest.example.com", "image": "nginx:latest"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := warned.take()
		if want := `spec.image "nginx:latest": a :latest tag moves under the Widget; pin a version`; len(got) != 1 || got[0] != want {
			t.Errorf("the client was warned %q, want %q", got, want)
		}
	})

	t.Run("a rule of who asks", func(t *testing.T) { checkARuleOfWhoAsks(ctx, t, c, res, ns) })

	t.Run("a dry run honoured", func(t *testing.T) {
		got, err := res.Create(ctx, widgetObject(ns, "dry", map[string]any{"host": "dry.example.com"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		checkSpec(t, got, 1, "nginx:1")
		if _, err := res.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the dry run stored the Widget: Get = %v", err)
		}
		reqs := seen.of("dry")
		if len(reqs) != 1 || !reqs[0].DryRun || reqs[0].Operation != admission.Create || reqs[0].UserInfo.Username == "" {
			t.Errorf("the validator was handed %+v, want one dry-run CREATE with its requester", reqs)
		}
	})
}

// checkARuleOfWhoAsks checks the validator's rule of who asks: the image
// operator-only refused to the admin, stored for a widget-operator.
func checkARuleOfWhoAsks(ctx context.Context, t *testing.T, c *clustertest.Cluster, res dynamic.ResourceInterface, ns string) {
	_, err := res.Create(ctx, widgetObject(ns, "admins", map[string]any{"host": "admins.example.com", "image": "operator-only"}), metav1.CreateOptions{})
	checkInvalid(t, err, "spec.image", "spec.image: Forbidden: ")
	cfg := rest.AnonymousClientConfig(c.AdminConfig())
	cert := c.ClientCert(t, "olivia", "widget-operators")
	cfg.CertData, cfg.KeyData = pemCert(t, cert)
	bind(t, c, ns, "olivia")
	asOlivia := dynamic.NewForConfigOrDie(cfg).Resource(Widget.GVR()).Namespace(ns)
	if _, err := asOlivia.Create(ctx, widgetObject(ns, "olivias", map[string]any{"host": "olivias.example.com", "image": "operator-only"}), metav1.CreateOptions{}); err != nil {
		t.Errorf("a widget-operator's create answered %v, want it stored", err)
	}
}

func checkInvalid(t *testing.T, err error, fieldPath, msg string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("the write answered %v, want Invalid", err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("the refusal says\n%v\nwant it to say\n%s", err, msg)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) != 1 || status.Status().Details.Causes[0].Field != fieldPath {
		t.Errorf("the refusal's details are %+v, want one cause of %s", status.Status().Details, fieldPath)
	}
}

func checkSpec(t *testing.T, obj *unstructured.Unstructured, size int64, image string) {
	t.Helper()
	gotSize, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size")
	gotImage, _, _ := unstructured.NestedString(obj.Object, "spec", "image")
	if gotSize != size || gotImage != image {
		t.Errorf("the Widget's spec is size %d, image %q; want the defaults %d and %q", gotSize, gotImage, size, image)
	}
}

var _ rest.WarningHandler = (*warnings)(nil)

// pemCert is cert's certificate and key, PEM.
func pemCert(t *testing.T, cert tls.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
}

// bind lets user create Widgets in ns.
func bind(t *testing.T, c *clustertest.Cluster, ns, user string) {
	t.Helper()
	rbac := kubernetes.NewForConfigOrDie(c.AdminConfig()).RbacV1()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "widget-writer", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{Widget.Group}, Resources: []string{Widget.Plural}, Verbs: []string{"create"}},
	}}
	if _, err := rbac.Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "widget-writer", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "widget-writer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := rbac.RoleBindings(ns).Create(t.Context(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
