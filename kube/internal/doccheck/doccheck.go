// Package doccheck compiles the Go code blocks of the repository's
// Markdown, so that a block naming an API that doesn't exist, or calling
// one with the wrong types, fails a test (TestDocs in this package).
//
// A block is a fence opened with ```go. It is compiled in one of three
// ways:
//
//   - A whole file, one that starts with a package clause, compiles as a
//     package of its own.
//   - Declarations (a func with a body, a var, a const, a type) compile at
//     the top level of a package of their own. A func without a body, such
//     as a method's signature, claims that the function exists with that
//     signature: it compiles to var _ func(Recv, Params) Results = Recv.Name.
//   - Anything else is statements, compiled in the body of a function, and
//     every name they declare at its top level is used, so a fragment
//     needn't use all it declares.
//
// An HTML comment right before the fence, invisible once rendered, says
// more, as "key value" pairs separated by semicolons:
//
//		<!-- go: in kube/example/memcached/app; func(s *humus.Setup, rec Reconciler) -->
//
//	  - in DIR compiles the block inside the package in DIR (a path from the
//	    repository's root), so it sees that package's unexported names. The
//	    package isn't changed: the block is a file of its own, given to the
//	    compiler through go build -overlay. There a var X = V claims that X
//	    exists and V can be assigned to it, and statements can't shadow
//	    nothing: the block mustn't declare what the package does at the top
//	    level, except as a var, or as a func without a body.
//	  - func SIGNATURE is the signature of the function that statements
//	    compile in, func() by default: its parameters are the names the
//	    fragment takes as given, and its results what a return in it returns.
//	  - imports PATH... imports each path, as NAME=PATH to name it, beside the
//	    imports of Imports that the block uses.
//	  - file PATH says the block is the file at PATH of the docs' own module:
//	    a module outside the repository, as a user's is, which Module
//	    assembles from every such block, of any language (a YAML manifest
//	    too). TestDocs leaves these blocks to the test that builds that
//	    module and runs its tests against the control plane.
//
// Every generated file carries //line comments, so that the compiler's
// errors name the Markdown file and its line.
//
// The prose is checked too, by name only (see Refs): a code span such as
// `kube.NewController`, `kube.Settings.Workers` or `Settings.Workers` must
// name what one of the repository's packages exports (TestDocsNames).
package doccheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Imports are the package names a block may use without saying where they
// come from, and the packages they name.
var Imports = map[string]string{
	"context":      "context",
	"errors":       "errors",
	"flag":         "flag",
	"fmt":          "fmt",
	"testing":      "testing",
	"net":          "net",
	"os":           "os",
	"regexp":       "regexp",
	"time":         "time",
	"humus":        "github.com/z5labs/humus",
	"config":       "github.com/z5labs/humus/config",
	"health":       "github.com/z5labs/humus/health",
	"humustest":    "github.com/z5labs/humus/humustest",
	"webhook":      "github.com/z5labs/humus/webhook",
	"kube":         "github.com/z5labs/humus/kube",
	"admission":    "github.com/z5labs/humus/kube/admission",
	"policytest":   "github.com/z5labs/humus/kube/admission/policytest",
	"app":          "github.com/z5labs/humus/kube/example/memcached/app",
	"appsv1":       "k8s.io/api/apps/v1",
	"corev1":       "k8s.io/api/core/v1",
	"networkingv1": "k8s.io/api/networking/v1",
	"metav1":       "k8s.io/apimachinery/pkg/apis/meta/v1",
	"appsv1ac":     "k8s.io/client-go/applyconfigurations/apps/v1",
	"corev1ac":     "k8s.io/client-go/applyconfigurations/core/v1",
	"metav1ac":     "k8s.io/client-go/applyconfigurations/meta/v1",
	"kubernetes":   "k8s.io/client-go/kubernetes",
	"kubefake":     "k8s.io/client-go/kubernetes/fake",
	"clientcmd":    "k8s.io/client-go/tools/clientcmd",
	"yaml":         "sigs.k8s.io/yaml",
}

// A Block is one ```go fence of a Markdown file.
type Block struct {
	File string // the Markdown file, from the repository's root, with slashes
	Line int    // the line of the block's first line of code, from 1
	Code string

	In         string            // the in directive's DIR, or ""
	Func       string            // the func directive's signature, or ""
	Imports    map[string]string // the imports directive's, by name
	ModuleFile string            // the file directive's PATH, or ""
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// marker is the HTML comment that gives a block its directives.
var marker = regexp.MustCompile(`^<!--\s*go:(.*?)-->\s*$`)

// Blocks returns the ```go blocks of the Markdown file at root/file.
func Blocks(root, file string) ([]Block, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	var (
		blocks  []Block
		cur     *Block
		code    strings.Builder
		pending string // the marker on the line before, if any
		fence   string
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if trimmed == fence {
				cur.Code = code.String()
				blocks = append(blocks, *cur)
				cur, fence = nil, ""
				continue
			}
			code.WriteString(line)
			code.WriteByte('\n')
			continue
		}
		if fence != "" { // inside a fence of another language
			if trimmed == fence {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			lang := strings.TrimSpace(strings.TrimLeft(trimmed, "`~"))
			b := Block{File: file, Line: n + 1}
			if err := b.directives(pending); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", file, n-1, err)
			}
			if lang == "go" || b.ModuleFile != "" {
				cur = &b
				code.Reset()
			}
			pending = ""
			continue
		}
		if m := marker.FindStringSubmatch(trimmed); m != nil {
			pending = m[1]
			continue
		}
		if trimmed != "" {
			pending = ""
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil || fence != "" {
		return nil, fmt.Errorf("%s: a fence is never closed", file)
	}
	return blocks, nil
}

// directives sets b's directives from a marker's text.
func (b *Block) directives(text string) error {
	for d := range strings.SplitSeq(text, ";") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		key, value, _ := strings.Cut(d, " ")
		value = strings.TrimSpace(value)
		switch {
		case key == "in" && value != "":
			b.In = value
		case strings.HasPrefix(d, "func("):
			b.Func = d
		case key == "file" && value != "" && filepath.IsLocal(value):
			b.ModuleFile = value
		case key == "imports" && value != "":
			b.Imports = map[string]string{}
			for _, imp := range strings.Fields(value) {
				name, p, ok := strings.Cut(imp, "=")
				if !ok {
					p, name = imp, path.Base(imp)
				}
				b.Imports[name] = p
			}
		default:
			return fmt.Errorf("doccheck: unknown directive %q", d)
		}
	}
	return nil
}

// Module returns the files of the docs' own module, by their paths in it,
// from the blocks with a file directive: each file is the blocks naming it,
// in order, so a file can be shown a part at a time. It is an error for a
// block to have a file directive beside another.
func Module(blocks []Block) (map[string]string, error) {
	files := map[string]string{}
	var errs []error
	for _, b := range blocks {
		if b.ModuleFile == "" {
			continue
		}
		if b.In != "" || b.Func != "" || b.Imports != nil {
			errs = append(errs, fmt.Errorf("%s: a file directive stands alone", b))
		}
		if files[b.ModuleFile] != "" {
			files[b.ModuleFile] += "\n"
		}
		files[b.ModuleFile] += b.Code
	}
	return files, errors.Join(errs...)
}

// A Source is one generated Go file, and where the compiler is to think
// it is.
type Source struct {
	Block Block
	Dir   string // the package's folder, from the module's root, with slashes
	Name  string // the file's name in it
	Code  []byte
}

// Generate makes b's Go file, the nth of its package. root is the
// repository's root; genDir, a folder from the module's root, holds the
// packages of blocks that aren't compiled in a package of the repository.
func Generate(root, module string, b Block, genDir string, n int) (Source, error) {
	src, pkg, err := place(root, module, b, genDir, n)
	if err != nil {
		return src, err
	}
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", b.Code, parser.PackageClauseOnly); err == nil && f.Name != nil {
		if b.In != "" {
			return src, fmt.Errorf("%s: a whole file can't be compiled in a package", b)
		}
		src.Code = []byte(lineComment(b, b.Line) + b.Code)
		return src, nil
	}
	var body string
	if f, err := parser.ParseFile(fset, "", declPrefix+b.Code, parser.SkipObjectResolution); err == nil && len(f.Decls) > 0 {
		body, err = declarations(parsedDecls{b: b, fset: fset, f: f})
		if err != nil {
			return src, err
		}
	} else {
		body, err = statements(b, fset)
		if err != nil {
			return src, err
		}
	}
	src.Code = file(b, pkg, body)
	return src, nil
}

// place is where b's file goes, the nth of its package, and the name of
// that package: a package of its own in genDir, or, with an in
// directive, the package of the repository the directive names.
func place(root, module string, b Block, genDir string, n int) (Source, string, error) {
	src := Source{Block: b, Dir: path.Join(genDir, fmt.Sprintf("b%03d", n)), Name: "block.go"}
	if b.In == "" {
		return src, "snippet", nil
	}
	dir := filepath.Join(root, filepath.FromSlash(b.In))
	rel, err := filepath.Rel(module, dir)
	if err != nil {
		return src, "", err
	}
	src.Dir = filepath.ToSlash(rel)
	src.Name = fmt.Sprintf("zz_doccheck_%03d.go", n)
	pkg, err := packageName(dir)
	if err != nil {
		return src, "", fmt.Errorf("%s: %w", b, err)
	}
	return src, pkg, nil
}

// lineComment is the //line comment that puts what follows it at line n
// of b's Markdown file.
func lineComment(b Block, n int) string { return fmt.Sprintf("\n//line %s:%d\n", b.File, n) }

// declPrefix is what a block of declarations is parsed after.
const declPrefix = "package p\n"

// parsedDecls is a block of declarations, parsed as declPrefix+b.Code
// into f.
type parsedDecls struct {
	b    Block
	fset *token.FileSet
	f    *ast.File
}

// text is the code of n, as the block has it.
func (p parsedDecls) text(n ast.Node) string {
	return (declPrefix + p.b.Code)[p.fset.Position(n.Pos()).Offset:p.fset.Position(n.End()).Offset]
}

// line is the //line comment for n's line in the Markdown file.
func (p parsedDecls) line(n ast.Node) string {
	return lineComment(p.b, p.b.Line+p.fset.Position(n.Pos()).Line-2)
}

// declarations is the body of the file of a block of declarations: each
// as it is, or, in a package, the claims that it makes (a func without a
// body, a var).
func declarations(p parsedDecls) (string, error) {
	var body strings.Builder
	for _, d := range p.f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Body == nil {
				body.WriteString(p.line(d) + signatureClaim(d, p.text))
				continue
			}
			if p.b.In != "" {
				return "", fmt.Errorf("%s: func %s has a body: in a package, a func may only be a signature", p.b, d.Name.Name)
			}
			body.WriteString(p.line(d) + p.text(d))
		case *ast.GenDecl:
			if p.b.In == "" {
				body.WriteString(p.line(d) + p.text(d))
				continue
			}
			if d.Tok != token.VAR {
				return "", fmt.Errorf("%s: a %s declaration can't be compiled in a package, only a var", p.b, d.Tok)
			}
			if err := varClaims(p, d, &body); err != nil {
				return "", err
			}
		}
	}
	return body.String(), nil
}

// varClaims writes to body the claim of each name of d, a var in a
// package: the name exists, and the value can be assigned to it.
func varClaims(p parsedDecls, d *ast.GenDecl, body *strings.Builder) error {
	for _, s := range d.Specs {
		vs := s.(*ast.ValueSpec)
		for i, name := range vs.Names {
			var claim string
			switch {
			case vs.Type != nil && i < len(vs.Values):
				claim = fmt.Sprintf("var x %s = %s; x = %s", p.text(vs.Type), p.text(vs.Values[i]), name.Name)
			case vs.Type != nil:
				claim = fmt.Sprintf("var x %s = %s", p.text(vs.Type), name.Name)
			case i < len(vs.Values):
				claim = fmt.Sprintf("x := %s; x = %s", name.Name, p.text(vs.Values[i]))
			default:
				return fmt.Errorf("%s: var %s has neither a type nor a value", p.b, name.Name)
			}
			body.WriteString(p.line(vs) + "var _ = func() { " + claim + "; _ = x }\n")
		}
	}
	return nil
}

// statements is the body of the file of a block of statements: a func of
// the block's signature holding them, and a use of every name they
// declare at the top level, at the end or before a return that ends the
// block.
func statements(b Block, fset *token.FileSet) (string, error) {
	sig := strings.TrimPrefix(cmpOr(b.Func, "func()"), "func")
	wrapped := "package p\nfunc _" + sig + " {\n" + b.Code + "\n}\n"
	f, err := parser.ParseFile(fset, "", wrapped, parser.SkipObjectResolution)
	if err != nil {
		return "", fmt.Errorf("%s: neither a file, declarations nor statements: %w", b, relocate(err, b))
	}
	fn := f.Decls[0].(*ast.FuncDecl)
	var uses strings.Builder
	for _, name := range declared(fn.Body.List) {
		uses.WriteString("\t_ = " + name + "\n")
	}
	code, rest := b.Code, ""
	if last := fn.Body.List[len(fn.Body.List)-1]; isReturn(last) && uses.Len() > 0 {
		pos := fset.Position(last.Pos())
		off := pos.Offset - (len(wrapped) - len(b.Code) - len("\n}\n"))
		code = b.Code[:off] + "\n"
		rest = lineComment(b, b.Line+pos.Line-3) + strings.Repeat(" ", pos.Column-1) + b.Code[off:]
	}
	return "\nfunc _" + sig + " {" + lineComment(b, b.Line) + code + "\n" + uses.String() + rest + "}\n", nil
}

// file is the generated file of b, in package pkg: its header, the
// imports body uses, and body.
func file(b Block, pkg, body string) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, "// Code generated by doccheck from %s. DO NOT EDIT.\n\npackage %s\n", b, pkg)
	imports := used(b.Func+"\n"+body, b.Imports)
	if len(imports) > 0 {
		out.WriteString("\nimport (\n")
		for _, imp := range imports {
			fmt.Fprintf(&out, "\t%s\n", imp)
		}
		out.WriteString(")\n")
	}
	out.WriteString(body)
	return out.Bytes()
}

// signatureClaim is the claim that the function d names exists with d's
// signature: var _ func(Recv, Params) Results = Recv.Name.
func signatureClaim(d *ast.FuncDecl, text func(ast.Node) string) string {
	var params []string
	target := d.Name.Name
	if d.Recv != nil && len(d.Recv.List) == 1 {
		recv := text(d.Recv.List[0].Type)
		params = append(params, recv)
		if strings.HasPrefix(recv, "*") {
			recv = "(" + recv + ")"
		}
		target = recv + "." + d.Name.Name
	}
	for _, p := range d.Type.Params.List {
		n := max(len(p.Names), 1)
		for range n {
			params = append(params, text(p.Type))
		}
	}
	results := ""
	if r := d.Type.Results; r != nil {
		var rs []string
		for _, p := range r.List {
			for range max(len(p.Names), 1) {
				rs = append(rs, text(p.Type))
			}
		}
		results = " (" + strings.Join(rs, ", ") + ")"
	}
	return fmt.Sprintf("var _ func(%s)%s = %s\n", strings.Join(params, ", "), results, target)
}

// isReturn reports whether s is a return statement.
func isReturn(s ast.Stmt) bool {
	_, ok := s.(*ast.ReturnStmt)
	return ok
}

// declared is the names that stmts declare, but _.
func declared(stmts []ast.Stmt) []string {
	var names []string
	add := func(id *ast.Ident) {
		if id.Name != "_" && !slices.Contains(names, id.Name) {
			names = append(names, id.Name)
		}
	}
	for _, s := range stmts {
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, l := range s.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						add(id)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, spec := range g.Specs {
					for _, id := range spec.(*ast.ValueSpec).Names {
						add(id)
					}
				}
			}
		}
	}
	return names
}

// used is the import specs of the packages code refers to, as NAME. in
// code: those of extra first, then Imports'.
func used(code string, extra map[string]string) []string {
	refs := map[string]bool{}
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("", -1, len(code)), []byte(code), nil, 0)
	prev := ""
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.PERIOD && prev != "" {
			refs[prev] = true
		}
		prev = ""
		if tok == token.IDENT {
			prev = lit
		}
	}
	var specs []string
	for name := range refs {
		p, ok := extra[name]
		if !ok {
			p, ok = Imports[name]
		}
		if !ok {
			continue // a local name, such as a parameter's; or undefined, which the compiler says
		}
		if path.Base(p) == name {
			specs = append(specs, strconv.Quote(p))
		} else {
			specs = append(specs, name+" "+strconv.Quote(p))
		}
	}
	slices.Sort(specs)
	return specs
}

// packageName is the name of the package in dir, from its first non-test
// Go file.
func packageName(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			return "", err
		}
		return pf.Name.Name, nil
	}
	return "", fmt.Errorf("no Go package in %s", dir)
}

// relocate turns a parse error's positions in the wrapped code into the
// block's.
func relocate(err error, b Block) error {
	var list scanner.ErrorList
	if !errors.As(err, &list) {
		return err
	}
	var msgs []string
	for _, e := range list {
		msgs = append(msgs, fmt.Sprintf("%s:%d: %s", b.File, b.Line+e.Pos.Line-3, e.Msg))
	}
	return errors.New(strings.Join(msgs, "\n"))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Build compiles srcs with go build, run in module (an absolute path),
// each file given to the compiler through an overlay written in tmp. It
// returns the compiler's output, whose positions are the Markdown files'.
func Build(module, tmp string, srcs []Source) (string, error) {
	overlay := map[string]string{}
	pkgs := map[string]bool{}
	for i, s := range srcs {
		real := filepath.Join(tmp, fmt.Sprintf("%03d.go", i))
		if err := os.WriteFile(real, s.Code, 0o644); err != nil {
			return "", err
		}
		overlay[filepath.Join(module, filepath.FromSlash(s.Dir), s.Name)] = real
		pkgs["./"+s.Dir] = true
	}
	js, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		return "", err
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, js, 0o644); err != nil {
		return "", err
	}
	args := []string{"build", "-overlay", overlayFile}
	for p := range pkgs {
		args = append(args, p)
	}
	slices.Sort(args[3:])
	cmd := exec.Command("go", args...)
	cmd.Dir = module
	out, err := cmd.CombinedOutput()
	return string(out), err
}
