package kube_test

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
)

// mood is a spec field whose own UnmarshalJSON panics on "boom": a bug in
// a type's decoding, outside any conversion function.
type mood string

func (m *mood) UnmarshalJSON(b []byte) error {
	if string(b) == `"boom"` {
		panic("a bug in mood's UnmarshalJSON")
	}
	return json.Unmarshal(b, (*string)(m))
}

type moodSpec struct {
	Mood mood `json:"mood,omitempty"`
}

type moodStatus struct{}

// A panic in a spec type's own UnmarshalJSON during a conversion is
// recovered as a conversion function's is: the review fails, saying so,
// with a record and the span's exception, and the webhook goes on to
// answer the next (issue 44, suspected, proven: it escaped the handler,
// and the connection dropped with no answer and no record).
func TestConversionRecoversAPanicInATypesOwnDecoding(t *testing.T) {
	res := func(version string) kube.Resource[moodSpec, moodStatus] {
		return kube.Resource[moodSpec, moodStatus]{Group: "moods.example.com", Version: version, Kind: "Mood", Plural: "moods", Scope: kube.Namespaced}
	}
	same := func(in kube.Object[moodSpec, moodStatus]) (kube.Object[moodSpec, moodStatus], error) { return in, nil }
	v := kube.Versions[moodSpec, moodStatus]{
		Hub:     res("v1beta1"),
		Others:  []kube.Version[moodSpec, moodStatus]{kube.VersionOf(res("v1alpha1"), same, same)},
		Storage: "v1beta1",
		Webhook: kube.ConversionWebhook{URL: "https://moods.example.com/convert", CABundle: testCA},
	}
	tel := humustest.NewTelemetry()
	h, err := v.Handler(tel.Telemetry())
	if err != nil {
		t.Fatal(err)
	}
	obj := func(name string, m mood) kube.Object[moodSpec, moodStatus] {
		return kube.Object[moodSpec, moodStatus]{
			TypeMeta:   metav1.TypeMeta{APIVersion: "moods.example.com/v1alpha1", Kind: "Mood"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       moodSpec{Mood: m},
		}
	}
	resp := review(t, h, "moods.example.com/v1beta1", obj("bad", "boom"))
	if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, "panicked: a bug in mood's UnmarshalJSON") {
		t.Errorf("result %+v, want a Failure naming the panic", resp.Result)
	}
	if spans := tel.Spans(); len(spans) != 1 || len(spans[0].Events()) == 0 {
		t.Errorf("spans %v, want one, with the panic's exception", spans)
	}
	if resp := review(t, h, "moods.example.com/v1beta1", obj("good", "calm")); resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 1 {
		t.Errorf("the next review's result %+v, %d objects; want it converted", resp.Result, len(resp.ConvertedObjects))
	}
}
