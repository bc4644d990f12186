// Command binsize says what a Go binary for Linux (ELF) is made of: the
// size of its sections, and the bytes of its symbols (code, read-only data
// and data, as go tool nm -size lists them) summed by module or by package,
// the largest first. It is how BENCHMARKS.md's "Binary size" section was
// measured:
//
//	go build -o memcached ./kube/example/memcached
//	go run ./kube/internal/binsize [-by package] [-n 30] memcached
//
// Zero-filled data (.bss, .noptrbss) is left out: it takes no room in the
// file (the FIPS module's 32 MiB DRBG buffer is one). The function tables
// (.gopclntab) and DWARF are not split by package; they grow with the code.
package main

import (
	"cmp"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

func main() {
	by := flag.String("by", "module", "group the symbols by module or by package")
	n := flag.Int("n", 25, "how many groups to print, the largest first")
	flag.Parse()
	if flag.NArg() != 1 || (*by != "module" && *by != "package") {
		fmt.Fprintln(os.Stderr, "usage: binsize [-by module|package] [-n N] binary")
		os.Exit(2)
	}
	if err := report(os.Stdout, flag.Arg(0), *by == "module", *n); err != nil {
		fmt.Fprintln(os.Stderr, "binsize:", err)
		os.Exit(1)
	}
}

// report writes the breakdown of the binary at path to w: its sections,
// then its symbols' bytes by module (or by package), the n largest.
func report(w io.Writer, path string, byModule bool, n int) (err error) {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	syms, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return err
	}
	if len(syms) == 0 {
		return fmt.Errorf("%s has no symbol table: measure a binary built without -ldflags=-s", path)
	}
	out := fmt.Appendf(nil, "%s: %s\n\n", path, mb(st.Size()))
	out = appendSections(out, f)
	out = appendSymbols(out, f, syms, path, byModule, n)
	_, err = w.Write(out)
	return err
}

// appendSections appends the size of f's code, read-only data, function
// tables, symbol table, DWARF and the rest, in the file.
func appendSections(out []byte, f *elf.File) []byte {
	var debug, other uint64
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS || s.Size == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(s.Name, ".debug_"):
			debug += s.FileSize
		case s.Name == ".text", s.Name == ".rodata", s.Name == ".gopclntab",
			s.Name == ".symtab", s.Name == ".strtab":
			out = fmt.Appendf(out, "%10s  %s\n", mb(int64(s.Size)), s.Name)
		default:
			other += s.Size
		}
	}
	out = fmt.Appendf(out, "%10s  DWARF (.debug_*, compressed)\n", mb(int64(debug)))
	return fmt.Appendf(out, "%10s  the other sections\n\n", mb(int64(other)))
}

// appendSymbols appends the bytes of syms, the symbols of the binary f at
// path, summed by module or by package, the n largest groups first.
func appendSymbols(out []byte, f *elf.File, syms []elf.Symbol, path string, byModule bool, n int) []byte {
	var modules []string
	mainPkg := "main"
	if bi, err := buildinfo.ReadFile(path); err == nil {
		mainPkg = bi.Path
		modules = append(modules, bi.Main.Path)
		for _, d := range bi.Deps {
			modules = append(modules, d.Path)
		}
	}
	sums := map[string]int64{}
	var total int64
	for _, s := range syms {
		if int(s.Section) <= 0 || int(s.Section) >= len(f.Sections) || f.Sections[s.Section].Type == elf.SHT_NOBITS {
			continue // undefined, absolute, or zero-filled: no room in the file
		}
		g := packageOf(s.Name)
		if g == "main" {
			g = mainPkg
		}
		if byModule {
			g = moduleOf(g, modules)
		}
		sums[g] += int64(s.Size)
		total += int64(s.Size)
	}
	groups := slices.SortedFunc(maps.Keys(sums), func(a, b string) int {
		return cmp.Or(cmp.Compare(sums[b], sums[a]), strings.Compare(a, b))
	})
	what := "package"
	if byModule {
		what = "module"
	}
	out = fmt.Appendf(out, "%10s  symbols (code, read-only data, data), by %s:\n", mb(total), what)
	var shown int64
	for _, g := range groups[:min(n, len(groups))] {
		out = fmt.Appendf(out, "%10s  %4.1f%%  %s\n", mb(sums[g]), 100*float64(sums[g])/float64(total), g)
		shown += sums[g]
	}
	if rest := len(groups) - n; rest > 0 {
		out = fmt.Appendf(out, "%10s  %4.1f%%  the other %d\n", mb(total-shown), 100*float64(total-shown)/float64(total), rest)
	}
	return out
}

// packageOf is the import path of the package a symbol belongs to, such
// as k8s.io/api/core/v1 for k8s.io/api/core/v1.(*Pod).Marshal and for
// type:*k8s.io/api/core/v1.Pod; "runtime" for the linker's own tables
// (go:func.*, runtime.*); "(types)" for a type no package names, such as
// type:map[string]int; "(constants)" for the linker's, such as $f64.1;
// "main" for the main package's.
func packageOf(sym string) string {
	s := sym
	for _, p := range []string{"go:itab.", "type:", ".eq.", ".hash.", "*"} {
		s = strings.TrimPrefix(s, p)
	}
	if strings.HasPrefix(s, "go:") {
		return "runtime"
	}
	if strings.HasPrefix(s, "$") {
		return "(constants)" // such as $f64.3ff0000000000000
	}
	// An itab names its type and its interface; an instance, its type
	// arguments: only what comes before names the package.
	if i := strings.IndexAny(s, ",["); i >= 0 {
		s = s[:i]
	}
	slash := strings.LastIndexByte(s, '/')
	dot := strings.IndexByte(s[slash+1:], '.')
	if dot <= 0 || strings.ContainsAny(s[:slash+1+dot], " ()") {
		return "(types)"
	}
	// The linker escapes the dots of a path's last element, as in
	// gopkg.in/inf%2ev0.
	return strings.ReplaceAll(s[:slash+1+dot], "%2e", ".")
}

// moduleOf is the module of modules that holds pkg, the one with the
// longest path; "std" for the standard library's packages, whose first
// element has no dot, and pkg itself for one no module holds.
func moduleOf(pkg string, modules []string) string {
	best := ""
	for _, m := range modules {
		if (pkg == m || strings.HasPrefix(pkg, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	switch {
	case best != "":
		return best
	case !strings.Contains(strings.SplitN(pkg, "/", 2)[0], "."):
		return "std"
	default:
		return pkg
	}
}

// mb is n bytes in megabytes (10⁶), as ls -l's sizes are compared.
func mb(n int64) string {
	return fmt.Sprintf("%.2f MB", float64(n)/1e6)
}
