package crd

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/util/jsonpath"
)

// Column is a kube.Column, whose doc says what each field holds: a column
// that kubectl get prints for the resource's objects.
type Column struct {
	Name        string
	JSONPath    string
	Type        string
	Format      string
	Description string
	Priority    int32
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
