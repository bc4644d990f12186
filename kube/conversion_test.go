package kube_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
)

// review POSTs a ConversionReview of objs to h, asking for them at to, and
// returns its response.
func review(t *testing.T, h http.Handler, to string, objs ...any) *apiextensionsv1.ConversionResponse {
	t.Helper()
	req := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "0a1b", DesiredAPIVersion: to},
	}
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		req.Request.Objects = append(req.Request.Objects, runtime.RawExtension{Raw: b})
	}
	body, _ := json.Marshal(req)
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		t.Fatalf("answered %d: %s", rec.Code, rec.Body)
	}
	var resp apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.APIVersion != "apiextensions.k8s.io/v1" || resp.Kind != "ConversionReview" || resp.Response == nil || resp.Response.UID != "0a1b" {
		t.Fatalf("answered %s", rec.Body)
	}
	return resp.Response
}

func alpha(name string, size int32) kube.Object[MemcachedSpec, MemcachedStatus] {
	return kube.Object[MemcachedSpec, MemcachedStatus]{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "u-" + "1", Labels: map[string]string{"app": name}},
		Spec:       MemcachedSpec{Size: size, Image: "memcached:1"},
		Status:     MemcachedStatus{ReadyReplicas: 1},
	}
}

func beta(name string, replicas, port int32) kube.Object[MemcachedSpecV1beta1, MemcachedStatus] {
	return kube.Object[MemcachedSpecV1beta1, MemcachedStatus]{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cache.example.com/v1beta1", Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "u-" + "1", Labels: map[string]string{"app": name}},
		Spec:       MemcachedSpecV1beta1{Replicas: replicas, Image: "memcached:1", Port: port},
		Status:     MemcachedStatus{ReadyReplicas: 1},
	}
}

func decodeAs[T any](t *testing.T, resp *apiextensionsv1.ConversionResponse) []T {
	t.Helper()
	if resp.Result.Status != metav1.StatusSuccess {
		t.Fatalf("result %+v, want Success", resp.Result)
	}
	var out []T
	for _, raw := range resp.ConvertedObjects {
		var v T
		if err := json.Unmarshal(raw.Raw, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func TestConversionThroughTheHub(t *testing.T) {
	h, err := memcachedVersions().Handler(humustest.NewTelemetry().Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	// v1alpha1 up to the hub, and an object at the hub passed through.
	got := decodeAs[kube.Object[MemcachedSpecV1beta1, MemcachedStatus]](t, review(t, h, "cache.example.com/v1beta1", alpha("a", 2), beta("b", 3, 0)))
	if len(got) != 2 {
		t.Fatalf("%d objects, want 2", len(got))
	}
	if a := got[0]; a.APIVersion != "cache.example.com/v1beta1" || a.Kind != "Memcached" || a.Name != "a" || a.UID != "u-1" || a.Labels["app"] != "a" ||
		a.Spec.Replicas != 2 || a.Spec.Image != "memcached:1" || a.Status.ReadyReplicas != 1 || len(a.Annotations) != 0 {
		t.Errorf("v1alpha1 at v1beta1: %+v", a)
	}
	if b := got[1]; b.Spec.Replicas != 3 {
		t.Errorf("v1beta1 at v1beta1: %+v", b)
	}

	// Down, with v1beta1's Port kept, and back with a change at v1alpha1.
	down := decodeAs[kube.Object[MemcachedSpec, MemcachedStatus]](t, review(t, h, "cache.example.com/v1alpha1", beta("c", 2, 11211)))[0]
	if down.APIVersion != "cache.example.com/v1alpha1" || down.Spec.Size != 2 || down.Labels["app"] != "c" {
		t.Errorf("v1beta1 at v1alpha1: %+v", down)
	}
	if kept := down.Annotations["cache.example.com/v1beta1"]; !strings.Contains(kept, `"port":11211`) {
		t.Errorf("v1beta1 at v1alpha1: annotations %v, want cache.example.com/v1beta1 keeping the port", down.Annotations)
	}
	down.Spec.Size = 3
	up := decodeAs[kube.Object[MemcachedSpecV1beta1, MemcachedStatus]](t, review(t, h, "cache.example.com/v1beta1", down))[0]
	if up.Spec.Replicas != 3 || up.Spec.Port != 11211 {
		t.Errorf("written back at v1alpha1 with size 3, read at v1beta1: %+v, want replicas 3 and the port kept", up.Spec)
	}
	if len(up.Annotations) != 0 {
		t.Errorf("the hub's object carries annotations %v, want none", up.Annotations)
	}
	// An object without a port loses nothing at v1alpha1: no annotation.
	if down := decodeAs[kube.Object[MemcachedSpec, MemcachedStatus]](t, review(t, h, "cache.example.com/v1alpha1", beta("d", 2, 0)))[0]; len(down.Annotations) != 0 {
		t.Errorf("annotations %v, want none when nothing is lost", down.Annotations)
	}
}

// TestConversionFailures: a conversion function's error or panic, or one
// changing the object's identity, fails the review, and is recorded.
func TestConversionFailures(t *testing.T) {
	for _, tt := range conversionFailures() {
		t.Run(tt.name, func(t *testing.T) {
			tel := humustest.NewTelemetry()
			v := memcachedVersions()
			// Each fails on size 7 alone.
			toHub := func(in kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
				if in.Spec.Size != 7 {
					return memcachedToV1beta1(in)
				}
				return tt.toHub(in)
			}
			v.Others[0] = kube.VersionOf(Memcached, toHub, memcachedFromV1beta1)
			h, err := v.Handler(tel.Telemetry())
			if err != nil {
				t.Fatal(err)
			}
			ok := alpha("a", 1)
			ok.Name = "ok" // the first converts; the second fails them all
			resp := review(t, h, "cache.example.com/v1beta1", ok, alpha("a", 7))
			if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, tt.want) || len(resp.ConvertedObjects) != 0 {
				t.Fatalf("result %+v, %d objects; want Failure saying %q, no objects", resp.Result, len(resp.ConvertedObjects), tt.want)
			}
			spans := tel.Spans()
			if len(spans) != 1 || spans[0].Name() != "convert Memcached" || spans[0].Status().Code != codes.Error {
				t.Fatalf("spans %v, want one convert Memcached, failed", spans)
			}
			var exception bool // a panic's, with its stack
			for _, e := range spans[0].Events() {
				for _, a := range e.Attributes {
					exception = exception || a.Key == "exception.stacktrace"
				}
			}
			if exception != (tt.outcome == "panic") {
				t.Errorf("exception event %v, want one for a panic alone", exception)
			}
			if len(tel.Records()) != 1 {
				t.Errorf("%d log records, want one", len(tel.Records()))
			}
			objects := conversionCounts(t, tel)
			from := attribute.String("humus.kube.conversion.from", "cache.example.com/v1alpha1")
			to := attribute.String("humus.kube.conversion.to", "cache.example.com/v1beta1")
			if n := objects[attribute.NewSet(attribute.String("humus.kube.resource", "memcacheds.cache.example.com"), from, to, attribute.String("humus.kube.conversion.outcome", "success"))]; n != 1 {
				t.Errorf("%d successes counted, want 1: %v", n, objects)
			}
			if n := objects[attribute.NewSet(attribute.String("humus.kube.resource", "memcacheds.cache.example.com"), from, to, attribute.String("humus.kube.conversion.outcome", tt.outcome))]; n != 1 {
				t.Errorf("%d of outcome %s counted, want 1: %v", n, tt.outcome, objects)
			}
		})
	}
}

// conversionFailure is a toHub that fails, what the review's result says,
// and the outcome recorded.
type conversionFailure struct {
	name    string
	toHub   func(kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error)
	want    string
	outcome string
}

func conversionFailures() []conversionFailure {
	return []conversionFailure{
		{"error", func(kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
			return kube.Object[MemcachedSpecV1beta1, MemcachedStatus]{}, errors.New("size 7 has no replicas")
		}, `kube: converting Memcached ns/a (objects[1]) from cache.example.com/v1alpha1 to cache.example.com/v1beta1: toHub of v1alpha1: size 7 has no replicas`, "error"},
		{"panic", func(kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
			panic("no replicas for size 7")
		}, `kube: converting Memcached ns/a (objects[1]) from cache.example.com/v1alpha1 to cache.example.com/v1beta1: toHub of v1alpha1 panicked: no replicas for size 7`, "panic"},
		{"name", func(in kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
			out, err := memcachedToV1beta1(in)
			out.Name += "-v1beta1"
			return out, err
		}, `toHub of v1alpha1 changed metadata.name from "a" to "a-v1beta1": a conversion keeps the object's name, namespace, UID and kind, so copy its ObjectMeta`, "error"},
		{"uid", func(in kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
			out, err := memcachedToV1beta1(in)
			out.ObjectMeta = metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace}
			return out, err
		}, `toHub of v1alpha1 changed metadata.uid from "u-1" to ""`, "error"},
		{"kind", func(in kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
			out, err := memcachedToV1beta1(in)
			out.Kind = "Memcache"
			return out, err
		}, `toHub of v1alpha1 changed kind from "Memcached" to "Memcache"`, "error"},
	}
}

// conversionCounts is humus.kube.conversion.objects in tel, by attributes.
func conversionCounts(t *testing.T, tel *humustest.Telemetry) map[attribute.Set]int64 {
	t.Helper()
	rm, err := tel.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[attribute.Set]int64{}
	var duration bool
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "humus.kube.conversion.objects":
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					out[dp.Attributes] += dp.Value
				}
			case "humus.kube.conversion.duration":
				duration = true
			}
		}
	}
	if !duration {
		t.Error("no humus.kube.conversion.duration")
	}
	return out
}

func TestConversionHandlerRefusesWhatIsNoReview(t *testing.T) {
	h, err := memcachedVersions().Handler(humustest.NewTelemetry().Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		method, contentType, body string
		code                      int
	}{
		{http.MethodGet, "", "", http.StatusMethodNotAllowed},
		{http.MethodPost, "text/plain", "{}", http.StatusUnsupportedMediaType},
		{http.MethodPost, "application/json", "{", http.StatusBadRequest},
		{http.MethodPost, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(tt.method, "/convert", strings.NewReader(tt.body))
		r.Header.Set("Content-Type", tt.contentType)
		h.ServeHTTP(rec, r)
		if rec.Code != tt.code {
			t.Errorf("%s %q %q: %d, want %d", tt.method, tt.contentType, tt.body, rec.Code, tt.code)
		}
	}
	// A version the resource doesn't have fails the review.
	resp := review(t, h, "cache.example.com/v2", alpha("a", 1))
	if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, "cache.example.com/v2: no such version of Memcached") {
		t.Errorf("result %+v", resp.Result)
	}
	// A Versions CRD refuses, Handler refuses too.
	bad := memcachedVersions()
	bad.Storage = ""
	if _, err := bad.Handler(humustest.NewTelemetry().Telemetry()); err == nil || !strings.Contains(err.Error(), "missing Storage") {
		t.Errorf("Handler of a Versions without Storage: %v", err)
	}
}

// TestConversionInstrumentsBoundWhatAReviewNames sends reviews naming
// versions the resource doesn't have, a hundred of them, as anyone who
// reaches the webhook's port can: the instruments record each as "", not
// a hundred attribute sets.
func TestConversionInstrumentsBoundWhatAReviewNames(t *testing.T) {
	tel := humustest.NewTelemetry()
	h, err := memcachedVersions().Handler(tel.Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		review(t, h, fmt.Sprintf("cache.example.com/v%d", i+2), alpha("a", 1))
		odd := alpha("b", 1)
		odd.APIVersion = fmt.Sprintf("other.example.com/v%d", i)
		review(t, h, "cache.example.com/v1beta1", odd)
	}
	known := map[string]bool{"": true, "cache.example.com/v1alpha1": true, "cache.example.com/v1beta1": true}
	rm, err := tel.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sets := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var attrs []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					attrs = append(attrs, dp.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					attrs = append(attrs, dp.Attributes)
				}
			}
			if !strings.HasPrefix(m.Name, "humus.kube.conversion.") {
				continue
			}
			sets += len(attrs)
			for _, set := range attrs {
				for _, key := range []attribute.Key{"humus.kube.conversion.from", "humus.kube.conversion.to"} {
					if v, ok := set.Value(key); ok && !known[v.AsString()] {
						t.Errorf("%s recorded %s %q, a version Memcached doesn't have", m.Name, key, v.AsString())
					}
				}
			}
		}
	}
	if sets == 0 || sets > 4 {
		t.Errorf("%d attribute sets of the conversion instruments, want 1 to 4", sets)
	}
}

// TestConversionBoundsWhatItRecordsOfAReview sends a review whose UID,
// version and object's name are each a MiB long, as anyone who reaches
// the webhook's port can: the span, the record and the answer hold at most
// a few hundred bytes of each.
func TestConversionBoundsWhatItRecordsOfAReview(t *testing.T) {
	tel := humustest.NewTelemetry()
	h, err := memcachedVersions().Handler(tel.Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 1<<19) // a MiB, in two-byte characters
	odd := alpha(long, 1)
	odd.Namespace = long
	odd.APIVersion = "cache.example.com/" + long
	resp := review(t, h, "cache.example.com/v1beta1", odd)
	if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, "no such version of Memcached") {
		t.Fatalf("result %.200s, want a failure naming no such version", resp.Result.Message)
	}
	resp = review(t, h, "cache.example.com/"+long, alpha("a", 1))
	const bound = 2048
	if n := len(resp.Result.Message); n > bound {
		t.Errorf("the answer's message is %d bytes, want at most %d", n, bound)
	}
	for _, sp := range tel.Spans() {
		if n := len(sp.Status().Description); n > bound {
			t.Errorf("span %s: its status is %d bytes", sp.Name(), n)
		}
		for _, a := range sp.Attributes() {
			if n := len(a.Value.String()); n > bound {
				t.Errorf("span %s: %s is %d bytes", sp.Name(), a.Key, n)
			}
		}
		for _, e := range sp.Events() {
			for _, a := range e.Attributes {
				if n := len(a.Value.String()); n > bound {
					t.Errorf("span %s: event %s's %s is %d bytes", sp.Name(), e.Name, a.Key, n)
				}
			}
		}
	}
	records := tel.Records()
	if len(records) == 0 {
		t.Fatal("no record of the failures")
	}
	for _, r := range records {
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			if n := len(kv.Value.String()); n > bound {
				t.Errorf("record %q: %s is %d bytes", r.Body().AsString(), kv.Key, n)
			}
			return true
		})
	}
}

// TestConversionOverTLS serves the handler as the API server reaches it:
// over TLS, with a serving certificate of a CA the client trusts.
func TestConversionOverTLS(t *testing.T) {
	ca, err := clustertest.NewCA("webhook CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Serving("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	h, err := memcachedVersions().Handler(humustest.NewTelemetry().Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	b, _ := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "1", DesiredAPIVersion: "cache.example.com/v1beta1",
			Objects: []runtime.RawExtension{{Raw: mustJSON(t, alpha("a", 2))}}},
	})
	resp, err := client.Post(srv.URL+"/convert", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out apiextensionsv1.ConversionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || out.Response.Result.Status != metav1.StatusSuccess || !bytes.Contains(out.Response.ConvertedObjects[0].Raw, []byte(`"replicas":2`)) {
		t.Errorf("answered %+v", out.Response)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A ConversionReview larger than MaxConversionReviewBytes is answered 413,
// naming the limit, whether its length is said up front or not; one of
// the limit exactly is read.
func TestConversionHandlerBoundsTheReview(t *testing.T) {
	h, err := memcachedVersions().Handler(humustest.NewTelemetry().Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "0a1b", DesiredAPIVersion: "cache.example.com/v1beta1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Padded at the front, so the whole body is read to reach the review.
	padded := func(n int) []byte {
		return append(bytes.Repeat([]byte(" "), n-len(b)), b...)
	}
	for _, tt := range []struct {
		name   string
		size   int
		length bool // the request says its length
		code   int
	}{
		{"the limit, its length said", kube.MaxConversionReviewBytes, true, http.StatusOK},
		{"the limit, its length unsaid", kube.MaxConversionReviewBytes, false, http.StatusOK},
		{"a byte over, its length said", kube.MaxConversionReviewBytes + 1, true, http.StatusRequestEntityTooLarge},
		{"a byte over, its length unsaid", kube.MaxConversionReviewBytes + 1, false, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(padded(tt.size)))
			r.Header.Set("Content-Type", "application/json")
			if !tt.length {
				r.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tt.code {
				t.Fatalf("a review of %d bytes was answered %d: %s; want %d", tt.size, rec.Code, rec.Body, tt.code)
			}
			if want := "the ConversionReview is larger than 32 MiB (kube.MaxConversionReviewBytes), the most the conversion webhook reads"; tt.code != http.StatusOK && strings.TrimSpace(rec.Body.String()) != want {
				t.Errorf("answered %q, want %q", rec.Body, want)
			}
		})
	}
}

// A conversion that fails for every object, under a list of 10,000, gives
// a handful of ERROR records, not 10,000: one at once for each version
// pair and outcome, and then one after each wait, doubling from a second,
// counting the failures since the record before it, itself included. Its
// spans and instruments count every failure.
func TestConversionFailuresRecordedAtASlowingRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		v := memcachedVersions()
		v.Others[0] = kube.VersionOf(Memcached,
			func(in kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
				if in.Spec.Size == 8 {
					panic("size 8")
				}
				return kube.Object[MemcachedSpecV1beta1, MemcachedStatus]{}, errors.New("size has no replicas")
			},
			func(kube.Object[MemcachedSpecV1beta1, MemcachedStatus]) (kube.Object[MemcachedSpec, MemcachedStatus], error) {
				return kube.Object[MemcachedSpec, MemcachedStatus]{}, errors.New("replicas have no size")
			})
		h, err := v.Handler(tel.Telemetry())
		if err != nil {
			t.Fatal(err)
		}
		const up, down = "cache.example.com/v1beta1", "cache.example.com/v1alpha1"

		// A list of 10,000 objects at v1alpha1, read at v1beta1: a review
		// an object, each failing, over two seconds.
		const n = 10000
		for i := range n {
			review(t, h, up, alpha(fmt.Sprintf("m-%05d", i), 1))
			time.Sleep(2 * time.Second / n)
		}
		// The other way, and a panic: recorded at once, each its own.
		review(t, h, down, beta("b", 1, 0))
		review(t, h, up, alpha("p", 8))
		// Past the next wait, two seconds, the list's conversion fails
		// again.
		time.Sleep(2 * time.Second)
		review(t, h, up, alpha("last", 1))

		got := conversionRecords(t, tel)
		want := []string{
			"conversion failed " + down + " to " + up + ", failures 1",
			// The first wait, a second, ended within the list.
			"conversion failed " + down + " to " + up + ", failures " + fmt.Sprint(n/2),
			"conversion failed " + up + " to " + down + ", failures 1",
			"conversion panicked " + down + " to " + up + ", failures 1",
			"conversion failed " + down + " to " + up + ", failures " + fmt.Sprint(n/2),
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}

		var failed int
		for _, s := range tel.Spans() {
			if s.Status().Code == codes.Error {
				failed++
			}
		}
		counts := conversionCounts(t, tel)
		resource := attribute.String("humus.kube.resource", "memcacheds.cache.example.com")
		errorsUp := counts[attribute.NewSet(resource, attribute.String("humus.kube.conversion.from", down), attribute.String("humus.kube.conversion.to", up), attribute.String("humus.kube.conversion.outcome", "error"))]
		if failed != n+3 || errorsUp != n+1 {
			t.Errorf("%d failed spans and %d errors counted from v1alpha1 to v1beta1; want %d and %d: every failure", failed, errorsUp, n+3, n+1)
		}
	})
}

// conversionRecords is each of tel's records, with the versions and the
// failures it counts; each must be an ERROR.
func conversionRecords(t *testing.T, tel *humustest.Telemetry) []string {
	t.Helper()
	var got []string
	for _, r := range tel.Records() {
		attrs := map[string]string{}
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			attrs[string(kv.Key)] = kv.Value.String()
			return true
		})
		if r.Severity() != otellog.SeverityError {
			t.Errorf("a record at %v, want ERROR: %s", r.Severity(), r.Body().AsString())
		}
		got = append(got, fmt.Sprintf("%s %s to %s, failures %s", r.Body().AsString(), attrs["humus.kube.conversion.from"], attrs["humus.kube.conversion.to"], attrs["failures"]))
	}
	return got
}

// BenchmarkConversionReview is one ConversionReview as the API server sends
// the webhook one for each object it reads or writes at the version the
// object isn't stored at: a settled v1alpha1 Memcached (its creator's, the
// finalizer's and the status's managedFields entries) asked for at v1beta1,
// through the Handler's ServeHTTP, the span and instruments recorded by
// no-op providers (an SDK keeping every span in memory, as humustest's
// does, would time its own growing heap). TLS and HTTP/2, which the
// webhook Service adds, are not in it.
func BenchmarkConversionReview(b *testing.B) {
	h, err := memcachedVersions().Handler(humus.Telemetry{})
	if err != nil {
		b.Fatal(err)
	}
	obj := settledMemcached(b, "memcached-00042")
	body, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "0a1b", DesiredAPIVersion: "cache.example.com/v1beta1",
			Objects: []runtime.RawExtension{{Raw: obj}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"status":"Success"`)) {
			b.Fatalf("answered %d: %s", rec.Code, rec.Body)
		}
	}
}

// settledMemcached is a settled v1alpha1 Memcached named name, as the API
// server stores it: its creator's, the finalizer's and the status's
// managedFields entries, and an Available condition.
func settledMemcached(tb testing.TB, name string) []byte {
	tb.Helper()
	m := alpha(name, 3)
	m.UID = "6b1f1c9e-8d7a-4c2e-9f3b-000000000042"
	m.ResourceVersion, m.Generation = "100042", 1
	m.Finalizers = []string{"cache.example.com/finalizer"}
	now := metav1.Now()
	m.CreationTimestamp = now
	m.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:image":{},"f:size":{}}}`)},
		{Manager: "memcached-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:finalizers":{"v:\"cache.example.com/finalizer\"":{}}}}`)},
		{Manager: "memcached-controller", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "cache.example.com/v1alpha1", Time: &now, FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:readyReplicas":{}}}`)},
	}
	m.Status.Conditions = []metav1.Condition{{Type: "Available", Status: "True", Reason: "DeploymentApplied", LastTransitionTime: now, ObservedGeneration: 1}}
	obj, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return obj
}
