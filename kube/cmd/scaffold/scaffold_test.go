package main

import (
	"bytes"
	"crypto/sha256"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/outsidetest"
)

func TestPluralOf(t *testing.T) {
	for kind, want := range map[string]string{
		"Website": "websites", "Memcached": "memcacheds", "Class": "classes", "Box": "boxes",
		"Match": "matches", "Mesh": "meshes", "Policy": "policies", "Gateway": "gateways", "DNSZone": "dnszones",
	} {
		if got := pluralOf(kind); got != want {
			t.Errorf("pluralOf(%q) = %q, want %q", kind, got, want)
		}
	}
}

func TestGoNames(t *testing.T) {
	for _, tc := range []struct{ kind, plural, unexported, variable string }{
		{"Website", "websites", "website", "Websites"},
		{"DNSZone", "dnszones", "dnsZone", "DNSZones"},
		{"Policy", "policies", "policy", "Policies"},
		{"URL", "urls", "url", "URLs"},
		{"Mouse", "mice", "mouse", "Mice"},
	} {
		r := resource{Kind: tc.kind, Plural: tc.plural}
		if got := r.Unexported(); got != tc.unexported {
			t.Errorf("%s's unexported name is %q, want %q", tc.kind, got, tc.unexported)
		}
		if got := r.Var(); got != tc.variable {
			t.Errorf("%s's Resource variable is %q, want %q", tc.kind, got, tc.variable)
		}
	}
}

func TestAppName(t *testing.T) {
	for module, want := range map[string]string{
		"example.com/website":         "website-controller",
		"github.com/acme/Blog_Engine": "blog-engine-controller",
		"example.com/x/v2":            "v2-controller",
		"example.com/9lives":          "app-9lives-controller",
	} {
		if got := AppName(module); got != want {
			t.Errorf("AppName(%q) = %q, want %q", module, got, want)
		}
	}
}

// Every bad flag is named in one error, with its value and what is wrong
// with it, and nothing is written.
func TestNewNamesEveryBadFlagAtOnce(t *testing.T) {
	dir := t.TempDir()
	err := run([]string{"new", "-dir", dir, "-module", "website", "-group", "Web_Example", "-version", "v1.0",
		"-kind", "web site", "-plural", "Web-Sites", "-scope", "namespaced"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil {
		t.Fatal("new with six bad flags succeeded")
	}
	for _, want := range []string{
		`-module "website": not a module path`,
		`-group "Web_Example": not an API group`,
		`-version "v1.0": not a Kubernetes version`,
		`-kind "web site": not a kind`,
		`-plural "Web-Sites": not a plural`,
		`-scope "namespaced": not a scope: Namespaced or Cluster`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q:\n%v", want, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("new wrote %d files after refusing its flags", len(entries))
	}
}

func TestNewNeedsItsFlags(t *testing.T) {
	err := run([]string{"new", "-dir", t.TempDir()}, &bytes.Buffer{}, &bytes.Buffer{})
	for _, want := range []string{`-module "": required`, `-group "": required`, `-kind "": required`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error doesn't say %q:\n%v", want, err)
		}
	}
}

// A file that exists is never overwritten: new writes nothing, and names
// every file in its way.
func TestNewRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	mine := map[string]string{"main.go": "package main // mine\n", "deploy/rbac.yaml": "# mine\n"}
	for name, content := range mine {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := run([]string{"new", "-dir", dir, "-module", "example.com/website", "-group", "web.example.com", "-kind", "Website"},
		&bytes.Buffer{}, &bytes.Buffer{})
	if err == nil {
		t.Fatal("new over existing files succeeded")
	}
	for name := range mine {
		if !strings.Contains(err.Error(), "  "+name+"\n") && !strings.HasSuffix(err.Error(), "  "+name) {
			t.Errorf("the error doesn't name %s:\n%v", name, err)
		}
	}
	if got := tree(t, dir); len(got) != len(mine) {
		t.Errorf("new wrote files after refusing: %v", slices.Sorted(maps.Keys(got)))
	}
	for name, content := range mine {
		if got := tree(t, dir)[name]; got != sum([]byte(content)) {
			t.Errorf("%s changed", name)
		}
	}
}

// add never overwrites either: a file in its way is named, and nothing
// is written.
func TestAddRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"new", "-dir", dir, "-module", "example.com/website", "-group", "web.example.com", "-kind", "Website"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "deploy/crds/posts.web.example.com.yaml"), []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := tree(t, dir)
	err := run([]string{"add", "-dir", dir, "-kind", "Post"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "  deploy/crds/posts.web.example.com.yaml") {
		t.Errorf("add over an existing file: %v, want a refusal naming it", err)
	}
	if after := tree(t, dir); len(after) != len(before) {
		t.Errorf("add wrote files after refusing: %v", slices.Sorted(maps.Keys(after)))
	}
	err = run([]string{"add", "-dir", dir, "-kind", "Website", "-version", "v1alpha1", "-scope", "Cluster"}, &bytes.Buffer{}, &bytes.Buffer{})
	for _, want := range []string{`-version "v1alpha1": Website is at v1alpha1 already`, `-scope "Cluster": Websites has "Namespaced"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("add of a version with bad flags: the error doesn't say %q:\n%v", want, err)
		}
	}
}

// A version's spec is a copy of the hub's, as the user has it now, its
// comments, tags and nested types kept, and its conversions copy every
// field, an embedded one by its type's name.
func TestAddVersionCopiesTheHubsSpec(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"new", "-dir", dir, "-module", "example.com/website", "-group", "web.example.com", "-kind", "Website"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	kind := filepath.Join(dir, "app", "website.go")
	src, err := os.ReadFile(kind)
	if err != nil {
		t.Fatal(err)
	}
	grown := strings.Replace(string(src), "	Message string `json:\"message\"`\n", "	Message string `json:\"message\"`\n"+
		"	// Hosts are the names it answers to.\n	Hosts []string `json:\"hosts,omitempty\"`\n	Content `json:\"content\"`\n", 1)
	grown += "\n// Content is where its files come from.\ntype Content struct {\n	ConfigMap string `json:\"configMap\"`\n}\n"
	if err := os.WriteFile(kind, []byte(grown), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"add", "-dir", dir, "-kind", "Website", "-version", "v1beta1"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "app", "website_v1beta1.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"type WebsiteSpecV1beta1 struct {\n\t// Message is what the Website's ConfigMap holds.\n\tMessage string `json:\"message\"`\n" +
			"\t// Hosts are the names it answers to.\n\tHosts   []string `json:\"hosts,omitempty\"`\n\tContent `json:\"content\"`\n}",
		"Spec: WebsiteSpec{\n\t\t\tMessage: in.Spec.Message,\n\t\t\tHosts:   in.Spec.Hosts,\n\t\t\tContent: in.Spec.Content,\n\t\t},",
		"Spec: WebsiteSpecV1beta1{\n\t\t\tMessage: in.Spec.Message,\n\t\t\tHosts:   in.Spec.Hosts,\n\t\t\tContent: in.Spec.Content,\n\t\t},",
		`Storage: "v1alpha1",`,
		`Service: &kube.ServiceReference{Namespace: "website-system", Name: "website-webhook", Path: "/convert"}`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("app/website_v1beta1.go has no\n%s\nin:\n%s", want, got)
		}
	}
	if !strings.Contains(out.String(), "app.WebsiteVersions.CRD() in place of app.Websites.CRD()") {
		t.Errorf("add printed no step for the golden test:\n%s", out.String())
	}
}

// A go.mod that is there is kept, and names the module; a -module that
// disagrees with it is refused.
func TestNewKeepsAGoMod(t *testing.T) {
	dir := t.TempDir()
	gomod := "module example.com/mine\n\ngo 1.26.0\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"new", "-dir", dir, "-module", "example.com/other", "-group", "web.example.com", "-kind", "Website"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `-module "example.com/other": the folder's go.mod is module example.com/mine`) {
		t.Errorf("new with another -module than go.mod's: %v", err)
	}
	if err := run([]string{"new", "-dir", dir, "-group", "web.example.com", "-kind", "Website"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "go.mod")); string(got) != gomod {
		t.Errorf("go.mod is now:\n%s", got)
	}
	if main, _ := os.ReadFile(filepath.Join(dir, "main.go")); !bytes.Contains(main, []byte(`"example.com/mine/app"`)) {
		t.Errorf("main.go doesn't import the go.mod's module's app:\n%s", main)
	}
}

// TestScaffoldedModule scaffolds a module as a user would, into a folder
// outside the repository, with replace directives to this checkout's two
// modules (as docs/your-own-controller.md's module is tested, in
// kube/internal/doccheck), and runs go vet and go test there: the module's
// tests pass as written. The Namespaced one also has a Cluster-scoped kind
// and a second version added, by add, which changes none of new's files.
// Under -short the module's tests run with -short too, so its whole-App
// test skips; otherwise it runs against the control plane
// HUMUS_CONTROLPLANE names (or builds one).
func TestScaffoldedModule(t *testing.T) {
	root := checkoutRoot(t)
	for _, scope := range []string{"Namespaced", "Cluster"} {
		t.Run(scope, func(t *testing.T) {
			dir := t.TempDir()
			var out bytes.Buffer
			if err := run([]string{"new", "-dir", dir, "-module", "example.com/website", "-group", "web.example.com",
				"-kind", "Website", "-scope", scope}, &out, &out); err != nil {
				t.Fatal(err)
			}
			pointAt(t, dir, root)
			if scope == "Namespaced" {
				addKindAndVersion(t, dir)
			}

			goCmd(t, dir, 5*time.Minute, "mod", "tidy")
			goCmd(t, dir, 10*time.Minute, "vet", "./...")
			if unformatted := goCmd(t, dir, time.Minute, "fmt", "./..."); unformatted != "" {
				t.Errorf("the scaffolded files aren't gofmt'ed: go fmt changed\n%s", unformatted)
			}
			args := []string{"test", "-count=1", "-v", "-timeout", "30m", "./..."}
			if testing.Short() {
				args = append(args, "-short")
			}
			got := goCmd(t, dir, 30*time.Minute, args...)
			want := []string{"--- PASS: TestWebsiteCRD", "--- PASS: TestRBAC", "--- PASS: TestWebsiteReconcileAppliesAConfigMapItControls",
				"--- PASS: TestWebsiteReconcileReportsAFailedApply", "ok  \texample.com/website/app"}
			if scope == "Namespaced" {
				want = append(want, "--- PASS: TestBlogCRD", "--- PASS: TestBlogReconcileAppliesAConfigMapItControls",
					"--- PASS: TestWebsiteV1beta1RoundTrip", "--- PASS: TestWebsiteVersionsCRD")
			}
			if testing.Short() {
				want = append(want, "--- SKIP: TestApp")
			} else {
				want = append(want, "--- PASS: TestApp")
			}
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("go test's output has no %q:\n%s", w, got)
				}
			}
		})
	}
}

// addKindAndVersion adds a Cluster-scoped kind, Blog, and a version of
// Website, v1beta1, to the module in dir, and checks that add wrote their
// files, changed none that were there, and printed how to wire them in.
func addKindAndVersion(t *testing.T, dir string) {
	t.Helper()
	var out bytes.Buffer
	before := tree(t, dir)
	for _, args := range [][]string{
		{"add", "-dir", dir, "-kind", "Blog", "-scope", "Cluster"},
		{"add", "-dir", dir, "-kind", "Website", "-version", "v1beta1"},
	} {
		out.Reset()
		if err := run(args, &out, &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out.String(), "The files you wrote are left as they were.") {
			t.Errorf("%v printed no steps to wire it in:\n%s", args, out.String())
		}
	}
	after := tree(t, dir)
	for name, h := range before {
		if after[name] != h {
			t.Errorf("add changed %s", name)
		}
	}
	for _, name := range []string{"app/blog.go", "app/blog_reconciler_test.go", "app/website_v1beta1.go", "app/website_v1beta1_test.go", "deploy/crds/blogs.web.example.com.yaml"} {
		if _, ok := after[name]; !ok {
			t.Errorf("add wrote no %s", name)
		}
	}
	// Blog is the module's now: add of it again asks which version.
	if err := run([]string{"add", "-dir", dir, "-kind", "Blog"}, &out, &out); err == nil ||
		!strings.Contains(err.Error(), `-version "": required: Blog exists, at v1alpha1`) {
		t.Errorf("add of a kind a second time: %v, want a refusal asking for a version", err)
	}
}

// checkoutRoot is the root of this checkout: the folder of the core's
// go.mod, three above this package's.
func checkoutRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !bytes.HasPrefix(b, []byte("module github.com/z5labs/humus\n")) {
		t.Fatalf("%s isn't humus's checkout: its go.mod: %v", root, err)
	}
	return root
}

// pointAt points dir's go.mod at the checkout in root, with replace
// directives to its two modules, and seeds its go.sum from theirs, so the
// go command needs no checksum it doesn't already have.
func pointAt(t *testing.T, dir, root string) {
	t.Helper()
	goCmd(t, dir, time.Minute, "mod", "edit",
		"-replace", "github.com/z5labs/humus="+root,
		"-replace", "github.com/z5labs/humus/kube="+filepath.Join(root, "kube"))
	outsidetest.Sums(t, dir, root)
}

// goCmd runs the go command in dir, the scaffolded module, as a user's
// module runs it.
func goCmd(t *testing.T, dir string, timeout time.Duration, args ...string) string {
	t.Helper()
	return outsidetest.Go(t, "the scaffolded module", dir, timeout, args...)
}

// tree is a digest of each file under dir, by its path from dir.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = sum(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sum(b []byte) string { h := sha256.Sum256(b); return string(h[:]) }
