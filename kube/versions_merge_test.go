package kube_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
)

// A Pool's servers: v1beta1 adds each server's port, which v1alpha1 can't
// hold. Two shapes of item: one with a name, and one with a host, which
// only a declared ListMap makes a key.
type (
	NamedServerV1alpha1 struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
	NamedServerV1beta1 struct {
		Name  string `json:"name"`
		Image string `json:"image"`
		Port  int32  `json:"port,omitempty"`
	}
	HostServerV1alpha1 struct {
		Host  string `json:"host"`
		Image string `json:"image"`
	}
	HostServerV1beta1 struct {
		Host  string `json:"host"`
		Image string `json:"image"`
		Port  int32  `json:"port,omitempty"`
	}
	PoolSpecV1alpha1[S any] struct {
		Servers []S `json:"servers,omitempty"`
	}
	PoolSpecV1beta1[S any] struct {
		Servers []S `json:"servers,omitempty"`
	}
	PoolStatus struct {
		Ready int32 `json:"ready,omitempty"`
	}
)

// poolVersions is a Pool of v1alpha1 and v1beta1, the hub, whose servers
// are items of type A at v1alpha1 and B at v1beta1, in group, a and b converting
// one item; keys, when given, are declared ListMap keys of both
// versions' servers.
func poolVersions[A, B any](group string, a func(B) A, b func(A) B, keys ...string) kube.Versions[PoolSpecV1beta1[B], PoolStatus] {
	var alphaSpec PoolSpecV1alpha1[A]
	var betaSpec PoolSpecV1beta1[B]
	alpha := kube.Resource[PoolSpecV1alpha1[A], PoolStatus]{Group: group, Version: "v1alpha1", Kind: "Pool", Plural: "pools", Scope: kube.Namespaced}
	beta := kube.Resource[PoolSpecV1beta1[B], PoolStatus]{Group: group, Version: "v1beta1", Kind: "Pool", Plural: "pools", Scope: kube.Namespaced}
	if len(keys) > 0 {
		alpha.Rules = []kube.TypeRules{kube.Rules(&alphaSpec, kube.Field(&alphaSpec.Servers).ListMap(keys...))}
		beta.Rules = []kube.TypeRules{kube.Rules(&betaSpec, kube.Field(&betaSpec.Servers).ListMap(keys...))}
	}
	toHub := func(in kube.Object[PoolSpecV1alpha1[A], PoolStatus]) (kube.Object[PoolSpecV1beta1[B], PoolStatus], error) {
		out := kube.Object[PoolSpecV1beta1[B], PoolStatus]{ObjectMeta: in.ObjectMeta, Status: in.Status}
		for _, s := range in.Spec.Servers {
			out.Spec.Servers = append(out.Spec.Servers, b(s))
		}
		return out, nil
	}
	fromHub := func(in kube.Object[PoolSpecV1beta1[B], PoolStatus]) (kube.Object[PoolSpecV1alpha1[A], PoolStatus], error) {
		out := kube.Object[PoolSpecV1alpha1[A], PoolStatus]{ObjectMeta: in.ObjectMeta, Status: in.Status}
		for _, s := range in.Spec.Servers {
			out.Spec.Servers = append(out.Spec.Servers, a(s))
		}
		return out, nil
	}
	return kube.Versions[PoolSpecV1beta1[B], PoolStatus]{
		Hub:     beta,
		Others:  []kube.Version[PoolSpecV1beta1[B], PoolStatus]{kube.VersionOf(alpha, toHub, fromHub)},
		Storage: "v1beta1",
		Webhook: kube.ConversionWebhook{URL: "https://" + group + "/convert"},
	}
}

func namedPools(group string) kube.Versions[PoolSpecV1beta1[NamedServerV1beta1], PoolStatus] {
	return poolVersions(group,
		func(s NamedServerV1beta1) NamedServerV1alpha1 {
			return NamedServerV1alpha1{Name: s.Name, Image: s.Image}
		},
		func(s NamedServerV1alpha1) NamedServerV1beta1 {
			return NamedServerV1beta1{Name: s.Name, Image: s.Image}
		})
}

func hostPools(group string, keys ...string) kube.Versions[PoolSpecV1beta1[HostServerV1beta1], PoolStatus] {
	return poolVersions(group,
		func(s HostServerV1beta1) HostServerV1alpha1 { return HostServerV1alpha1{Host: s.Host, Image: s.Image} },
		func(s HostServerV1alpha1) HostServerV1beta1 { return HostServerV1beta1{Host: s.Host, Image: s.Image} },
		keys...)
}

// atV1alpha1AndBack converts obj, at v1beta1, to v1alpha1 through v's
// Handler, changes it there by edit, and converts it back.
func atV1alpha1AndBack[A, B any](t *testing.T, v kube.Versions[PoolSpecV1beta1[B], PoolStatus], obj kube.Object[PoolSpecV1beta1[B], PoolStatus], edit func(*[]A)) []B {
	t.Helper()
	h, err := v.Handler(humustest.NewTelemetry().Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	obj.APIVersion, obj.Kind = "pools.example.com/v1beta1", "Pool"
	obj.Namespace, obj.Name, obj.UID = "ns", "p", "u-1"
	down := decodeAs[kube.Object[PoolSpecV1alpha1[A], PoolStatus]](t, review(t, h, "pools.example.com/v1alpha1", obj))[0]
	edit(&down.Spec.Servers)
	up := decodeAs[kube.Object[PoolSpecV1beta1[B], PoolStatus]](t, review(t, h, "pools.example.com/v1beta1", down))[0]
	if len(up.Annotations) != 0 {
		t.Errorf("the hub's object carries annotations %v, want none", up.Annotations)
	}
	return up.Spec.Servers
}

// poolServer is a server as a test compares it: its name or host, its
// image and its port.
type poolServer struct {
	id, image string
	port      int32
}

// poolEdit is an edit at v1alpha1 of a Pool's servers a, b and c, each
// with an image memcached:1 and a port, on items with a name and on items
// with a host, and the servers wanted back at v1beta1.
type poolEdit struct {
	name  string
	named func(*[]NamedServerV1alpha1)
	hosts func(*[]HostServerV1alpha1)
	want  []poolServer
}

// poolEdits are the edits whose items any pairing follows, and one that
// only keys or names can follow: items that moved.
func poolEdits() (edits []poolEdit, reordered poolEdit) {
	return []poolEdit{{
			name:  "one server's image changed",
			named: func(s *[]NamedServerV1alpha1) { (*s)[1].Image = "memcached:2" },
			hosts: func(s *[]HostServerV1alpha1) { (*s)[1].Image = "memcached:2" },
			want:  []poolServer{{"a", "memcached:1", 11211}, {"b", "memcached:2", 11212}, {"c", "memcached:1", 11213}},
		}, {
			name:  "the first server removed",
			named: func(s *[]NamedServerV1alpha1) { *s = (*s)[1:] },
			hosts: func(s *[]HostServerV1alpha1) { *s = (*s)[1:] },
			want:  []poolServer{{"b", "memcached:1", 11212}, {"c", "memcached:1", 11213}},
		}, {
			name: "a server added in the middle",
			named: func(s *[]NamedServerV1alpha1) {
				*s = slices.Insert(*s, 1, NamedServerV1alpha1{Name: "d", Image: "memcached:1"})
			},
			hosts: func(s *[]HostServerV1alpha1) {
				*s = slices.Insert(*s, 1, HostServerV1alpha1{Host: "d", Image: "memcached:1"})
			},
			want: []poolServer{{"a", "memcached:1", 11211}, {"d", "memcached:1", 0}, {"b", "memcached:1", 11212}, {"c", "memcached:1", 11213}},
		}, {
			name:  "the last server removed and another's image changed",
			named: func(s *[]NamedServerV1alpha1) { *s = (*s)[:2]; (*s)[0].Image = "memcached:2" },
			hosts: func(s *[]HostServerV1alpha1) { *s = (*s)[:2]; (*s)[0].Image = "memcached:2" },
			want:  []poolServer{{"a", "memcached:2", 11211}, {"b", "memcached:1", 11212}},
		}}, poolEdit{
			name:  "the servers reversed, one image changed",
			named: func(s *[]NamedServerV1alpha1) { slices.Reverse(*s); (*s)[0].Image = "memcached:2" },
			hosts: func(s *[]HostServerV1alpha1) { slices.Reverse(*s); (*s)[0].Image = "memcached:2" },
			want:  []poolServer{{"c", "memcached:2", 11213}, {"b", "memcached:1", 11212}, {"a", "memcached:1", 11211}},
		}
}

// TestConversionKeepsEveryItemsHubOnlyFields: a change at an old version
// to one item of a list keeps the hub-only fields of every item, whatever
// pairs the items: declared ListMap keys, a name, or their place.
func TestConversionKeepsEveryItemsHubOnlyFields(t *testing.T) {
	named := kube.Object[PoolSpecV1beta1[NamedServerV1beta1], PoolStatus]{Spec: PoolSpecV1beta1[NamedServerV1beta1]{Servers: []NamedServerV1beta1{
		{Name: "a", Image: "memcached:1", Port: 11211}, {Name: "b", Image: "memcached:1", Port: 11212}, {Name: "c", Image: "memcached:1", Port: 11213},
	}}}
	hosts := kube.Object[PoolSpecV1beta1[HostServerV1beta1], PoolStatus]{Spec: PoolSpecV1beta1[HostServerV1beta1]{Servers: []HostServerV1beta1{
		{Host: "a", Image: "memcached:1", Port: 11211}, {Host: "b", Image: "memcached:1", Port: 11212}, {Host: "c", Image: "memcached:1", Port: 11213},
	}}}
	fromNamed := func(ss []NamedServerV1beta1) (out []poolServer) {
		for _, s := range ss {
			out = append(out, poolServer{s.Name, s.Image, s.Port})
		}
		return out
	}
	fromHosts := func(ss []HostServerV1beta1) (out []poolServer) {
		for _, s := range ss {
			out = append(out, poolServer{s.Host, s.Image, s.Port})
		}
		return out
	}
	edits, reordered := poolEdits()
	for _, e := range append(slices.Clone(edits), reordered) {
		t.Run("by name/"+e.name, func(t *testing.T) {
			if got := fromNamed(atV1alpha1AndBack(t, namedPools("pools.example.com"), named, e.named)); !slices.Equal(got, e.want) {
				t.Errorf("servers at v1beta1 %v, want %v", got, e.want)
			}
		})
		t.Run("by ListMap keys/"+e.name, func(t *testing.T) {
			if got := fromHosts(atV1alpha1AndBack(t, hostPools("pools.example.com", "host"), hosts, e.hosts)); !slices.Equal(got, e.want) {
				t.Errorf("servers at v1beta1 %v, want %v", got, e.want)
			}
		})
	}
	for _, e := range edits {
		t.Run("by place/"+e.name, func(t *testing.T) {
			if got := fromHosts(atV1alpha1AndBack(t, hostPools("pools.example.com"), hosts, e.hosts)); !slices.Equal(got, e.want) {
				t.Errorf("servers at v1beta1 %v, want %v", got, e.want)
			}
		})
	}
}

// TestRoundTripListItems: RoundTrip's round trips, a leaf changed at the
// other version included, keep every server's port, whatever pairs the
// servers.
func TestRoundTripListItems(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "p"}
	named := kube.Object[PoolSpecV1beta1[NamedServerV1beta1], PoolStatus]{ObjectMeta: meta, Spec: PoolSpecV1beta1[NamedServerV1beta1]{Servers: []NamedServerV1beta1{
		{Name: "a", Image: "memcached:1", Port: 11211}, {Name: "b", Image: "memcached:1", Port: 11212},
	}}, Status: PoolStatus{Ready: 2}}
	hosts := kube.Object[PoolSpecV1beta1[HostServerV1beta1], PoolStatus]{ObjectMeta: meta, Spec: PoolSpecV1beta1[HostServerV1beta1]{Servers: []HostServerV1beta1{
		{Host: "a", Image: "memcached:1", Port: 11211}, {Host: "b", Image: "memcached:1", Port: 11212},
	}}, Status: PoolStatus{Ready: 2}}
	if err := kube.RoundTrip(namedPools("pools.example.com"), named); err != nil {
		t.Errorf("by name: %v", err)
	}
	if err := kube.RoundTrip(hostPools("pools.example.com", "host"), hosts); err != nil {
		t.Errorf("by ListMap keys: %v", err)
	}
	if err := kube.RoundTrip(hostPools("pools.example.com"), hosts); err != nil {
		t.Errorf("by place: %v", err)
	}
	// Keys the hub alone declares: a host changed at v1alpha1 is another
	// server at the hub, so RoundTrip leaves hosts alone there too.
	hubKeyed := hostPools("pools.example.com")
	var betaSpec PoolSpecV1beta1[HostServerV1beta1]
	hubKeyed.Hub.Rules = []kube.TypeRules{kube.Rules(&betaSpec, kube.Field(&betaSpec.Servers).ListMap("host"))}
	if err := kube.RoundTrip(hubKeyed, hosts); err != nil {
		t.Errorf("by ListMap keys of the hub alone: %v", err)
	}
	alpha := kube.Object[PoolSpecV1alpha1[HostServerV1alpha1], PoolStatus]{ObjectMeta: meta, Spec: PoolSpecV1alpha1[HostServerV1alpha1]{Servers: []HostServerV1alpha1{
		{Host: "a", Image: "memcached:1"}, {Host: "b", Image: "memcached:1"},
	}}}
	if err := kube.RoundTrip(hostPools("pools.example.com", "host"), alpha); err != nil {
		t.Errorf("v1alpha1's example: %v", err)
	}
}

// BenchmarkConversionKeepingListItems: a review of a Pool of n servers
// written at v1alpha1, one image changed there, converted to v1beta1 with
// every port the annotation kept: the merge's cost in a conversion.
func BenchmarkConversionKeepingListItems(b *testing.B) {
	for _, n := range []int{10, 100} {
		v := hostPools("pools.example.com", "host")
		h, err := v.Handler(humustest.NewTelemetry().Telemetry())
		if err != nil {
			b.Fatal(err)
		}
		hub := kube.Object[PoolSpecV1beta1[HostServerV1beta1], PoolStatus]{
			TypeMeta:   metav1.TypeMeta{APIVersion: "pools.example.com/v1beta1", Kind: "Pool"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u-1"},
		}
		for i := range n {
			hub.Spec.Servers = append(hub.Spec.Servers, HostServerV1beta1{Host: strconv.Itoa(i), Image: "memcached:1", Port: int32(10000 + i)})
		}
		var down struct {
			Response struct {
				ConvertedObjects []kube.Object[PoolSpecV1alpha1[HostServerV1alpha1], PoolStatus] `json:"convertedObjects"`
			} `json:"response"`
		}
		if err := json.Unmarshal(answerReview(b, h, reviewBody(b, "pools.example.com/v1alpha1", hub)), &down); err != nil || len(down.Response.ConvertedObjects) != 1 {
			b.Fatalf("the review down: %v, %+v", err, down)
		}
		alpha := down.Response.ConvertedObjects[0]
		alpha.Spec.Servers[n/2].Image = "memcached:2"
		body := reviewBody(b, "pools.example.com/v1beta1", alpha)
		b.Run(fmt.Sprintf("%d servers", n), func(b *testing.B) {
			for b.Loop() {
				if answer := answerReview(b, h, body); !bytes.Contains(answer, []byte(`"port":10000`)) {
					b.Fatalf("the port of the first server lost: %.300s", answer)
				}
			}
		})
	}
}

// reviewBody is a ConversionReview of obj, asking for it at to.
func reviewBody(b *testing.B, to string, obj any) []byte {
	b.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "0a1b", DesiredAPIVersion: to, Objects: []runtime.RawExtension{{Raw: raw}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// answerReview is h's answer to the ConversionReview body.
func answerReview(b *testing.B, h http.Handler, body []byte) []byte {
	b.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		b.Fatalf("answered %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}
