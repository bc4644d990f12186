package cache

import (
	"strings"
	"testing"
)

// replicasOnly is what a Reader of a Deployment's replicas decodes.
type replicasOnly struct {
	Spec struct {
		Replicas *int32 `json:"replicas,omitempty"`
	} `json:"spec"`
	Status struct {
		ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	} `json:"status"`
}

// Trimming what was trimmed changes nothing, as client-go requires of a
// transform; an object that doesn't decode into the type is kept whole,
// for each read to fail naming its field, and stops nothing.
func TestATrimIsIdempotentAndKeepsWholeWhatDoesntDecode(t *testing.T) {
	tr := TrimTo[replicasOnly]()
	u, err := Decode([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"default"},"spec":{"replicas":3,"paused":true},"status":{"readyReplicas":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	once, _ := tr.Transform(u)
	first := string(once.(*Object).Raw)
	twice, _ := tr.Transform(once)
	if got := string(twice.(*Object).Raw); got != first || strings.Contains(got, "paused") {
		t.Errorf("trimmed once: %s; twice: %s; want the same, without paused", first, got)
	}

	bad, err := Decode([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"default"},"spec":{"replicas":"three"}}`))
	if err != nil {
		t.Fatal(err)
	}
	whole := string(bad.Raw)
	kept, err := tr.Transform(bad)
	if err != nil || string(kept.(*Object).Raw) != whole {
		t.Errorf("transform of an object that doesn't decode = %s, %v; want it whole, no error", kept.(*Object).Raw, err)
	}
}
