// Command filecycles counts, in each Go package it is given, which of the
// package's files use which others' names (package-level names, and the
// fields and methods of its types, as go/types resolves them), and fails
// when the files of one package tie into a cycle of more than -max files.
//
// A file that uses a name another file declares depends on that file; a
// cycle is a set of files each of which reaches every other that way (a
// strongly connected component). Within one package nothing but this
// count holds a layer: the compiler refuses an import cycle between
// packages, not a tie between files. It reads the packages' source and
// their dependencies' export data (go list), so it needs a build, not a
// cluster.
//
//	filecycles [-max 8] [-v] packages...
//
// With -v it prints each package's files, ties and cycles, and each tie of
// a cycle with the names it uses; without, only the packages over -max.
package main

import (
	"flag"
	"fmt"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	limit := flag.Int("max", 8, "the most files a cycle may hold")
	verbose := flag.Bool("v", false, "print every package's cycles and the names that tie them")
	flag.Parse()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "filecycles:", err)
		os.Exit(2)
	}
	if packages.PrintErrors(pkgs) > 0 {
		os.Exit(2)
	}
	over := 0
	for _, p := range pkgs {
		g := ties(p)
		cycles := g.cycles()
		largest := 0
		for _, c := range cycles {
			largest = max(largest, len(c))
		}
		if largest > *limit {
			over++
		}
		if !*verbose && largest <= *limit {
			continue
		}
		fmt.Printf("%s: %d files, %d ties, largest cycle %d files\n", p.PkgPath, len(p.GoFiles), g.count(), largest)
		for _, c := range cycles {
			fmt.Printf("  cycle of %d: %s\n", len(c), strings.Join(c, " "))
			for _, a := range c {
				for _, b := range c {
					if names := g[a][b]; names != nil {
						fmt.Printf("    %s -> %s: %s\n", a, b, strings.Join(sorted(names), " "))
					}
				}
			}
		}
	}
	if over > 0 {
		fmt.Fprintf(os.Stderr, "filecycles: %d package(s) hold a cycle of more than %d files: give what ties them a file (or a package) of its own\n", over, *limit)
		os.Exit(1)
	}
}

// graph is the files of one package, and for each, the files whose names
// it uses and those names.
type graph map[string]map[string]map[string]bool

// ties reads which file uses which other file's names in p.
func ties(p *packages.Package) graph {
	g := graph{}
	for _, f := range p.GoFiles {
		g[filepath.Base(f)] = map[string]map[string]bool{}
	}
	for id, obj := range p.TypesInfo.Uses {
		if !declaredAtTop(p.Types, obj) {
			continue
		}
		from := filepath.Base(p.Fset.Position(id.Pos()).Filename)
		to := filepath.Base(p.Fset.Position(obj.Pos()).Filename)
		if from == to || g[from] == nil || g[to] == nil {
			continue
		}
		if g[from][to] == nil {
			g[from][to] = map[string]bool{}
		}
		g[from][to][obj.Name()] = true
	}
	return g
}

// declaredAtTop reports whether obj is one of pkg's own package-level
// names, or a field or method of one of its types: not a local, a
// parameter, a label or an import.
func declaredAtTop(pkg *types.Package, obj types.Object) bool {
	if obj == nil || obj.Pkg() != pkg {
		return false
	}
	switch o := obj.(type) {
	case *types.Var:
		return o.IsField() || o.Parent() == pkg.Scope()
	case *types.Func:
		return o.Signature().Recv() != nil || o.Parent() == pkg.Scope()
	case *types.TypeName, *types.Const:
		return o.Parent() == pkg.Scope()
	}
	return false
}

func (g graph) count() int {
	n := 0
	for _, to := range g {
		n += len(to)
	}
	return n
}

// cycles returns the strongly connected components of more than one file,
// each sorted, largest first (Tarjan's algorithm).
func (g graph) cycles() [][]string {
	index, low, on := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		on[v] = true
		for _, w := range sorted(g[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var c []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			on[w] = false
			c = append(c, w)
			if w == v {
				break
			}
		}
		if len(c) > 1 {
			slices.Sort(c)
			out = append(out, c)
		}
	}
	for _, v := range sorted(g) {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	slices.SortStableFunc(out, func(a, b []string) int { return len(b) - len(a) })
	return out
}

// sorted is m's keys in order.
func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
