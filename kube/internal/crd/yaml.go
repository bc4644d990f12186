package crd

import (
	"encoding/json"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Marshal is kube.MarshalCRD: c as the YAML file that deploys it,
// sigs.k8s.io/yaml's encoding of c, keys sorted, without the status,
// which is the API server's to write (yaml.Marshal writes a CRD's zero
// status as "status: {acceptedNames: {kind: "", plural: ""}, conditions:
// null, storedVersions: null}", which an apply of the file ignores).
func Marshal(c *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	if c == nil {
		return nil, errors.New("kube: MarshalCRD: the CRD is nil")
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("kube: MarshalCRD %s: %w", c.Name, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("kube: MarshalCRD %s: %w", c.Name, err)
	}
	delete(fields, "status")
	if b, err = json.Marshal(fields); err != nil {
		return nil, fmt.Errorf("kube: MarshalCRD %s: %w", c.Name, err)
	}
	out, err := yaml.JSONToYAML(b)
	if err != nil {
		return nil, fmt.Errorf("kube: MarshalCRD %s: %w", c.Name, err)
	}
	return out, nil
}
