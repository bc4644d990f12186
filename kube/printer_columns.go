package kube

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/util/jsonpath"
)

// Column is a column that kubectl get prints for a Resource's objects,
// after NAME: the API server fills it in, from each object's field that
// JSONPath names, in the Table it answers a request for
// application/json;as=Table;v=v1;g=meta.k8s.io with.
type Column struct {
	// Name is the column's heading, such as Ready. Required. kubectl
	// prints headings in upper case, so no two Columns may have names that
	// differ only in case, and none may be Name, the table's first column.
	Name string

	// JSONPath is the field the column shows, from the object's root:
	// field names, array indexes and filters, such as ".spec.size",
	// `.status.conditions[?(@.type=="Available")].status` or
	// ".metadata.creationTimestamp". Required. It must name a field of the
	// schema CRD reflects, or of the object's metadata; an index or a
	// filter steps into an array's items, and a filter's own field names
	// must be fields of the items too. A key with dots in it is written
	// with them escaped, as in .metadata.labels.app\.kubernetes\.io/name.
	// An object that lacks the field, or whose array no item of matches
	// the filter, shows an empty cell.
	JSONPath string

	// Type is how the API server reads the field: "integer", "number",
	// "string", "boolean", or "date", a timestamp, which kubectl prints as
	// an age such as 5m. Default "": the field's schema says: type:
	// integer is "integer", type: number "number", type: boolean
	// "boolean", a string of format date-time or date (such as a
	// metav1.Time) "date", and anything else "string". A Type given must
	// be able to show the field: "integer" and "number" a number,
	// "boolean" a boolean, "date" a string; "string" shows any field, an
	// object or an array as its JSON.
	Type string

	// Format is a hint for a client showing the value: "int32", "int64",
	// "float", "double", "byte", "date", "date-time" or "password".
	// Default "": none.
	Format string

	// Description is what the column shows, in the Table's column
	// definitions. Default "": the API server writes "Custom resource
	// definition column (in JSONPath format): " and JSONPath.
	Description string

	// Priority 0, the default, shows the column in kubectl get; above 0,
	// only in kubectl get -o wide.
	Priority int32
}

// The values the API server takes for a column's type and format
// (apiextensions-apiserver's validation: printerColumnDatatypes and
// customResourceColumnDefinitionFormats).
var (
	columnTypes   = []string{"integer", "number", "string", "boolean", "date"}
	columnFormats = []string{"int32", "int64", "float", "double", "byte", "date", "date-time", "password"}
)

// printerColumns returns the CRD's printer columns for cols, each Type
// given or taken from the schema, and every mistake in them.
func printerColumns(cols []Column, root fieldPath) ([]apiextensionsv1.CustomResourceColumnDefinition, []error) {
	var (
		out  []apiextensionsv1.CustomResourceColumnDefinition
		errs []error
	)
	seen := map[string]int{"name": -1} // the table's first column
	for i, c := range cols {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("kube: Resource.Columns[%d] %q (%s): "+format, append([]any{i, c.Name, c.JSONPath}, args...)...))
		}
		if c.Name == "" {
			bad("missing Name")
		} else if j, ok := seen[strings.ToLower(c.Name)]; ok {
			if j < 0 {
				bad("Name is the table's first column, which kubectl always prints")
			} else {
				bad("Name is given twice, as Columns[%d] %q too: kubectl prints headings in upper case", j, cols[j].Name)
			}
		} else {
			seen[strings.ToLower(c.Name)] = i
		}
		if c.Type != "" && !slices.Contains(columnTypes, c.Type) {
			bad("Type %q isn't one of %s", c.Type, strings.Join(columnTypes, ", "))
		}
		if c.Format != "" && !slices.Contains(columnFormats, c.Format) {
			bad("Format %q isn't one of %s", c.Format, strings.Join(columnFormats, ", "))
		}
		typ, err := columnType(c, root)
		if err != nil {
			bad("%v", err)
		}
		out = append(out, apiextensionsv1.CustomResourceColumnDefinition{
			Name:        c.Name,
			Type:        typ,
			Format:      c.Format,
			Description: c.Description,
			Priority:    c.Priority,
			JSONPath:    c.JSONPath,
		})
	}
	return out, errs
}

// columnType walks c's JSONPath through the schema, and returns c's Type:
// as given, when it can show the field, or else as the field's schema
// says.
func columnType(c Column, root fieldPath) (string, error) {
	f, err := walkColumn(c.JSONPath, root)
	if err != nil {
		return c.Type, err
	}
	p := f.schema
	if c.Type == "" {
		return typeOfColumn(p), nil
	}
	if p == nil || p.Type == "" && !p.XIntOrString {
		return c.Type, nil // a field of any type: the API server shows what it finds
	}
	fits := map[string]bool{
		"integer": p.Type == "integer" || p.Type == "number",
		"number":  p.Type == "integer" || p.Type == "number",
		"boolean": p.Type == "boolean",
		"date":    p.Type == "string",
		"string":  true,
	}
	if ok, known := fits[c.Type]; known && !ok {
		return c.Type, fmt.Errorf("its Type %q can't show %s, which is %s: the cell would be empty", c.Type, f.where(), describeSchema(p))
	}
	return c.Type, nil
}

// typeOfColumn is the column type that shows a field of schema p.
func typeOfColumn(p *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case p == nil || p.XIntOrString:
		return "string"
	case p.Type == "integer", p.Type == "number", p.Type == "boolean":
		return p.Type
	case p.Type == "string" && (p.Format == "date-time" || p.Format == "date"):
		return "date"
	}
	return "string"
}

// walkColumn parses path as the API server does, with client-go's
// jsonpath, and walks it through the schema from root.
func walkColumn(path string, root fieldPath) (fieldPath, error) {
	switch {
	case path == "":
		return root, errors.New("missing JSONPath")
	case path[0] != '.':
		return root, errors.New("JSONPath must start with a dot, such as .spec.size")
	}
	parser, err := jsonpath.Parse("column", "{"+path+"}")
	if err != nil {
		return root, fmt.Errorf("JSONPath doesn't parse: %w", err)
	}
	steps, ok := onePath(parser.Root)
	if !ok {
		return root, errors.New("JSONPath isn't one path: write field names, array indexes and filters, such as .status.conditions[?(@.type==\"Ready\")].status")
	}
	return walkSteps(root, steps, true)
}

// onePath returns the steps of a template that is one path, {.a.b}.
func onePath(root *jsonpath.ListNode) ([]jsonpath.Node, bool) {
	if root == nil || len(root.Nodes) != 1 {
		return nil, false
	}
	l, ok := root.Nodes[0].(*jsonpath.ListNode)
	return l.Nodes, ok
}

// walkSteps walks steps from f. A filter's operands are walked from the
// items it filters, when filters allows them.
func walkSteps(f fieldPath, steps []jsonpath.Node, filters bool) (fieldPath, error) {
	var err error
	for _, s := range steps {
		switch s := s.(type) {
		case *jsonpath.FieldNode:
			if s.Value == "" {
				continue // the path "." is the object itself
			}
			f, err = f.field(s.Value)
		case *jsonpath.ArrayNode:
			f, err = f.items("an index")
		case *jsonpath.FilterNode:
			if !filters {
				return f, errors.New("JSONPath has a filter in a filter, which names no one field")
			}
			if f, err = f.items("a filter"); err == nil {
				err = walkOperands(f, s)
			}
		case *jsonpath.WildcardNode:
			if f.schema != nil && f.schema.Type == "array" {
				f, err = f.items("*")
			} else {
				f, err = f.field("*")
			}
		case *jsonpath.RecursiveNode:
			return f, errors.New("JSONPath has a recursive descent (..), which names no one field: write field names, array indexes and filters")
		case *jsonpath.UnionNode:
			return f, errors.New("JSONPath has a union ([a,b]), which names no one field: write field names, array indexes and filters")
		default:
			return f, fmt.Errorf("JSONPath has %s, which names no field", s)
		}
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

// walkOperands walks the operands of a filter that are paths, such as
// @.type, from items.
func walkOperands(items fieldPath, filter *jsonpath.FilterNode) error {
	for _, op := range []*jsonpath.ListNode{filter.Left, filter.Right} {
		if op == nil || len(op.Nodes) == 0 {
			continue
		}
		if _, ok := op.Nodes[0].(*jsonpath.FieldNode); !ok {
			continue // a literal, such as "Available"
		}
		if _, err := walkSteps(items, op.Nodes, false); err != nil {
			return err
		}
	}
	return nil
}
