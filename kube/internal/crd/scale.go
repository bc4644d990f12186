package crd

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Scale is a kube.Scale, whose doc says what each path names: the
// resource's scale subresource.
type Scale struct {
	SpecReplicasPath   string
	StatusReplicasPath string
	LabelSelectorPath  string
}

// scaleSubresource returns the CRD's scale subresource for s, and every
// mistake in s. root is the object's schema.
func scaleSubresource(s *Scale, root fieldPath) (*apiextensionsv1.CustomResourceSubresourceScale, []error) {
	if s == nil {
		return nil, nil
	}
	var errs []error
	check := func(field, path string, under []string, want scaleField) {
		if path == "" {
			errs = append(errs, fmt.Errorf("kube: Resource.Scale: missing %s", field))
		} else if err := want.check(path, root, under); err != nil {
			errs = append(errs, fmt.Errorf("kube: Resource.Scale.%s %q: %w", field, path, err))
		}
	}
	check("SpecReplicasPath", s.SpecReplicasPath, []string{"spec"}, specReplicasField)
	check("StatusReplicasPath", s.StatusReplicasPath, []string{"status"}, replicasField)
	out := &apiextensionsv1.CustomResourceSubresourceScale{
		SpecReplicasPath:   s.SpecReplicasPath,
		StatusReplicasPath: s.StatusReplicasPath,
	}
	if s.LabelSelectorPath != "" {
		check("LabelSelectorPath", s.LabelSelectorPath, []string{"spec", "status"}, selectorField)
		out.LabelSelectorPath = ptrTo(s.LabelSelectorPath)
	}
	return out, errs
}

// scaleField is the schema of a field a Scale reads.
type scaleField struct {
	what, typ, format string
	example           string
	always            bool // every object has it: required, or with a default
}

var (
	replicasField = scaleField{what: "a Scale's replicas are", typ: "integer", format: "int32", example: "replicas"}
	selectorField = scaleField{what: "a Scale's selector is", typ: "string", example: "selector"}

	// The API server fails a GET of /scale for an object without its spec
	// replicas field, so the field must always be there.
	specReplicasField = scaleField{what: "a Scale's replicas are", typ: "integer", format: "int32", example: "replicas", always: true}
)

// check checks that path names a field under one of under, of want's
// type and format, and not nullable.
func (want scaleField) check(path string, root fieldPath, under []string) error {
	names := strings.Split(strings.TrimPrefix(path, "."), ".")
	if path[0] != '.' || len(names) < 2 || !slices.Contains(under, names[0]) {
		return fmt.Errorf("must be a field under .%s, such as .%s.%s", strings.Join(under, " or ."), under[len(under)-1], want.example)
	}
	f, parent := root, root
	for _, n := range names {
		var err error
		parent = f
		if f, err = f.field(n); err != nil {
			return err
		}
	}
	schema := "type: " + want.typ
	if want.format != "" {
		schema += ", format: " + want.format
	}
	if p := f.schema; p == nil || p.Type != want.typ || p.Format != want.format || p.Nullable {
		return fmt.Errorf("names %s, which is %s: %s %s, not nullable", f.where(), describeSchema(p), want.what, schema)
	}
	last := names[len(names)-1]
	if want.always && f.schema.Default == nil && (parent.schema == nil || !slices.Contains(parent.schema.Required, last)) {
		return fmt.Errorf("names %s, which an object may lack (omitempty, and no Default): the API server fails a GET of /scale then; drop omitempty or give it a Default", f.where())
	}
	return nil
}
