package kube_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/crdtest"
)

// MemcachedSpecV1beta1 is Memcached's spec at v1beta1: v1alpha1's Size
// renamed Replicas, and a Port v1alpha1 doesn't have.
type MemcachedSpecV1beta1 struct {
	Replicas int32  `json:"replicas"`
	Image    string `json:"image"`
	Port     int32  `json:"port,omitempty"`
}

var (
	specV1beta1 MemcachedSpecV1beta1

	MemcachedV1beta1 = kube.Resource[MemcachedSpecV1beta1, MemcachedStatus]{
		Group:      "cache.example.com",
		Version:    "v1beta1",
		Kind:       "Memcached",
		Plural:     "memcacheds",
		Scope:      kube.Namespaced,
		ShortNames: []string{"mc"},
		Categories: []string{"example"},
		Columns: []kube.Column{
			{Name: "Replicas", JSONPath: ".spec.replicas"},
			{Name: "Port", JSONPath: ".spec.port"},
			{Name: "Ready", JSONPath: ".status.readyReplicas"},
			{Name: "Age", JSONPath: ".metadata.creationTimestamp"},
		},
		Scale: &kube.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.readyReplicas"},
		Rules: []kube.TypeRules{
			kube.Rules(&specV1beta1,
				kube.Field(&specV1beta1.Replicas).Minimum(1).Maximum(3).Description("How many memcached pods run."),
				kube.Field(&specV1beta1.Image).Pattern(regexp.MustCompile(`^memcached:`)).Default("memcached:1.6.26-alpine3.19"),
				kube.Field(&specV1beta1.Port).Minimum(1).Maximum(65535),
			),
			kube.Rules(&status, kube.Field(&status.Conditions).ListMap("type")),
		},
	}
)

// memcachedToV1beta1 and memcachedFromV1beta1 convert v1alpha1's objects
// to and from v1beta1, the hub: Size is Replicas, and v1alpha1 has no Port.
func memcachedToV1beta1(in kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
	return kube.Object[MemcachedSpecV1beta1, MemcachedStatus]{
		ObjectMeta: in.ObjectMeta,
		Spec:       MemcachedSpecV1beta1{Replicas: in.Spec.Size, Image: in.Spec.Image},
		Status:     in.Status,
	}, nil
}

func memcachedFromV1beta1(in kube.Object[MemcachedSpecV1beta1, MemcachedStatus]) (kube.Object[MemcachedSpec, MemcachedStatus], error) {
	return kube.Object[MemcachedSpec, MemcachedStatus]{
		ObjectMeta: in.ObjectMeta,
		Spec:       MemcachedSpec{Size: in.Spec.Replicas, Image: in.Spec.Image},
		Status:     in.Status,
	}, nil
}

// testCA is a CA's certificate, for the golden CRD's caBundle.
var testCA = func() []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "webhook-ca.pem"))
	if err != nil {
		panic(err)
	}
	return b
}()

func memcachedVersions() kube.Versions[MemcachedSpecV1beta1, MemcachedStatus] {
	return kube.Versions[MemcachedSpecV1beta1, MemcachedStatus]{
		Hub: MemcachedV1beta1,
		Others: []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{
			kube.VersionOf(Memcached, memcachedToV1beta1, memcachedFromV1beta1).
				Deprecated("cache.example.com/v1alpha1 Memcached is deprecated; use cache.example.com/v1beta1"),
		},
		Storage: "v1beta1",
		Webhook: kube.ConversionWebhook{URL: "https://memcached-operator.example.com:9443/convert", CABundle: testCA},
	}
}

// TestVersionsCRD is the golden test of a CRD of two versions.
func TestVersionsCRD(t *testing.T) {
	crd, err := memcachedVersions().CRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := crdtest.Validate(crd); err != nil {
		t.Fatalf("the API server would refuse the CRD: %v", err)
	}
	got, err := kube.MarshalCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "memcacheds.cache.example.com.versions.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(got) {
		t.Errorf("the CRD differs from %s (go test -run TestVersionsCRD -update rewrites it):\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
}

func TestVersionsCRDShape(t *testing.T) {
	v := memcachedVersions()
	v.Others = append(v.Others, kube.VersionOf(kube.Resource[MemcachedSpec, MemcachedStatus]{
		Group: "cache.example.com", Version: "v1", Kind: "Memcached", Plural: "memcacheds", Scope: kube.Namespaced,
	}, memcachedToV1beta1, memcachedFromV1beta1).NotServed())
	v.Webhook = kube.ConversionWebhook{Service: &kube.ServiceReference{Namespace: "ops", Name: "memcached-operator", Path: "/convert"}}
	crd, err := v.CRD()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cv := range crd.Spec.Versions {
		names = append(names, cv.Name)
		switch cv.Name {
		case "v1":
			if cv.Served || cv.Storage || cv.Deprecated {
				t.Errorf("v1: served %v, storage %v, deprecated %v; want not served, not stored, not deprecated", cv.Served, cv.Storage, cv.Deprecated)
			}
		case "v1beta1":
			if !cv.Served || !cv.Storage || cv.Deprecated {
				t.Errorf("v1beta1: served %v, storage %v, deprecated %v; want served, stored", cv.Served, cv.Storage, cv.Deprecated)
			}
			if cv.Schema.OpenAPIV3Schema.Properties["spec"].Properties["replicas"].Type != "integer" {
				t.Errorf("v1beta1's schema isn't its own types': %+v", cv.Schema.OpenAPIV3Schema.Properties["spec"])
			}
		case "v1alpha1":
			if !cv.Served || cv.Storage || !cv.Deprecated || cv.DeprecationWarning == nil {
				t.Errorf("v1alpha1: served %v, storage %v, deprecated %v, warning %v; want served, deprecated with a warning", cv.Served, cv.Storage, cv.Deprecated, cv.DeprecationWarning)
			}
			if _, ok := cv.Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"]; !ok {
				t.Errorf("v1alpha1's schema isn't its own types': %+v", cv.Schema.OpenAPIV3Schema.Properties["spec"])
			}
		}
	}
	if strings.Join(names, ",") != "v1,v1beta1,v1alpha1" {
		t.Errorf("versions %v, want Kubernetes' order, highest first: v1,v1beta1,v1alpha1", names)
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != "Webhook" || conv.Webhook == nil || len(conv.Webhook.ConversionReviewVersions) != 1 || conv.Webhook.ConversionReviewVersions[0] != "v1" {
		t.Fatalf("conversion %+v, want the Webhook strategy with ConversionReview v1", conv)
	}
	s := conv.Webhook.ClientConfig.Service
	if s == nil || s.Namespace != "ops" || s.Name != "memcached-operator" || s.Path == nil || *s.Path != "/convert" || s.Port == nil || *s.Port != 443 {
		t.Errorf("service %+v, want ops/memcached-operator, /convert, port 443", s)
	}
	if err := crdtest.Validate(crd); err != nil {
		t.Errorf("the API server would refuse the CRD: %v", err)
	}
}

// TestVersionsCRDErrors: every mistake across the versions, in one error.
func TestVersionsCRDErrors(t *testing.T) {
	other := Memcached
	other.Group = "other.example.com"
	other.Kind = "Memcache"
	other.Plural = "memcaches"
	other.Scope = kube.Cluster
	other.Version = "beta"
	other.ShortNames = []string{"mcs"}
	broken := Memcached
	broken.Version = "v1beta1"
	broken.Columns = []kube.Column{{Name: "Size", JSONPath: ".spec.sise"}}
	v := kube.Versions[MemcachedSpecV1beta1, MemcachedStatus]{
		Hub: MemcachedV1beta1,
		Others: []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{
			kube.VersionOf(other, memcachedToV1beta1, nil),
			kube.VersionOf(broken, memcachedToV1beta1, memcachedFromV1beta1).Deprecated("é"),
			{},
		},
		Storage: "v2",
		Webhook: kube.ConversionWebhook{URL: "http://user@example.com/convert?x=1", CABundle: []byte("not PEM")},
	}
	_, err := v.CRD()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`kube: Versions: Others[0] (beta): a nil conversion function: VersionOf takes both toHub and fromHub`,
		`kube: Versions: Others[0] (beta): Version "beta" isn't a Kubernetes version`,
		`kube: Versions: Others[0] (beta): Group other.example.com differs from Hub's cache.example.com`,
		`kube: Versions: Others[0] (beta): Kind Memcache differs from Hub's Memcached`,
		`kube: Versions: Others[0] (beta): Plural memcaches differs from Hub's memcacheds`,
		`kube: Versions: Others[0] (beta): Scope Cluster differs from Hub's Namespaced`,
		`kube: Versions: Others[0] (beta): ShortNames [mcs] differs from Hub's [mc]`,
		`kube: Versions: Others[1] (v1beta1): Version "v1beta1" is Hub's too`,
		`kube: Versions: Others[1] (v1beta1): kube: Resource.Columns[0] "Size" (.spec.sise): names no field of the schema`,
		`kube: Versions: Others[2]: a Version made without VersionOf`,
		`kube: Versions: Storage "v2" names none of the versions`,
		`kube: Versions.Webhook: URL "http://user@example.com/convert?x=1": should be https://host[:port]/path`,
		`kube: Versions.Webhook: CABundle holds no PEM certificate`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q:\n%v", want, err)
		}
	}
}

// TestVersionsCRDErrorsBeyondTheVersions: the mistakes of Versions' own
// fields, of a version whose CRD is good.
func TestVersionsCRDErrorsBeyondTheVersions(t *testing.T) {
	good := memcachedVersions()
	good.Others[0] = good.Others[0].Deprecated("é")
	good.Storage = ""
	good.Webhook = kube.ConversionWebhook{}
	_, err := good.CRD()
	for _, want := range []string{
		`kube: Versions: Others[0] (v1alpha1): Deprecated warning "é" holds a character that isn't printable ASCII`,
		`kube: Versions: missing Storage`,
		`kube: Versions.Webhook: missing URL or Service`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q:\n%v", want, err)
		}
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Errorf("the error %T isn't one joining every mistake", err)
	}
	both := memcachedVersions()
	both.Webhook.Service = &kube.ServiceReference{Name: "x", Port: 70000, Path: "convert"}
	_, err = both.CRD()
	if err == nil || !strings.Contains(err.Error(), `both URL "https://memcached-operator.example.com:9443/convert" and Service /x: give one`) {
		t.Errorf("both URL and Service: %v", err)
	}
	svc := memcachedVersions()
	svc.Webhook = kube.ConversionWebhook{Service: &kube.ServiceReference{Name: "x", Port: 70000, Path: "convert"}}
	_, err = svc.CRD()
	for _, want := range []string{"Service: missing Namespace", `Service: Path "convert" should start with /`, "Service: Port 70000 is not a port"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q:\n%v", want, err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	v := memcachedVersions()
	full := beta("a", 3, 11211)
	full.Status.Conditions = []metav1.Condition{{Type: "Available", Status: "True", Reason: "Up", LastTransitionTime: metav1.Unix(1e9, 0)}}
	if err := kube.RoundTrip(v, full, beta("b", 1, 0)); err != nil {
		t.Errorf("v1beta1's examples: %v", err)
	}
	if err := kube.RoundTrip(v, alpha("a", 3)); err != nil {
		t.Errorf("v1alpha1's example: %v", err)
	}
	// A field only the hub has, which toHub defaults: changed at the hub,
	// it comes back to v1alpha1 in the annotation that keeps it, which is
	// the change kept, not a loss (the docs' Website failed on it).
	defaulted := v
	defaulted.Others = []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{kube.VersionOf(Memcached,
		func(in kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
			out, err := memcachedToV1beta1(in)
			out.Spec.Port = 11211
			return out, err
		}, memcachedFromV1beta1)}
	if err := kube.RoundTrip(defaulted, alpha("a", 3)); err != nil {
		t.Errorf("v1alpha1's example, its port defaulted at v1beta1: %v", err)
	}

	// fromHub forgets Size, and the labels: the annotation hides the
	// first from a round trip, but not from one without it.
	lossy := v
	lossy.Others = []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{kube.VersionOf(Memcached, memcachedToV1beta1,
		func(in kube.Object[MemcachedSpecV1beta1, MemcachedStatus]) (kube.Object[MemcachedSpec, MemcachedStatus], error) {
			out, err := memcachedFromV1beta1(in)
			out.Spec.Size = 0
			out.Labels = nil
			return out, err
		})}
	err := kube.RoundTrip(lossy, alpha("a", 3))
	for _, want := range []string{
		`kube: RoundTrip: v1alpha1 example 0 (ns/a) at v1beta1 and back: metadata.labels.app was "a", came back without it`,
		`kube: RoundTrip: v1alpha1 example 0 (ns/a) at v1beta1 and back, without the annotation cache.example.com/v1alpha1: spec.size was 3, came back 0: v1alpha1's toHub or fromHub loses it`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q:\n%v", want, err)
		}
	}
	if err := kube.RoundTrip[MemcachedSpecV1beta1, MemcachedSpec](v); err == nil || !strings.Contains(err.Error(), "no version of Memcached is a Resource[kube_test.MemcachedSpecV1beta1, kube_test.MemcachedSpec]") {
		t.Errorf("examples of no version: %v", err)
	}

	// An object whose kept fields are too many for an annotation.
	big := beta("a", 3, 1)
	big.Status.Conditions = []metav1.Condition{{Type: "Available", Status: "True", Reason: "Up", Message: strings.Repeat("m", 32768)}}
	many := v
	many.Others = []kube.Version[MemcachedSpecV1beta1, MemcachedStatus]{kube.VersionOf(Memcached, memcachedToV1beta1,
		func(in kube.Object[MemcachedSpecV1beta1, MemcachedStatus]) (kube.Object[MemcachedSpec, MemcachedStatus], error) {
			out, err := memcachedFromV1beta1(in)
			out.Annotations = map[string]string{"big": strings.Repeat("x", 240*1024)}
			return out, err
		})}
	if err := kube.RoundTrip(many, big); err == nil || !strings.Contains(err.Error(), "more than the API server's 262144, which would refuse it") {
		t.Errorf("annotations over the limit: %v", err)
	}
}

// loopbackServing is a new CA's certificate, and a serving certificate and
// key it signs for 127.0.0.1, all PEM: what a test's conversion webhook
// serves the API server with, and the CRD's caBundle.
func loopbackServing(t testing.TB) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	authority, err := clustertest.NewCA("conversion webhook CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err = authority.Serving("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return authority.PEM(), certPEM, keyPEM
}
