package doccheck_test

import (
	"path/filepath"
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
		blocks = append(blocks, bs...)
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
