package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// flags are the flags new and add share, naming the resource and the
// folder.
func flags(name string, stderr io.Writer, r *resource, dir *string) *flag.FlagSet {
	fs := flag.NewFlagSet("scaffold "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&r.Group, "group", r.Group, "the API group, a DNS name with a dot, such as web.example.com")
	fs.StringVar(&r.Version, "version", r.Version, "the version, such as v1alpha1")
	fs.StringVar(&r.Kind, "kind", "", "the kind, in UpperCamelCase, such as Website")
	fs.StringVar(&r.Plural, "plural", "", "the plural, in lower case; the kind's, in lower case with s, es or ies, unless set")
	fs.StringVar(&r.Scope, "scope", "Namespaced", "Namespaced or Cluster")
	fs.StringVar(dir, "dir", ".", "the module's folder")
	return fs
}

// runNew writes a new module: see the package doc.
func runNew(args []string, stdout, stderr io.Writer) error {
	r := resource{Version: "v1alpha1"}
	var dir string
	fs := flags("new", stderr, &r, &dir)
	fs.StringVar(&r.Module, "module", "", "the module's path, such as example.com/website; the go.mod's, when the folder has one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("scaffold new: unexpected arguments %q: every value is a flag's", fs.Args())
	}

	out := files{}
	module, hasMod, modErr := modulePath(dir)
	if modErr != nil {
		return modErr
	}
	var errs []error
	switch {
	case hasMod && r.Module != "" && r.Module != module:
		errs = append(errs, fmt.Errorf("-module %q: the folder's go.mod is module %s", r.Module, module))
	case hasMod:
		r.Module = module
	}
	errs = append(errs, r.check(!hasMod)...)
	if len(errs) > 0 {
		return fmt.Errorf("scaffold: %w", errors.Join(errs...))
	}

	d := newData(r, r.Module)
	d.HumusVersion, d.KubeVersion = versions()
	paths := map[string]string{
		"main.go":                                  "main.go",
		"app/app.go":                               "app.go",
		"app/main_test.go":                         "main_test.go",
		"app/app_test.go":                          "app_test.go",
		"app/rbac_test.go":                         "rbac_test.go",
		"deploy/namespace.yaml":                    "namespace.yaml",
		"deploy/deployment.yaml":                   "deployment.yaml",
		"README.md":                                "README.md",
		"app/" + r.Lower() + ".go":                 "kind.go",
		"app/" + r.Lower() + "_reconciler.go":      "reconciler.go",
		"app/" + r.Lower() + "_reconciler_test.go": "reconciler_test.go",
		"app/" + r.Lower() + "_crd_test.go":        "crd_test.go",
	}
	if !hasMod {
		paths["go.mod"] = "go.mod"
	}
	if err := renderAll(out, d, paths); err != nil {
		return err
	}
	if err := derive(out, d); err != nil {
		return err
	}
	if err := out.write(dir); err != nil {
		return err
	}

	msg := out.list(fmt.Sprintf("the module %s, the controller of %s (%s/%s, %s),", r.Module, r.Kind, r.Group, r.Version, r.Scope), dir) +
		"Next:\n  go mod tidy\n  go test -short ./...   # the unit and golden tests\n" +
		"  go test ./...          # and the whole App against a real control plane (see README.md: its first run builds it)\n"
	if !hasMod && d.KubeVersion == develVersion {
		msg += "go.mod requires humus's modules at " + develVersion + ": this scaffold was built from a checkout, not a release. Point them at it first:\n" +
			"  go mod edit -replace github.com/z5labs/humus=PATH -replace github.com/z5labs/humus/kube=PATH/kube\n"
	}
	_, err := io.WriteString(stdout, msg)
	return err
}

// develVersion is the version go.mod requires of humus's modules when the
// scaffold was built from a checkout rather than a release: a
// placeholder that replace directives satisfy.
const develVersion = "v0.0.0"

// versions are the versions of humus's two modules this command was built
// with: the ones the module it runs in requires, when run from within a
// module with go run, or its own, when run as go run PACKAGE@VERSION;
// develVersion for one built from a checkout.
func versions() (humus, kube string) {
	humus, kube = develVersion, develVersion
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return humus, kube
	}
	released := func(v string) bool { return v != "" && v != "(devel)" }
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for _, m := range mods {
		switch {
		case m.Path == "github.com/z5labs/humus" && released(m.Version):
			humus = m.Version
		case m.Path == "github.com/z5labs/humus/kube" && released(m.Version):
			kube = m.Version
		}
	}
	return humus, kube
}

// modulePath is the module path of dir's go.mod, and whether it has one.
func modulePath(dir string) (string, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("scaffold: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			p := f[1]
			if uq, err := strconv.Unquote(p); err == nil {
				p = uq
			}
			return p, true, nil
		}
	}
	return "", false, fmt.Errorf("scaffold: %s has no module line", filepath.Join(dir, "go.mod"))
}
