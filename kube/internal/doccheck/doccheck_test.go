package doccheck_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/z5labs/humus/kube/internal/doccheck"
)

// The repository's root and the kube module's, from this package.
const (
	root   = "../../.."
	module = "../.."
)

// genDir is where the packages of blocks compiled on their own are, from
// the module's root. They exist only in the overlay: nothing is written
// into the module.
const genDir = "internal/doccheck/snippets"

// markdown is every Markdown file whose Go blocks are compiled.
func markdown(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "kube/example/README.md"}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	return files
}

// compile generates and builds blocks, and returns the compiler's output
// and error.
func compile(t *testing.T, blocks []doccheck.Block) (string, error) {
	t.Helper()
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	absModule, err := filepath.Abs(module)
	if err != nil {
		t.Fatal(err)
	}
	var srcs []doccheck.Source
	for i, b := range blocks {
		src, err := doccheck.Generate(absRoot, absModule, b, genDir, i)
		if err != nil {
			t.Error(err)
			continue
		}
		srcs = append(srcs, src)
	}
	if t.Failed() {
		t.FailNow()
	}
	return doccheck.Build(absModule, t.TempDir(), srcs)
}

// TestDocs compiles every Go block of the docs, the root README and the
// examples' README.
func TestDocs(t *testing.T) {
	var blocks []doccheck.Block
	for _, f := range markdown(t) {
		bs, err := doccheck.Blocks(root, f)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d Go blocks", f, len(bs))
		for _, b := range bs {
			if b.ModuleFile == "" { // the docs' own module's files are built by TestClusterDocsModule
				blocks = append(blocks, b)
			}
		}
	}
	if len(blocks) == 0 {
		t.Fatal("no Go block in the Markdown files")
	}
	if out, err := compile(t, blocks); err != nil {
		t.Fatalf("the docs' Go blocks don't compile: %v\n%s", err, out)
	}
}

// TestDocsCatchMistakes checks that a block naming an API that doesn't
// exist, or claiming a signature that isn't, fails to compile, at its
// Markdown line.
func TestDocsCatchMistakes(t *testing.T) {
	for _, tc := range []struct {
		name, code, in, want string
	}{
		{name: "a missing function", code: "kube.NoSuchThing()\n", want: "undefined: kube.NoSuchThing"},
		{name: "a declaration", code: "var s = kube.Settings{Workerz: 1}\n", want: "unknown field Workerz"},
		{name: "a wrong signature", in: "kube/example/memcached/app", code: "func (r Reconciler) Reconcile(ctx context.Context, m int) error\n", want: "cannot use"},
		{name: "a var of the package", in: "kube/example/memcached/app", code: "var Memcached = kube.Kind[int]{}\n", want: "cannot use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := doccheck.Block{File: "docs/example.md", Line: 10, Code: tc.code, In: tc.in}
			out, err := compile(t, []doccheck.Block{b})
			if err == nil {
				t.Fatalf("%q compiled", tc.code)
			}
			if !strings.Contains(out, "docs/example.md:10") || !strings.Contains(out, tc.want) {
				t.Errorf("the compiler said\n%s\nwant %q at docs/example.md:10", out, tc.want)
			}
		})
	}
}

// TestDocsNames checks the names in the code spans of the same Markdown
// files' prose, such as `kube.NewController` or `Settings.Workers`: each
// must be an exported name of the package, or a field or method of the
// type, that it names.
func TestDocsNames(t *testing.T) {
	apis := map[string]*doccheck.API{}
	for name, dir := range map[string]string{
		"humus":       ".",
		"health":      "health",
		"config":      "config",
		"humustest":   "humustest",
		"kube":        "kube",
		"admission":   "kube/admission",
		"policytest":  "kube/admission/policytest",
		"kubeenv":     "kube/kubeenv",
		"clustertest": "kube/clustertest",
		"telemetry":   "telemetry",
		"webhook":     "webhook",
	} {
		api, err := doccheck.ReadAPI(filepath.Join(root, filepath.FromSlash(dir)))
		if err != nil {
			t.Fatal(err)
		}
		apis[name] = api
	}
	checked := 0
	for _, f := range markdown(t) {
		refs, err := doccheck.Refs(root, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			if err := r.Check(apis); err != nil {
				t.Error(err)
			}
			checked++
		}
	}
	t.Logf("%d names checked", checked)
	if checked == 0 {
		t.Fatal("no name in the Markdown files' code spans")
	}
}

// TestDocsNamesCatchMistakes checks that a name that isn't there fails
// TestDocsNames' check, and that one that is passes.
func TestDocsNamesCatchMistakes(t *testing.T) {
	api, err := doccheck.ReadAPI(filepath.Join(root, "kube"))
	if err != nil {
		t.Fatal(err)
	}
	apis := map[string]*doccheck.API{"kube": api}
	md := "# x\n\n" +
		"`kube.NoSuchThing` and `kube.Settings.Workerz` and `Settings.Workerz`.\n" +
		"```go\nkube.NotInProse()\n```\n" +
		"`kube.NewController`, `kube.Settings.Workers`, `Settings.Workers`, `Resource.CRD()`,\n" +
		"`KindReconciler.Reconcile`, `Object.Name`, `kube.Field(&spec.Size).Minimum(1)`, `ObjectMeta.Whatever`.\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	refs, err := doccheck.Refs(dir, "x.md")
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, r := range refs {
		if err := r.Check(apis); err != nil {
			failed = append(failed, r.Span)
		}
	}
	want := []string{"kube.NoSuchThing", "kube.Settings.Workerz", "Settings.Workerz"}
	if !slices.Equal(failed, want) {
		t.Errorf("the names that failed: %q, want %q (of %d)", failed, want, len(refs))
	}
}
