package kube

import (
	"encoding/json"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// MarshalCRD returns crd as the YAML file that deploys it, such as the one
// a golden test keeps in step with the Go types (the package doc shows
// one). It is sigs.k8s.io/yaml's encoding of crd, keys sorted, without
// the status: yaml.Marshal writes a CRD's zero status as
// "status: {acceptedNames: {kind: "", plural: ""}, conditions: null,
// storedVersions: null}", which is the API server's to write, and which an
// apply of the file ignores.
//
// MarshalCRD takes the CRD rather than the Resource, so a CRD the end user
// changes before writing it, with a label or an annotation such as
// helm.sh/resource-policy: keep, is written the same way, and
// Resource.CRD stays the one way a CRD is built.
func MarshalCRD(crd *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	if crd == nil {
		return nil, errors.New("kube: MarshalCRD: the CRD is nil")
	}
	b, err := json.Marshal(crd)
	if err != nil {
		return nil, fmt.Errorf("kube: MarshalCRD %s: %w", crd.Name, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("kube: MarshalCRD %s: %w", crd.Name, err)
	}
	delete(fields, "status")
	if b, err = json.Marshal(fields); err != nil {
		return nil, fmt.Errorf("kube: MarshalCRD %s: %w", crd.Name, err)
	}
	out, err := yaml.JSONToYAML(b)
	if err != nil {
		return nil, fmt.Errorf("kube: MarshalCRD %s: %w", crd.Name, err)
	}
	return out, nil
}
