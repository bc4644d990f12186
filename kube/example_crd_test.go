package kube_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube"
)

type MemcachedSpec struct {
	Size  int32  `json:"size"`
	Image string `json:"image"`
}

type MemcachedStatus struct {
	ReadyReplicas int32              `json:"readyReplicas,omitempty"`
	Conditions    []metav1.Condition `json:"conditions,omitempty"`
}

var (
	spec   MemcachedSpec
	status MemcachedStatus

	Memcached = kube.Resource[MemcachedSpec, MemcachedStatus]{
		Group:   "cache.example.com",
		Version: "v1alpha1",
		Kind:    "Memcached",
		Plural:  "memcacheds",
		Scope:   kube.Namespaced,

		ShortNames: []string{"mc"},
		Categories: []string{"example"},
		Columns: []kube.Column{
			{Name: "Size", JSONPath: ".spec.size"},
			{Name: "Ready", JSONPath: ".status.readyReplicas"},
			{Name: "Available", JSONPath: `.status.conditions[?(@.type=="Available")].status`},
			{Name: "Age", JSONPath: ".metadata.creationTimestamp"},
		},
		Scale: &kube.Scale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.readyReplicas"},

		Rules: []kube.TypeRules{
			kube.Rules(&spec,
				kube.Field(&spec.Size).Minimum(1).Maximum(3).Description("How many memcached pods run."),
				kube.Field(&spec.Image).Pattern(regexp.MustCompile(`^memcached:`)).Default("memcached:1.6.26-alpine3.19"),
			),
			kube.Rules(&status,
				kube.Field(&status.Conditions).ListMap("type"),
			),
		},
	}
)

// A custom resource is a Go value: its CRD is reflected from the spec and
// status types, and constrained by typed rules on their fields.
func ExampleResource_CRD() {
	crd, err := Memcached.CRD()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(crd.Name, crd.Spec.Scope)

	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	s := root.Properties["spec"]
	size, image := s.Properties["size"], s.Properties["image"]
	fmt.Println("required:", root.Required, s.Required)
	fmt.Printf("size: %s %s, from %v to %v: %s\n", size.Type, size.Format, *size.Minimum, *size.Maximum, size.Description)
	fmt.Printf("image: %s matching %s, by default %s\n", image.Type, image.Pattern, image.Default.Raw)

	conditions := root.Properties["status"].Properties["conditions"]
	fmt.Println("conditions:", *conditions.XListType, conditions.XListMapKeys)

	// What kubectl get mc prints: each column's type is its field's.
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		fmt.Printf("column %s: %s\n", c.Name, c.Type)
	}
	// Output:
	// memcacheds.cache.example.com Namespaced
	// required: [spec] [size]
	// size: integer int32, from 1 to 3: How many memcached pods run.
	// image: string matching ^memcached:, by default "memcached:1.6.26-alpine3.19"
	// conditions: map [type]
	// column Size: integer
	// column Ready: integer
	// column Available: string
	// column Age: date
}

// The CRD deploys with the controller as YAML, and a golden test keeps that
// file in step with the Go types: it compares MarshalCRD's output with the
// file checked in, and rewrites the file when run with -update (the
// package doc shows the whole test). MarshalCRD leaves out the status,
// which is the API server's to write.
func ExampleMarshalCRD() {
	crd, err := Memcached.CRD()
	if err != nil {
		fmt.Println(err)
		return
	}
	got, err := kube.MarshalCRD(crd)
	if err != nil {
		fmt.Println(err)
		return
	}
	want, err := os.ReadFile(filepath.Join("testdata", "memcacheds.cache.example.com.yaml"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the golden file is up to date:", bytes.Equal(got, want))
	fmt.Println("status written:", bytes.Contains(got, []byte("\nstatus:")))

	head, _, _ := strings.Cut(string(got), "  versions:")
	fmt.Print(head)
	// Output:
	// the golden file is up to date: true
	// status written: false
	// apiVersion: apiextensions.k8s.io/v1
	// kind: CustomResourceDefinition
	// metadata:
	//   name: memcacheds.cache.example.com
	// spec:
	//   group: cache.example.com
	//   names:
	//     categories:
	//     - example
	//     kind: Memcached
	//     listKind: MemcachedList
	//     plural: memcacheds
	//     shortNames:
	//     - mc
	//     singular: memcached
	//   scope: Namespaced
}
