package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube"
)

// starterSpec and starterStatus are the Go types kind.go.tmpl writes, so
// the command can write the CRD they reflect to, the YAML the golden test
// compares with, as the module's own test would with -update. A change to
// the template's types or Rules must be made here too: the command's test
// runs the golden test of a scaffolded module, which fails on a mismatch.
type starterSpec struct {
	Message string `json:"message"`
}

type starterStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// crdYAML is the YAML of r's CRD, as kind.go.tmpl's kube.Resource makes it.
func crdYAML(r resource) ([]byte, error) {
	var (
		spec   starterSpec
		status starterStatus
	)
	res := kube.Resource[starterSpec, starterStatus]{
		Group: r.Group, Version: r.Version, Kind: r.Kind, Plural: r.Plural,
		Scope: kube.Scope(r.Scope),
		Columns: []kube.Column{
			{Name: "Ready", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
			{Name: "Age", JSONPath: ".metadata.creationTimestamp"},
		},
		Rules: []kube.TypeRules{
			kube.Rules(&spec,
				kube.Field(&spec.Message).MinLength(1).MaxLength(1024).Description("What the "+r.Kind+"'s ConfigMap holds."),
			),
			kube.Rules(&status, kube.Field(&status.Conditions).ListMap("type")),
		},
	}
	crd, err := res.CRD()
	if err != nil {
		return nil, err
	}
	return kube.MarshalCRD(crd)
}
