package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// An API is the exported names of a package, read from its source: its
// top-level names, and the fields and methods of each of its types.
type API struct {
	Names   map[string]bool
	Members map[string]map[string]bool // by type name
	// Open holds the types that embed another package's type, whose
	// promoted fields and methods aren't read.
	Open map[string]bool
}

// ReadAPI reads the API of the package in dir, from its non-test files.
func ReadAPI(dir string) (*API, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	api := &API{Names: map[string]bool{}, Members: map[string]map[string]bool{}, Open: map[string]bool{}}
	member := func(typ, name string) {
		if api.Members[typ] == nil {
			api.Members[typ] = map[string]bool{}
		}
		api.Members[typ][name] = true
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					api.Names[d.Name.Name] = true
				} else if len(d.Recv.List) == 1 {
					member(typeName(d.Recv.List[0].Type), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							api.Names[n.Name] = true
						}
					case *ast.TypeSpec:
						api.Names[s.Name.Name] = true
						var fields *ast.FieldList
						switch t := s.Type.(type) {
						case *ast.StructType:
							fields = t.Fields
						case *ast.InterfaceType:
							fields = t.Methods
						}
						if fields == nil {
							continue
						}
						for _, fl := range fields.List {
							if len(fl.Names) == 0 { // embedded
								member(s.Name.Name, typeName(fl.Type))
								if isForeign(fl.Type) {
									api.Open[s.Name.Name] = true
								}
							}
							for _, n := range fl.Names {
								member(s.Name.Name, n.Name)
							}
						}
					}
				}
			}
		}
	}
	return api, nil
}

// isForeign reports whether e names another package's type.
func isForeign(e ast.Expr) bool {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	_, ok := e.(*ast.SelectorExpr)
	return ok
}

// typeName is the name of the type a receiver or an embedded field names,
// without a pointer, a package or type arguments.
func typeName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// A Ref is a name in a code span of a Markdown file's prose, such as
// `kube.NewController` or `Settings.Workers`.
type Ref struct {
	File string
	Line int
	Span string // the code span
	Pkg  string // the package's name, or "" for Type.Member
	Name string // the package's name, or the type's
	Sel  string // the member, or ""
}

func (r Ref) String() string { return fmt.Sprintf("%s:%d: `%s`", r.File, r.Line, r.Span) }

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	// pkg.Name, pkg.Name.Member, Type.Member; what follows a call, an
	// index or a literal isn't checked.
	qualified = regexp.MustCompile(`^([a-z]\w*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?\b`)
	member    = regexp.MustCompile(`^([A-Z]\w*)\.([A-Z]\w*)\b`)
)

// Refs returns the references in the code spans of the prose of the
// Markdown file at root/file: outside its fences.
func Refs(root, file string) ([]Ref, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	var refs []Ref
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if trimmed == fence {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			span := m[1]
			if q := qualified.FindStringSubmatch(span); q != nil {
				refs = append(refs, Ref{File: file, Line: n, Span: span, Pkg: q[1], Name: q[2], Sel: q[3]})
			} else if q := member.FindStringSubmatch(span); q != nil {
				refs = append(refs, Ref{File: file, Line: n, Span: span, Name: q[1], Sel: q[2]})
			}
		}
	}
	return refs, sc.Err()
}

// Check returns why r names nothing in apis, the APIs by package name, or
// nil. A package that isn't in apis, or a Type.Member whose type is in
// none of them, such as client-go's, isn't checked.
func (r Ref) Check(apis map[string]*API) error {
	if r.Pkg != "" {
		api, ok := apis[r.Pkg]
		if !ok {
			return nil
		}
		if !api.Names[r.Name] {
			return fmt.Errorf("%s: package %s has no %s", r, r.Pkg, r.Name)
		}
		if r.Sel != "" && api.Members[r.Name] != nil && !api.Members[r.Name][r.Sel] && !api.Open[r.Name] {
			return fmt.Errorf("%s: %s.%s has no field or method %s", r, r.Pkg, r.Name, r.Sel)
		}
		return nil
	}
	found := false
	for _, api := range apis {
		if !api.Names[r.Name] {
			continue
		}
		found = true
		if api.Members[r.Name][r.Sel] || api.Open[r.Name] {
			return nil
		}
	}
	if found {
		return fmt.Errorf("%s: %s has no field or method %s", r, r.Name, r.Sel)
	}
	return nil
}
