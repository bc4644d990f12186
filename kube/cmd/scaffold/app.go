package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// appPackage is what add reads of a module's package app: the names it
// declares, and the resources and spec types scaffold wrote there.
type appPackage struct {
	fset     *token.FileSet
	files    []*ast.File
	declared map[string]bool
}

// readApp parses the Go files of dir/app, its tests left out.
func readApp(dir string) (*appPackage, error) {
	p := &appPackage{fset: token.NewFileSet(), declared: map[string]bool{}}
	appDir := filepath.Join(dir, "app")
	entries, err := os.ReadDir(appDir)
	if err != nil {
		return nil, fmt.Errorf("scaffold add: %w: add adds to a module scaffold new wrote, whose package app is in app/", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, filepath.Join(appDir, e.Name()), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("scaffold add: %w", err)
		}
		p.files = append(p.files, f)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					p.declared[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						p.declared[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							p.declared[n.Name] = true
						}
					}
				}
			}
		}
	}
	return p, nil
}

// A foundResource is a kube.Resource variable of package app, and the
// values of its literal.
type foundResource struct {
	Var string
	resource
}

// resources are the package-level variables of package app whose value
// is a literal kube.Resource[SPEC, STATUS]{...}, by SPEC's name.
func (p *appPackage) resources() map[string]foundResource {
	found := map[string]foundResource{}
	for _, f := range p.files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, v := range vs.Values {
					lit, ok := v.(*ast.CompositeLit)
					if !ok || i >= len(vs.Names) {
						continue
					}
					spec, ok := resourceSpec(lit.Type)
					if !ok {
						continue
					}
					found[spec] = foundResource{Var: vs.Names[i].Name, resource: literalValues(lit)}
				}
			}
		}
	}
	return found
}

// resourceSpec is SPEC's name when t is kube.Resource[SPEC, STATUS].
func resourceSpec(t ast.Expr) (string, bool) {
	il, ok := t.(*ast.IndexListExpr)
	if !ok || len(il.Indices) != 2 {
		return "", false
	}
	sel, ok := il.X.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Resource" {
		return "", false
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "kube" {
		return "", false
	}
	spec, ok := il.Indices[0].(*ast.Ident)
	if !ok {
		return "", false
	}
	return spec.Name, true
}

// literalValues are the Group, Version, Kind, Plural and Scope that lit
// sets to literals.
func literalValues(lit *ast.CompositeLit) resource {
	var r resource
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, ok := kv.Key.(*ast.Ident)
		if !ok {
			continue
		}
		var value string
		switch v := kv.Value.(type) {
		case *ast.BasicLit:
			value, _ = strconv.Unquote(v.Value)
		case *ast.SelectorExpr:
			value = v.Sel.Name
		}
		switch key.Name {
		case "Group":
			r.Group = value
		case "Version":
			r.Version = value
		case "Kind":
			r.Kind = value
		case "Plural":
			r.Plural = value
		case "Scope":
			r.Scope = value
		}
	}
	return r
}

// structOf is the struct type named name, as its source prints with its
// comments, and its fields' names (an embedded field's by its type's).
func (p *appPackage) structOf(name string) (src string, fields []string, ok bool) {
	for _, f := range p.files {
		for _, d := range f.Decls {
			gd, isGen := d.(*ast.GenDecl)
			if !isGen || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				st, isStruct := ts.Type.(*ast.StructType)
				if ts.Name.Name != name || !isStruct || ts.TypeParams != nil {
					continue
				}
				var b bytes.Buffer
				if err := printer.Fprint(&b, p.fset, &printer.CommentedNode{Node: st, Comments: f.Comments}); err != nil {
					return "", nil, false
				}
				for _, field := range st.Fields.List {
					if len(field.Names) == 0 {
						t := field.Type
						if star, ok := t.(*ast.StarExpr); ok {
							t = star.X
						}
						switch t := t.(type) {
						case *ast.Ident:
							fields = append(fields, t.Name)
						case *ast.SelectorExpr:
							fields = append(fields, t.Sel.Name)
						}
						continue
					}
					for _, n := range field.Names {
						fields = append(fields, n.Name)
					}
				}
				return b.String(), fields, true
			}
		}
	}
	return "", nil, false
}
