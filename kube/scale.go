package kube

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Scale is a Resource's scale subresource: each object's /scale, an
// autoscaling/v1 Scale read from and written to the object's own fields,
// which kubectl scale, kubectl autoscale and a HorizontalPodAutoscaler
// use. A write to /scale sets the field SpecReplicasPath names, and is
// validated by the schema as any write of the object is.
//
// Each path is a field's names from the object's root, joined by dots,
// such as ".spec.replicas": the API server splits it at each dot, so it
// can't hold an index, a filter or an escaped dot.
type Scale struct {
	// SpecReplicasPath is the field of Spec that the Scale's
	// spec.replicas reads and writes, such as ".spec.replicas". Required:
	// a field under .spec, of an int32 (type: integer, format: int32:
	// int32, int16, int8, uint16 or uint8 in Go), as a Scale's replicas
	// are, and not nullable. The API server fails a GET of /scale for an
	// object without the field, so leave its json tag without omitempty,
	// or give it a Default.
	SpecReplicasPath string

	// StatusReplicasPath is the field of Status that the Scale's
	// status.replicas reads, such as ".status.replicas". Required: a field
	// under .status, of an int32, not nullable. An object without it
	// reads as 0.
	StatusReplicasPath string

	// LabelSelectorPath is the field that the Scale's status.selector
	// reads: the label selector of the pods the object runs, in its
	// string form (metav1.FormatLabelSelector writes it), such as
	// ".status.selector". A HorizontalPodAutoscaler needs it to find the
	// pods. Default "": none. Otherwise a string field, not nullable,
	// under .spec or .status, as the API server requires.
	LabelSelectorPath string
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
