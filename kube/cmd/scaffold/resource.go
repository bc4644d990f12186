package main

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
)

// A resource is the custom resource a command writes files for, as its
// flags name it, and the names the templates derive from them.
type resource struct {
	Module  string // the Go module's path, such as example.com/website
	Group   string // web.example.com
	Version string // v1alpha1
	Kind    string // Website
	Plural  string // websites
	Scope   string // Namespaced or Cluster
}

// Namespaced reports whether the resource's objects live in namespaces.
func (r resource) Namespaced() bool { return r.Scope == "Namespaced" }

// Lower is the kind in lower case: the prefix of its files, website.
func (r resource) Lower() string { return strings.ToLower(r.Kind) }

// Unexported is the kind as an unexported Go name, the prefix of its
// package-level variables: website, or dnsZone for DNSZone.
func (r resource) Unexported() string {
	upper := 0
	for upper < len(r.Kind) && unicode.IsUpper(rune(r.Kind[upper])) {
		upper++
	}
	if upper > 1 && upper < len(r.Kind) {
		upper-- // the last capital starts the next word: DNSZone's Z
	}
	return strings.ToLower(r.Kind[:upper]) + r.Kind[upper:]
}

// Var is the name of the kube.Resource variable: the plural, exported,
// spelt as the kind is where the two agree, Websites, or DNSZones.
func (r resource) Var() string {
	if rest, ok := strings.CutPrefix(r.Plural, strings.ToLower(r.Kind)); ok {
		return r.Kind + rest
	}
	return strings.ToUpper(r.Plural[:1]) + r.Plural[1:]
}

// CRDName is the CRD's name, websites.web.example.com.
func (r resource) CRDName() string { return r.Plural + "." + r.Group }

// CRDFile is where the CRD's YAML is kept, from the module's root.
func (r resource) CRDFile() string { return "deploy/crds/" + r.CRDName() + ".yaml" }

// VersionTitle is the version as a Go name's part: V1beta1.
func (r resource) VersionTitle() string { return strings.ToUpper(r.Version[:1]) + r.Version[1:] }

// AppName is the controller's name, its field manager's and its Lease's,
// from the module path's last element: website-controller.
func AppName(module string) string {
	last := module[strings.LastIndex(module, "/")+1:]
	var b strings.Builder
	for _, c := range strings.ToLower(last) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if name == "" || !unicode.IsLetter(rune(name[0])) {
		name = "app-" + name
	}
	return strings.TrimSuffix(name, "-") + "-controller"
}

var (
	kindRE    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	versionRE = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	pluralRE  = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	moduleRE  = regexp.MustCompile(`^[a-z0-9][-a-z0-9.]*[a-z0-9](/[A-Za-z0-9][-A-Za-z0-9._~]*)*$`)
)

// pluralOf is kind's plural as Kubernetes writes one: in lower case, with
// s, es after s, x, z, ch and sh, and ies for a y after a consonant.
func pluralOf(kind string) string {
	l := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(l, "s"), strings.HasSuffix(l, "x"), strings.HasSuffix(l, "z"),
		strings.HasSuffix(l, "ch"), strings.HasSuffix(l, "sh"):
		return l + "es"
	case strings.HasSuffix(l, "y") && len(l) > 1 && !strings.ContainsRune("aeiou", rune(l[len(l)-2])):
		return l[:len(l)-1] + "ies"
	}
	return l + "s"
}

// check returns every mistake in r's values, each naming its flag, its
// value and what is wrong with it. A plural left empty is derived from
// the kind first.
func (r *resource) check(withModule bool) []error {
	var errs []error
	bad := func(flag, value, why string) {
		errs = append(errs, fmt.Errorf("-%s %q: %s", flag, value, why))
	}
	if withModule {
		switch {
		case r.Module == "":
			bad("module", r.Module, "required when the folder has no go.mod: the module's path, such as example.com/website")
		case !moduleRE.MatchString(r.Module) || !strings.Contains(strings.SplitN(r.Module, "/", 2)[0], "."):
			bad("module", r.Module, "not a module path: a domain with a dot, then path elements, such as example.com/website")
		}
	}
	switch {
	case r.Group == "":
		bad("group", r.Group, "required: the API group, a DNS name with a dot, such as web.example.com")
	case len(validation.IsDNS1123Subdomain(r.Group)) > 0 || !strings.Contains(r.Group, "."):
		bad("group", r.Group, "not an API group: a DNS name in lower case with at least one dot, such as web.example.com")
	}
	if !versionRE.MatchString(r.Version) {
		bad("version", r.Version, "not a Kubernetes version: v1, v1beta1, v2alpha1")
	}
	switch {
	case r.Kind == "":
		bad("kind", r.Kind, "required: the kind, in UpperCamelCase, such as Website")
	case !kindRE.MatchString(r.Kind):
		bad("kind", r.Kind, "not a kind: a Go name in UpperCamelCase, a letter then letters and digits, such as Website")
	}
	if r.Plural == "" && r.Kind != "" && kindRE.MatchString(r.Kind) {
		r.Plural = pluralOf(r.Kind)
	}
	if r.Plural != "" && !pluralRE.MatchString(r.Plural) {
		bad("plural", r.Plural, "not a plural: a lower-case letter, then lower-case letters and digits, such as websites")
	}
	if r.Plural != "" && r.Plural == strings.ToLower(r.Kind) {
		bad("plural", r.Plural, "the same as the kind's singular, "+strings.ToLower(r.Kind)+": kubectl couldn't tell them apart")
	}
	if r.Scope != "Namespaced" && r.Scope != "Cluster" {
		bad("scope", r.Scope, "not a scope: Namespaced or Cluster")
	}
	return errs
}
