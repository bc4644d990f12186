package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// runAdd adds a resource, or a version of one, to a module new wrote: see
// the package doc.
func runAdd(args []string, stdout, stderr io.Writer) error {
	var r resource
	var dir string
	fs := flags("add", stderr, &r, &dir)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("scaffold add: unexpected arguments %q: every value is a flag's", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	module, hasMod, err := modulePath(dir)
	if err != nil {
		return err
	}
	if !hasMod {
		return fmt.Errorf("scaffold add: %s has no go.mod: add adds to a module, which scaffold new writes", dir)
	}
	if r.Kind == "" {
		return errors.New("scaffold: -kind \"\": required: the kind to add, or to add a version of")
	}
	pkg, err := readApp(dir)
	if err != nil {
		return err
	}
	resources := pkg.resources()
	r.Module = module
	if hub, ok := resources[r.Kind+"Spec"]; ok && hub.Kind == r.Kind {
		return addVersion(r, set, hub, pkg, dir, stdout)
	}
	// A new kind: its group, unless -group says, is the module's first
	// resource's.
	if !set["group"] {
		for _, spec := range slices.Sorted(maps.Keys(resources)) {
			r.Group = resources[spec].Group
			break
		}
	}
	if !set["version"] {
		r.Version = "v1alpha1"
	}
	return addKind(r, pkg, dir, stdout)
}

// addKind writes the files of a new kind, r, and prints what Init needs
// to run its controller, and how deploy/rbac.yaml is written again.
func addKind(r resource, pkg *appPackage, dir string, stdout io.Writer) error {
	errs := r.check(false)
	if len(errs) == 0 {
		for _, name := range []string{r.Kind, r.Kind + "Spec", r.Kind + "Status", r.Kind + "Reconciler", r.Var()} {
			if pkg.declared[name] {
				errs = append(errs, fmt.Errorf("-kind %q: package app declares %s already", r.Kind, name))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("scaffold: %w", errors.Join(errs...))
	}
	d := newData(r, r.Module)
	out := files{}
	if err := renderAll(out, d, map[string]string{
		"app/" + r.Lower() + ".go":                 "kind.go",
		"app/" + r.Lower() + "_reconciler.go":      "reconciler.go",
		"app/" + r.Lower() + "_reconciler_test.go": "reconciler_test.go",
		"app/" + r.Lower() + "_crd_test.go":        "crd_test.go",
	}); err != nil {
		return err
	}
	crd, err := crdYAML(r)
	if err != nil {
		return fmt.Errorf("scaffold: the CRD of %s: %w", r.Kind, err)
	}
	out[r.CRDFile()] = crd
	if err := out.write(dir); err != nil {
		return err
	}
	b, err := render("addkind.txt", d)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, out.list(fmt.Sprintf("%s (%s/%s, %s)", r.Kind, r.Group, r.Version, r.Scope), dir)+string(b))
	return err
}

// versionData is what version.go.tmpl is executed with.
type versionData struct {
	data
	HubVar, HubVersion string
	SpecSource         string   // the hub's spec's struct type, as its source prints
	Fields             []string // its fields' names
	StatusConditions   bool     // whether the status has the Conditions scaffold wrote
	WebhookService     string
}

// addVersion writes r.Version of hub, the kube.Resource of r.Kind, and the
// kind's kube.Versions, and prints what the files the user wrote need to
// serve it.
func addVersion(r resource, set map[string]bool, hub foundResource, pkg *appPackage, dir string, stdout io.Writer) error {
	var errs []error
	bad := func(flag, value, why string) { errs = append(errs, fmt.Errorf("-%s %q: %s", flag, value, why)) }
	switch {
	case !set["version"]:
		bad("version", r.Version, fmt.Sprintf("required: %s exists, at %s: the version to add to it", r.Kind, hub.Version))
	case !versionRE.MatchString(r.Version):
		bad("version", r.Version, "not a Kubernetes version: v1, v1beta1, v2alpha1")
	case r.Version == hub.Version:
		bad("version", r.Version, fmt.Sprintf("%s is at %s already (%s)", r.Kind, hub.Version, hub.Var))
	}
	for _, f := range []struct{ flag, got, want string }{
		{"group", r.Group, hub.Group}, {"plural", r.Plural, hub.Plural}, {"scope", r.Scope, hub.Scope},
	} {
		if set[f.flag] && f.got != f.want {
			bad(f.flag, f.got, fmt.Sprintf("%s has %q, and every version of a resource has the same", hub.Var, f.want))
		}
	}
	src, fields, ok := pkg.structOf(r.Kind + "Spec")
	if !ok {
		errs = append(errs, fmt.Errorf("package app has no struct type %sSpec, the spec of %s, to copy", r.Kind, hub.Var))
	}
	if hub.Group == "" || hub.Version == "" || hub.Plural == "" || hub.Scope == "" {
		errs = append(errs, fmt.Errorf("the literal of %s doesn't set Group, Version, Plural and Scope each to a literal value, as scaffold writes it", hub.Var))
	}
	d := newData(hub.resource, r.Module)
	d.Version = r.Version
	if len(errs) == 0 {
		for _, name := range []string{r.Kind + "Spec" + d.VersionTitle(), r.Kind + d.VersionTitle(), hub.Var + d.VersionTitle(), r.Kind + "Versions"} {
			if pkg.declared[name] {
				errs = append(errs, fmt.Errorf("-kind %q: package app declares %s already: add a version to %sVersions' Others by hand", r.Kind, name, r.Kind))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("scaffold: %w", errors.Join(errs...))
	}
	_, statusFields, _ := pkg.structOf(r.Kind + "Status")
	vd := versionData{
		data:   d,
		HubVar: hub.Var, HubVersion: hub.Version,
		SpecSource:       src,
		Fields:           fields,
		StatusConditions: slices.Contains(statusFields, "Conditions") && pkg.declared[d.Unexported()+"Status"],
		WebhookService:   strings.TrimSuffix(d.AppName, "-controller") + "-webhook",
	}
	out := files{}
	base := "app/" + r.Lower() + "_" + r.Version
	if err := renderAll(out, vd, map[string]string{base + ".go": "version.go", base + "_test.go": "version_test.go"}); err != nil {
		return err
	}
	if err := out.write(dir); err != nil {
		return err
	}
	b, err := render("addversion.txt", vd)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, out.list(fmt.Sprintf("%s %s beside %s, the hub,", r.Kind, r.Version, hub.Version), dir)+string(b))
	return err
}
