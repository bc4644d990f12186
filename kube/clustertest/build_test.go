package clustertest

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestSourceStamp(t *testing.T) {
	src := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		path := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stamp := func() string {
		t.Helper()
		s, err := sourceStamp(src)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	write("go.mod", "module m\n")
	write("go.sum", "")
	write("etcd/main.go", "package main\n")
	first := stamp()

	write("README.md", "not source")
	if stamp() != first {
		t.Errorf("a README changed the stamp")
	}
	for _, change := range []struct{ name, data string }{
		{"etcd/main.go", "package main // changed\n"},
		{"kube-apiserver/main.go", "package main\n"},
		{"go.sum", "k8s.io/api v0.37.2 h1:x\n"},
		{"go.mod", "module m\n\ngo 1.26\n"},
	} {
		before := stamp()
		write(change.name, change.data)
		if stamp() == before {
			t.Errorf("writing %s left the stamp unchanged", change.name)
		}
	}
}

func TestUpToDate(t *testing.T) {
	bin := t.TempDir()
	if upToDate(bin, "abc") {
		t.Errorf("an empty folder is up to date")
	}
	for _, p := range programs {
		if err := os.WriteFile(filepath.Join(bin, p), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "stamp"), []byte("abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !upToDate(bin, "abc") {
		t.Errorf("every program and a matching stamp isn't up to date")
	}
	if upToDate(bin, "def") {
		t.Errorf("a stamp of other source is up to date")
	}
	if err := os.Remove(filepath.Join(bin, "kube-apiserver")); err != nil {
		t.Fatal(err)
	}
	if upToDate(bin, "abc") {
		t.Errorf("a folder missing kube-apiserver is up to date")
	}
}

// TestLockExcludes uses real time: a goroutine waiting for a flock sleeps
// between tries, in real time, and testing/synctest doesn't fake flock.
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := lock(t.Context(), path, io.Discard, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var told SyncBuffer
	acquired := make(chan func())
	go func() {
		second, err := lock(context.Background(), path, &told, 100*time.Millisecond)
		if err != nil {
			t.Error(err)
			second = func() {}
		}
		acquired <- second
	}()
	select {
	case second := <-acquired:
		second()
		t.Fatal("a second lock was taken while the first was held")
	case <-time.After(500 * time.Millisecond):
	}
	unlock()
	select {
	case second := <-acquired:
		second()
	case <-time.After(5 * time.Second):
		t.Fatal("the second lock wasn't taken after the first was released")
	}
	got := told.String()
	if !strings.HasPrefix(got, "clustertest: another process is building the control plane") {
		t.Errorf("the waiting lock wrote %q, want it to say it waits for another process", got)
	}
	if !strings.Contains(got, "still waiting") {
		t.Errorf("the lock waiting 500ms with an interval of 100ms wrote %q, want a line saying it still waits", got)
	}
}

func TestLockEndsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := lock(t.Context(), path, io.Discard, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if second, err := lock(ctx, path, io.Discard, time.Hour); err == nil {
		second()
		t.Fatal("a second lock was taken while the first was held")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's deadline", err)
	}
}

// fakeGo writes a shell script that answers go list -deps with three
// packages, and go build -v by naming them on stderr, one every 150ms,
// with a header and an error when FAKE_GO_FAIL is set.
func fakeGo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "go")
	script := `#!/bin/sh
case "$1" in
list)
	echo "go: downloading example.com/a v1.0.0" >&2
	printf 'fmt\nexample.com/a\nexample.com/m/prog\n'
	;;
build)
	for p in fmt example.com/a; do echo "$p" >&2; sleep 0.15; done
	if [ -n "$FAKE_GO_FAIL" ]; then
		echo "# example.com/m/prog" >&2
		echo "./main.go:3:2: undefined: nope" >&2
		exit 1
	fi
	echo example.com/m/prog >&2
	sleep 0.15
	;;
esac
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGoBuildProgress(t *testing.T) {
	var out SyncBuffer
	g := goBuild{goTool: fakeGo(t), dir: t.TempDir(), env: os.Environ(), every: 100 * time.Millisecond, w: &out}
	if err := g.program(t.Context(), "prog", t.TempDir(), "1 of 1"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"clustertest: prog (1 of 1): listing its packages",
		"clustertest: prog (1 of 1): compiling; it depends on 3 packages\n",
		"of its 3 packages compiled",
		"clustertest: prog (1 of 1): built in ",
		", 3 packages compiled\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the build wrote:\n%s\nwant a line with %q", got, want)
		}
	}
}

func TestGoBuildFails(t *testing.T) {
	g := goBuild{
		goTool: fakeGo(t), dir: t.TempDir(), env: append(os.Environ(), "FAKE_GO_FAIL=1"),
		every: time.Hour, w: io.Discard,
	}
	err := g.program(t.Context(), "prog", t.TempDir(), "1 of 1")
	if err == nil || !strings.Contains(err.Error(), "undefined: nope") || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("err = %v, want the exit status and the compiler's error", err)
	}
}

// TestGoBuildRealGo builds a module of two packages with the real go
// command, in a fresh folder, so both are compiled, not found in the
// build cache.
func TestGoBuildRealGo(t *testing.T) {
	src := t.TempDir()
	for name, data := range map[string]string{
		"go.mod":       "module example.com/m\n\ngo 1.26\n",
		"lib/lib.go":   "package lib\n\nfunc Answer() int { return 42 }\n",
		"prog/main.go": "package main\n\nimport \"example.com/m/lib\"\n\nfunc main() { _ = lib.Answer() }\n",
	} {
		path := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out SyncBuffer
	bin := t.TempDir()
	g := goBuild{goTool: "go", dir: src, env: append(os.Environ(), "GOWORK=off", "GOFLAGS="), every: time.Hour, w: &out}
	if err := g.program(t.Context(), "prog", bin, "1 of 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bin, "prog")); err != nil {
		t.Errorf("the binary: %v", err)
	}
	// prog and lib at least; the standard library's packages it needs
	// are usually in the build cache.
	if got := out.String(); !regexp.MustCompile(`built in \S+, [2-9]\d* packages compiled`).MatchString(got) {
		t.Errorf("the build wrote:\n%s\nwant it to count at least prog and lib as compiled", got)
	}
}

func TestLineWriter(t *testing.T) {
	var lines []string
	lw := &lineWriter{fn: func(l string) { lines = append(lines, l) }}
	for _, p := range []string{"a\nb", "c\n", "\nd\ne", "\n"} {
		_, _ = lw.Write([]byte(p))
	}
	if got, want := strings.Join(lines, "|"), "a|bc||d|e"; got != want {
		t.Errorf("lines = %q, want %q", got, want)
	}
}
