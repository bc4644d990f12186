// Command apicheck compares the public API of each module of the repository
// with the module's last release, and fails on an incompatible change the
// changelog doesn't name.
//
// The modules are those go.work uses; a module in dir is tagged dir/vX.Y.Z,
// the one at the root vX.Y.Z. Its last release is the newest release of
// CHANGELOG.md that names its tag, and the release's commit is the one the
// changelog records beside it, not the tag's, since tags don't travel with
// every clone: the commit must be in the clone's history (a shallow clone
// lacks it). A tag that is present must point at the recorded commit.
//
// The old API is read from that commit's tree, written by git archive into
// a temporary folder that is removed afterwards; the new one from the
// working tree as it is, uncommitted changes included. Both are loaded with
// go list and compared by golang.org/x/exp/apidiff, package by package. A
// public package is any but a main package, one under an internal/ folder
// or one under an example/ folder (whole Apps to copy, not an API).
//
// An incompatible change passes only if the Changed or Removed subsection
// of the Unreleased section (or of a newer release that didn't tag the
// module) names it in a code span: the object qualified by its package's
// name or its path from the repository's root, such as
// `kube.Settings.Workers`, `(*kube.Controller).Serve` or
// `kube.NewController(...)`; naming a type (`kube.Settings`) names every
// change to its fields and methods. A removed package is named by its path
// (`kube/kubeenv`). Compatible changes need no entry.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/packages"
)

func main() {
	root := flag.String("C", ".", "the repository's root: its go.work, CHANGELOG.md and git history")
	flag.Parse()
	if err := check(context.Background(), *root, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(1)
	}
}

// A module is one module of go.work's.
type module struct {
	dir       string // relative to the repository's root, "." for the root
	path      string // the module path
	tagPrefix string // "" for the root module, "dir/" for the module in dir
}

// check compares the working tree under root with each module's last
// release and writes what changed to w. It returns an error if a change is
// incompatible and CHANGELOG.md doesn't name it, or if anything can't be
// read or loaded.
func check(ctx context.Context, root string, w io.Writer) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	cl, err := readChangelog(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	mods, rootPath, err := workModules(root)
	if err != nil {
		return err
	}

	releases := &trees{root: root}
	defer releases.removeAll()
	var werr error // the first error writing to w
	printf := func(format string, args ...any) {
		if werr == nil {
			_, werr = fmt.Fprintf(w, format, args...)
		}
	}
	var unnamed int
	for _, m := range mods {
		rel, tag, names, ok := cl.lastRelease(m.tagPrefix)
		if !ok {
			printf("%s: no release in CHANGELOG.md yet, nothing to compare\n", m.path)
			continue
		}
		if err := checkRelease(ctx, root, tag, rel.commit); err != nil {
			return err
		}
		printf("%s: against %s (commit %.12s)\n", m.path, tag, rel.commit)

		dir, err := releases.tree(ctx, rel.commit)
		if err != nil {
			return err
		}
		old, err := loadPublic(ctx, dir, m)
		if err != nil {
			return fmt.Errorf("loading %s at commit %s: %w", m.path, rel.commit, err)
		}
		cur, err := loadPublic(ctx, root, m)
		if err != nil {
			return err
		}
		for _, c := range compare(rootPath, old, cur) {
			switch {
			case c.compatible:
				printf("  compatible    %s: %s\n", c.pkg, c.message)
			case slices.ContainsFunc(c.names, func(n string) bool { return names[n] }):
				printf("  incompatible  %s: %s (named in CHANGELOG.md)\n", c.pkg, c.message)
			default:
				unnamed++
				printf("  INCOMPATIBLE  %s: %s: CHANGELOG.md doesn't name it; name `%s`\n", c.pkg, c.message, c.suggest)
			}
		}
	}
	if unnamed > 0 {
		return fmt.Errorf("%d incompatible change(s) since the last release that CHANGELOG.md doesn't name: "+
			"say what changed for a user under ### Changed or ### Removed of ## Unreleased, naming each in a code span as above", unnamed)
	}
	return werr
}

// workModules reads the modules go.work uses, and the root module's path.
func workModules(root string) ([]module, string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, "", err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, "", err
	}
	var (
		mods     []module
		rootPath string
	)
	for _, u := range wf.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		if path.IsAbs(dir) || strings.HasPrefix(dir, "../") {
			return nil, "", fmt.Errorf("go.work uses %s, outside the repository", u.Path)
		}
		gomod, err := os.ReadFile(filepath.Join(root, dir, "go.mod"))
		if err != nil {
			return nil, "", err
		}
		p := modfile.ModulePath(gomod)
		if p == "" {
			return nil, "", fmt.Errorf("%s/go.mod names no module", dir)
		}
		m := module{dir: dir, path: p}
		if dir == "." {
			rootPath = p
		} else {
			m.tagPrefix = dir + "/"
		}
		mods = append(mods, m)
	}
	if rootPath == "" {
		return nil, "", errors.New("go.work doesn't use the repository's root module (use .)")
	}
	return mods, rootPath, nil
}

// checkRelease reports an error if commit is not in the clone's history, or
// if tag is present and points elsewhere.
func checkRelease(ctx context.Context, root, tag, commit string) error {
	if _, err := git(ctx, root, nil, "cat-file", "-e", commit+"^{commit}"); err != nil {
		return fmt.Errorf("commit %s, %s's in CHANGELOG.md, is not in this clone's history (a shallow clone lacks it: git fetch --unshallow)", commit, tag)
	}
	out, err := git(ctx, root, nil, "tag", "--list", tag)
	if err != nil || strings.TrimSpace(out) == "" {
		return err // no tag in this clone: the changelog's commit is the release
	}
	at, err := git(ctx, root, nil, "rev-parse", tag+"^{commit}")
	if err != nil {
		return err
	}
	if at = strings.TrimSpace(at); at != commit {
		return fmt.Errorf("tag %s points at commit %s, CHANGELOG.md records %s: one of them is wrong", tag, at, commit)
	}
	return nil
}

// trees writes each release's tree once, with git archive, into a
// temporary folder that removeAll removes.
type trees struct {
	root string            // the repository
	tmp  string            // the temporary folder, made on first use
	dirs map[string]string // each tree's folder, by commit
}

// tree returns the folder of commit's tree, writing it on first use.
func (t *trees) tree(ctx context.Context, commit string) (string, error) {
	if dir, ok := t.dirs[commit]; ok {
		return dir, nil
	}
	if t.tmp == "" {
		tmp, err := os.MkdirTemp("", "apicheck-")
		if err != nil {
			return "", err
		}
		t.tmp = tmp
	}
	dir := filepath.Join(t.tmp, commit)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		// tar's end lies before git's padding: read to the end either way,
		// or git blocks writing the rest.
		err := untar(pr, dir)
		if err == nil {
			_, err = io.Copy(io.Discard, pr)
		}
		_ = pr.CloseWithError(err)
		done <- err
	}()
	_, gitErr := git(ctx, t.root, pw, "archive", "--format=tar", commit)
	_ = pw.CloseWithError(gitErr)
	if err := <-done; err != nil {
		return "", fmt.Errorf("writing commit %s's tree: %w", commit, err)
	}
	if gitErr != nil {
		return "", gitErr
	}
	if t.dirs == nil {
		t.dirs = map[string]string{}
	}
	t.dirs[commit] = dir
	return dir, nil
}

func (t *trees) removeAll() {
	if t.tmp != "" {
		_ = os.RemoveAll(t.tmp)
	}
}

// untar writes a tar stream of regular files and folders under dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, dir+string(filepath.Separator)) {
			return fmt.Errorf("archive entry %q is outside the folder", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, h.FileInfo().Mode().Perm())
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// loadPublic loads the public packages of m in the tree under root, in the
// tree's workspace if it has one, keyed by import path.
func loadPublic(ctx context.Context, root string, m module) (map[string]*types.Package, error) {
	work := filepath.Join(root, "go.work")
	if _, err := os.Stat(work); err != nil {
		work = "off"
	}
	cfg := &packages.Config{
		Context: ctx,
		Mode:    packages.NeedName | packages.NeedTypes,
		Dir:     filepath.Join(root, m.dir),
		Env:     append(os.Environ(), "GOWORK="+work), //nolint:forbidigo // a command, not an App: go list runs in the developer's environment
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	var errs []string
	public := map[string]*types.Package{}
	for _, p := range pkgs {
		if !isPublic(p.PkgPath, p.Name) {
			continue
		}
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
		public[p.PkgPath] = p.Types
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return public, nil
}

// isPublic reports whether the package is part of the promised API: not a
// command, not internal, not an example.
func isPublic(importPath, name string) bool {
	if name == "main" {
		return false
	}
	for _, e := range strings.Split(importPath, "/") {
		if e == "internal" || e == "example" {
			return false
		}
	}
	return true
}

// A change is one difference of a public package's API.
type change struct {
	pkg        string // the package's import path
	message    string // apidiff's, or "package removed" or "package added"
	compatible bool
	// names are the changelog names that name the change: for a change
	// to kube.Settings' Workers, kube.Settings and kube.Settings.Workers;
	// for one to kube/kubeenv's Connection, kubeenv.Connection and
	// kube/kubeenv.Connection.
	names []string
	// suggest is the most precise name qualified by the package's name.
	suggest string
}

// compare lists the changes from old to cur, package by package in the
// order of their import paths. rootPath is the root module's path, from
// which a package's path in the repository is cut.
func compare(rootPath string, old, cur map[string]*types.Package) []change {
	var changes []change
	for _, p := range slices.Sorted(maps.Keys(old)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, rootPath), "/")
		np, ok := cur[p]
		if !ok {
			names := []string{p}
			if rel != "" {
				names = append(names, rel)
			}
			changes = append(changes, change{pkg: p, message: "package removed", names: names, suggest: names[len(names)-1]})
			continue
		}
		for _, c := range apidiff.Changes(old[p], np).Changes {
			names := changeNames(old[p].Name(), rel, c.Message)
			changes = append(changes, change{
				pkg: p, message: c.Message, compatible: c.Compatible,
				names: names, suggest: names[len(names)-1],
			})
		}
	}
	for _, p := range slices.Sorted(maps.Keys(cur)) {
		if _, ok := old[p]; !ok {
			changes = append(changes, change{pkg: p, message: "package added", compatible: true})
		}
	}
	return changes
}

// changeNames returns the names that name the change apidiff's message
// describes, in package pkgName at rel (its path in the repository, "" for
// the root package): the message's object, "T", "T.M", "(*T).M",
// "T[K, V].M" or "T, method set of *T", qualified by the package's name
// and by its path, and, for a member, its type's too. The last is the most
// precise qualified by the package's name.
func changeNames(pkgName, rel, message string) []string {
	obj, _, _ := strings.Cut(message, ": ")
	var b strings.Builder
	depth := 0
	for _, r := range obj {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth > 0, r == '(', r == ')', r == '*':
		default:
			b.WriteRune(r)
		}
	}
	obj, _, _ = strings.Cut(b.String(), ",")
	var quals []string
	if rel != "" && rel != pkgName {
		quals = append(quals, rel)
	}
	quals = append(quals, pkgName)
	if i := strings.LastIndex(obj, "/"); i >= 0 || strings.HasPrefix(obj, ".") {
		// An object of another package: apidiff qualified it already
		// ("./kube.T" or "github.com/x/y.T"); its package's name is the
		// last element of the path, as in this repository.
		obj, quals = obj[i+1:], nil
	}
	var names []string
	parts := strings.Split(obj, ".")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], ".")
		if quals == nil {
			if i > 0 {
				names = append(names, prefix)
			}
			continue
		}
		for _, q := range quals {
			names = append(names, q+"."+prefix)
		}
	}
	if len(names) == 0 {
		names = []string{obj}
	}
	return names
}

// git runs git in dir and returns its standard output, or writes it to
// stdout if that isn't nil.
func git(ctx context.Context, dir string, stdout io.Writer, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout = &out
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}
