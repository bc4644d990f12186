package doccheck_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/doccheck"
	"github.com/z5labs/humus/kube/internal/outsidetest"
)

// docsModule is the module path of the controller the docs write in a
// module of its own, as a user would.
const docsModule = "example.com/website"

// TestClusterDocsModule builds the controller that the docs write file by
// file (the blocks with a file directive) as a module of its own, in a
// folder outside the repository, with replace directives to this
// repository's two modules, the way a user tries the library before a
// release; then runs its tests, whole-App test included, against the
// control plane its own TestMain starts, with the go command as a user
// runs it (docs/your-own-controller.md). So the docs' controller, its test and the packages they import
// work from outside this repository, and nothing in them reaches an
// internal package.
func TestClusterDocsModule(t *testing.T) {
	clustertest.SkipShort(t)
	var blocks []doccheck.Block
	for _, f := range markdown(t) {
		bs, err := doccheck.Blocks(root, f)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, bs...)
	}
	files, err := doccheck.Module(blocks)
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	for name := range files {
		if strings.HasSuffix(name, "_test.go") {
			tests = append(tests, name)
		}
	}
	if len(tests) == 0 {
		t.Fatalf("the docs' module has no test among its files: %v", slices.Sorted(maps.Keys(files)))
	}

	dir := writeModule(t, files)
	goCmd(t, dir, 5*time.Minute, "mod", "tidy")
	// As a user does before the first run: the golden tests write the
	// CRD's YAML and the admission configurations'.
	goCmd(t, dir, 10*time.Minute, "test", "./app", "-run", "^(TestWebsiteCRD|TestWebsiteAdmissionYAML)$", "-update")
	out := goCmd(t, dir, 20*time.Minute, "test", "-count=1", "-v", "./...")
	for _, name := range tests {
		if !strings.Contains(out, "ok  \t"+docsModule+"/"+filepath.ToSlash(filepath.Dir(name))) {
			t.Errorf("go test's output has no ok line for %s's package:\n%s", name, out)
		}
	}
	if strings.Contains(out, "--- SKIP") {
		t.Errorf("a test of the docs' module skipped itself:\n%s", out)
	}
}

// writeModule writes the docs' module into a new folder outside the
// repository: its files, a go.mod requiring this repository's two modules
// through replace directives, and a go.sum seeded from theirs, so the go
// command needs no checksum it doesn't already have.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, code := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gomod := "module " + docsModule + "\n\ngo 1.26.0\n\n" +
		"require (\n\tgithub.com/z5labs/humus v0.0.0\n\tgithub.com/z5labs/humus/kube v0.0.0\n)\n\n" +
		"replace (\n\tgithub.com/z5labs/humus => " + absRoot + "\n\tgithub.com/z5labs/humus/kube => " + filepath.Join(absRoot, "kube") + "\n)\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	outsidetest.Sums(t, dir, absRoot)
	return dir
}

// goCmd runs the go command in dir, the docs' module, as a user's module
// runs it.
func goCmd(t *testing.T, dir string, timeout time.Duration, args ...string) string {
	t.Helper()
	return outsidetest.Go(t, "the docs' module", dir, timeout, args...)
}
