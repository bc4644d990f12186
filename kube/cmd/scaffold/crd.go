package main

import (
	"context"
	"crypto/tls"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus"
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

// derive adds to out what the module's golden tests derive from its
// code: the CRD's YAML, and deploy/rbac.yaml.
func derive(out files, d data) error {
	crd, err := crdYAML(d.resource)
	if err != nil {
		return fmt.Errorf("scaffold: the CRD of %s: %w", d.Kind, err)
	}
	out[d.CRDFile()] = crd
	rbac, err := rbacYAML(d)
	if err != nil {
		return fmt.Errorf("scaffold: the RBAC of %s's controller: %w", d.Kind, err)
	}
	out["deploy/rbac.yaml"] = rbac
	return nil
}

// crdYAML is the YAML of r's CRD, as kind.go.tmpl's kube.Resource makes it.
func crdYAML(r resource) ([]byte, error) {
	crd, err := starter(r).CRD()
	if err != nil {
		return nil, err
	}
	return kube.MarshalCRD(crd)
}

// starter is r's kube.Resource, as kind.go.tmpl writes it.
func starter(r resource) kube.Resource[starterSpec, starterStatus] {
	var (
		spec   starterSpec
		status starterStatus
	)
	return kube.Resource[starterSpec, starterStatus]{
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
}

// rbacYAML is the RBAC app.Init's controller of r needs, in the
// namespace d names, as the module's golden test derives it with
// kube.MarshalRBAC: a controller built as app.go.tmpl builds it, with
// the same parts in the same order, on a Client that opens no
// connection.
func rbacYAML(d data) ([]byte, error) {
	s := &humus.Setup{Host: humus.OSHost()}
	client, err := kube.NewClient(s, kube.Connection{Server: "10.96.0.1:443", TLS: &tls.Config{}})
	if err != nil {
		return nil, err
	}
	set := kube.DefaultSettings()
	set.Name = d.AppName
	set.LeaderElection.Namespace, set.LeaderElection.Identity = d.Namespace, d.AppName+"-0"
	configMaps := corev1.SchemeGroupVersion.WithResource("configmaps")
	ctrl, err := kube.NewController(s, client, set, starter(d.resource),
		kube.ReconcilerFunc[starterSpec, starterStatus](func(context.Context, kube.Object[starterSpec, starterStatus]) (kube.Result[starterStatus], error) {
			return kube.Result[starterStatus]{}, nil
		}),
		kube.Owns(configMaps),
		kube.Writes(configMaps, kube.Apply),
	)
	if err != nil {
		return nil, err
	}
	return kube.MarshalRBAC(d.AppName, d.Namespace, ctrl)
}
