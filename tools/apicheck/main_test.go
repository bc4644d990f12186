package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repo is a git repository of two modules, as this one is: example.com/lib
// at the root, tagged vX.Y.Z, and example.com/lib/sub in sub, tagged
// sub/vX.Y.Z, both used by go.work.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q")
	r.write("go.work", "go 1.26.0\n\nuse (\n\t.\n\t./sub\n)\n")
	r.write("go.mod", "module example.com/lib\n\ngo 1.26.0\n")
	r.write("lib.go", `package lib

type Client struct{ Addr string }

func (c *Client) Get(key string) (string, error) { return "", nil }

func Hello(name string) string { return name }
`)
	r.write("internal/x/x.go", "package x\n\nfunc X() {}\n")
	r.write("sub/go.mod", "module example.com/lib/sub\n\ngo 1.26.0\n")
	r.write("sub/sub.go", `package sub

type T[K comparable] struct{ Key K }

func (t T[K]) Keys() []K { return nil }

func New(n int) *T[string] { return nil }
`)
	r.write("sub/extra/extra.go", "package extra\n\nfunc E() {}\n")
	r.write("sub/cmd/tool/main.go", "package main\n\nfunc main() {}\n")
	r.write("CHANGELOG.md", "# Changelog\n\n## Unreleased\n")
	return r
}

func (r *repo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit commits everything and returns the commit's hash.
func (r *repo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// changelog writes CHANGELOG.md with unreleased as its Unreleased section
// and one release of both modules at commit.
func (r *repo) changelog(unreleased, commit string) {
	r.write("CHANGELOG.md", "# Changelog\n\nWhat changed.\n\n## Unreleased\n\n"+unreleased+
		"\n## v0.1.0, sub/v0.1.0 (2026-12-06)\n\nCut from commit "+commit+".\n\n### Added\n\n- Everything.\n")
}

func (r *repo) check() (string, error) {
	r.t.Helper()
	var out bytes.Buffer
	err := check(context.Background(), r.dir, &out)
	r.t.Logf("apicheck:\n%s(err: %v)", out.String(), err)
	return out.String(), err
}

func mustContain(t *testing.T, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("missing %q in:\n%s", w, s)
		}
	}
}

// The check's whole path, on a repository of its own: an addition passes
// with no entry, a changed signature fails until Unreleased names it under
// Changed (Added is not enough); internal packages and commands are
// outside it.
func TestCheck(t *testing.T) {
	r := newRepo(t)
	rel := r.commit("the first release")
	r.changelog("", rel)
	r.commit("CHANGELOG.md: v0.1.0, sub/v0.1.0")

	out, err := r.check()
	if err != nil {
		t.Fatalf("unchanged since the release: %v", err)
	}
	mustContain(t, out, "example.com/lib: against v0.1.0 (commit "+rel[:12]+")",
		"example.com/lib/sub: against sub/v0.1.0 (commit "+rel[:12]+")")

	// Compatible additions, a changed internal package and a changed
	// command: no entry needed.
	r.write("lib.go", strings.Replace(mustRead(t, r.dir, "lib.go"), "type Client struct{ Addr string }",
		"type Client struct {\n\tAddr    string\n\tTimeout int\n}\n\nfunc Added() {}", 1))
	r.write("sub/more/more.go", "package more\n\nfunc M() {}\n")
	r.write("internal/x/x.go", "package x\n\nfunc X(int) {}\n")
	r.write("sub/cmd/tool/main.go", "package main\n\nfunc main() {}\n\nfunc Exported(int) {}\n")
	out, err = r.check()
	if err != nil {
		t.Fatalf("compatible additions: %v", err)
	}
	mustContain(t, out, "compatible    example.com/lib: Added: added",
		"compatible    example.com/lib: Client.Timeout: added",
		"compatible    example.com/lib/sub/more: package added")
	if strings.Contains(out, "internal") || strings.Contains(out, "cmd/tool") {
		t.Errorf("an internal package or a command was compared:\n%s", out)
	}

	// A changed exported signature.
	r.write("sub/sub.go", strings.Replace(mustRead(t, r.dir, "sub/sub.go"), "func New(n int) *T[string]", "func New(n int, name string) *T[string]", 1))
	out, err = r.check()
	if err == nil {
		t.Fatal("a changed signature the changelog doesn't name passed")
	}
	mustContain(t, out, "INCOMPATIBLE  example.com/lib/sub: New: changed from func(int) *T[string] to func(int, string) *T[string]: CHANGELOG.md doesn't name it; name `sub.New`")
	mustContain(t, err.Error(), "1 incompatible change(s) since the last release that CHANGELOG.md doesn't name")

	r.changelog("### Added\n\n- `sub.New` takes a name.\n", rel)
	if _, err := r.check(); err == nil {
		t.Fatal("a changed signature named under Added passed")
	}

	r.changelog("### Changed\n\n- `sub.New(n, name)` takes the name of\n  what it makes.\n", rel)
	out, err = r.check()
	if err != nil {
		t.Fatalf("a changed signature named under Changed: %v", err)
	}
	mustContain(t, out, "incompatible  example.com/lib/sub: New: changed from func(int) *T[string] to func(int, string) *T[string] (named in CHANGELOG.md)")

}

// Removed members and packages fail until Removed names them: a type
// names its members, a package is named by its path.
func TestCheckRemovals(t *testing.T) {
	r := newRepo(t)
	rel := r.commit("the first release")
	r.changelog("", rel)
	r.commit("CHANGELOG.md: v0.1.0, sub/v0.1.0")

	// A removed method, a removed field, a changed method of a generic
	// type and a removed package.
	r.write("lib.go", "package lib\n\ntype Client struct{}\n\nfunc Hello(name string) string { return name }\n")
	r.write("sub/sub.go", strings.Replace(mustRead(t, r.dir, "sub/sub.go"), "Keys() []K", "Keys() map[K]bool", 1))
	if err := os.RemoveAll(filepath.Join(r.dir, "sub", "extra")); err != nil {
		t.Fatal(err)
	}
	out, err := r.check()
	if err == nil {
		t.Fatal("removals the changelog doesn't name passed")
	}
	mustContain(t, out,
		"INCOMPATIBLE  example.com/lib: Client.Addr: removed: CHANGELOG.md doesn't name it; name `lib.Client.Addr`",
		"INCOMPATIBLE  example.com/lib: (*Client).Get: removed: CHANGELOG.md doesn't name it; name `lib.Client.Get`",
		"INCOMPATIBLE  example.com/lib/sub: T[K].Keys: changed from func() []K to func() map[K]bool: CHANGELOG.md doesn't name it; name `sub.T.Keys`",
		"INCOMPATIBLE  example.com/lib/sub: T[string].Keys: changed from func() []string to func() map[string]bool: CHANGELOG.md doesn't name it; name `sub.T.Keys`",
		"INCOMPATIBLE  example.com/lib/sub/extra: package removed: CHANGELOG.md doesn't name it; name `sub/extra`")
	mustContain(t, err.Error(), "5 incompatible change(s)")

	r.changelog("### Changed\n\n- `(*sub.T[K]).Keys` returns a set.\n\n"+
		"### Removed\n\n- `lib.Client`'s address and Get.\n- The package `sub/extra`.\n", rel)
	if _, err := r.check(); err != nil {
		t.Fatalf("every change named: %v", err)
	}
}

// A release of one module compares that module with its own commit, and
// the entries of a newer release that didn't tag the other module still
// name the other module's changes since its release.
func TestCheckModulesReleasedApart(t *testing.T) {
	r := newRepo(t)
	first := r.commit("the first release")
	r.write("lib.go", strings.Replace(mustRead(t, r.dir, "lib.go"), "func Hello(name string) string", "func Hello(name, greeting string) string", 1))
	r.write("sub/sub.go", strings.Replace(mustRead(t, r.dir, "sub/sub.go"), "func New(n int) *T[string]", "func New(n int64) *T[string]", 1))
	second := r.commit("the second release, of sub only")
	r.write("CHANGELOG.md", "# Changelog\n\n## Unreleased\n\n"+
		"## sub/v0.2.0 (2026-12-07)\n\nCommit "+second+".\n\n### Changed\n\n- `sub.New` takes an int64.\n- `lib.Hello` takes a greeting.\n\n"+
		"## v0.1.0, sub/v0.1.0 (2026-12-06)\n\nCommit "+first+".\n")
	out, err := r.check()
	if err != nil {
		t.Fatalf("changes named since each module's release: %v", err)
	}
	mustContain(t, out, "example.com/lib: against v0.1.0 (commit "+first[:12]+")",
		"example.com/lib/sub: against sub/v0.2.0 (commit "+second[:12]+")",
		"incompatible  example.com/lib: Hello: changed from func(string) string to func(string, string) string (named in CHANGELOG.md)")
	if strings.Contains(out, "New:") {
		t.Errorf("sub's change before its own release was compared:\n%s", out)
	}
}

// The changelog's commit is the release even without a tag; a tag that is
// there must agree with it, and a commit the clone lacks is an error that
// says what to do.
func TestCheckReleaseCommit(t *testing.T) {
	r := newRepo(t)
	rel := r.commit("the first release")
	r.changelog("", rel)
	later := r.commit("CHANGELOG.md: v0.1.0, sub/v0.1.0")

	r.git("tag", "sub/v0.1.0", rel)
	r.git("tag", "v0.1.0", later)
	_, err := r.check()
	if err == nil || !strings.Contains(err.Error(), "tag v0.1.0 points at commit "+later+", CHANGELOG.md records "+rel) {
		t.Fatalf("a tag at another commit: got %v", err)
	}
	r.git("tag", "-f", "v0.1.0", rel)
	if _, err := r.check(); err != nil {
		t.Fatalf("tags at the recorded commit: %v", err)
	}

	missing := strings.Repeat("0", 39) + "1"
	r.changelog("", missing)
	_, err = r.check()
	if err == nil || !strings.Contains(err.Error(), "commit "+missing+", v0.1.0's in CHANGELOG.md, is not in this clone's history (a shallow clone lacks it: git fetch --unshallow)") {
		t.Fatalf("a commit the clone lacks: got %v", err)
	}
}

func TestParseChangelogErrors(t *testing.T) {
	_, err := parseChangelog("CHANGELOG.md", strings.NewReader("# Changelog\n\n## Unreleased\n\n## v0.2.0\n\nNo commit.\n\n## The first one\n\nCommit "+strings.Repeat("a", 40)+".\n"))
	want := "CHANGELOG.md:5: release \"v0.2.0\" records no commit: its section names the full 40-character hash of the commit it was cut from (the release commit itself can't: the commit after it records it)\n" +
		"CHANGELOG.md:9: release \"The first one\" names no tag (v1.2.3 for the root module, dir/v1.2.3 for the module in dir)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want\n%s", err, want)
	}
}

func TestQualifiedName(t *testing.T) {
	for span, want := range map[string]string{
		"kube.Client":                     "kube.Client",
		"(*kube.Client).Get":              "kube.Client.Get",
		"*kube.Client":                    "kube.Client",
		"kube.NewController(s, c, ...)":   "kube.NewController",
		"kube.Resource[Spec, Status]":     "kube.Resource",
		"kube/kubeenv.Connection":         "kube/kubeenv.Connection",
		"kube/kubeenv":                    "kube/kubeenv",
		" kube.Settings.Workers ":         "kube.Settings.Workers",
		"kube.Client.Get(ctx, key) error": "kube.Client.Get",
	} {
		if got := qualifiedName(span); got != want {
			t.Errorf("qualifiedName(%q) = %q, want %q", span, got, want)
		}
	}
}

func TestChangeNames(t *testing.T) {
	for _, c := range []struct {
		pkg, rel, message string
		want              []string
	}{
		{"humus", "", "Setup: removed", []string{"humus.Setup"}},
		{"kube", "kube", "(*Client).Get: changed from func() to func(int)", []string{"kube.Client", "kube.Client.Get"}},
		{"kubeenv", "kube/kubeenv", "Connection.Host: removed", []string{
			"kube/kubeenv.Connection", "kubeenv.Connection", "kube/kubeenv.Connection.Host", "kubeenv.Connection.Host"}},
		{"kube", "kube", "Resource[Spec, Status].CRD: changed from func() to func(int)", []string{"kube.Resource", "kube.Resource.CRD"}},
		{"kube", "kube", "Reconciler, method set of *Reconciler: removed method Reconcile", []string{"kube.Reconciler"}},
		{"kube", "kube", "github.com/x/y.T.F: removed", []string{"y.T", "y.T.F"}},
	} {
		if got := changeNames(c.pkg, c.rel, c.message); !slices.Equal(got, c.want) {
			t.Errorf("changeNames(%q, %q, %q) = %q, want %q", c.pkg, c.rel, c.message, got, c.want)
		}
	}
}

func mustRead(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
