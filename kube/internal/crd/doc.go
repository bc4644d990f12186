// Package crd builds a custom resource's CustomResourceDefinition from Go
// types: a structural schema reflected from the spec and status types as
// encoding/json writes them, constrained by typed rules on their fields,
// with the names, printer columns and scale subresource the resource
// declares. It is what kube.Resource.CRD and kube.MarshalCRD do; package
// kube keeps the public types (Resource, Column, Scale, TypeRules,
// FieldOf) and hands Build their values as this package's Meta, Column,
// Scale, TypeRules, Field and Constraint. It depends on nothing of the
// controller.
//
// Build promises:
//
//   - The schema is what encoding/json writes, by its rules: exported
//     fields by their json tag's name, json:"-" left out, the fields of
//     an embedded struct without a json name inlined, of two fields with
//     one name the shallower or the tagged one, and neither when neither
//     wins; ",string" makes a scalar a string. A field is required unless
//     it is omitempty, omitzero, defaulted, or promoted through an
//     embedded pointer; a pointer is nullable unless it is omitempty or
//     omitzero.
//   - The schema it reflects is structural, as the API server requires of
//     a CRD's: every node has a type, or is x-kubernetes-int-or-string or
//     x-kubernetes-preserve-unknown-fields; a type that has none, such as
//     an interface, or that contains itself, is an error. apimachinery's types that
//     encode themselves (metav1.Time, MicroTime and Duration,
//     resource.Quantity, intstr.IntOrString, runtime.RawExtension) have the
//     schema the API server expects, an ObjectMeta below the root the
//     fields a template sets, and a metav1.Condition the constraints of
//     its kubebuilder markers. A type that encodes itself otherwise, with
//     MarshalJSON, has the Schema its TypeRules give, or is an error; with
//     MarshalText, it is a string.
//   - A Field with Items (kube.Each, kube.Values) constrains the items'
//     schema of its slice, or the values' of its map, as a Field does its
//     field's; a Default there is an error, since an item is never missing.
//   - A type's rules apply wherever the type appears, and where encoding/json
//     inlines it; an outer type's rules for a promoted field apply after
//     the embedded type's. A constraint that doesn't fit its field's
//     schema is left out of it, and reported once.
//   - Every mistake is reported at once: Build returns no CRD and one
//     error that joins them all, each naming the Go type and field it is
//     about and the field's path in the object, or the kube.Resource field
//     it is in. The errors are kube's: they reach kube's users unchanged
//     from kube.Resource.CRD, so each begins "kube: " and names kube's API
//     (Resource.Columns[2], kube.Schema[T]), not this package's.
//   - A printer column's JSONPath and the scale subresource's paths are
//     walked through the reflected schema, with metadata as ObjectMeta's
//     fields: a path that names no field, or a field of the wrong type, is
//     an error, which the API server would accept.
//   - Build reads no state but its arguments and keeps none: the same
//     arguments give the same CRD, which shares no memory with them. It
//     doesn't panic on any spec or status type (FuzzCRD checks this), and
//     it doesn't compile CEL rules, which the API server does.
//
// Marshal writes a CRD as the YAML that deploys it, keys sorted, without
// the status that is the API server's to write.
//
// What it may import: apimachinery, apiextensions' API types, client-go's
// jsonpath and sigs.k8s.io/yaml; nothing of kube or of the rest of the
// engine, and nothing that reaches a cluster: it works on Go types alone,
// so kube, the scaffold and the tests' golden files all build a CRD the
// same way.
package crd
