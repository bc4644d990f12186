package clustertest

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/procutil"
)

func TestWriteSource(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(filepath.Join(src, "stale"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeSource(src); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(src, path)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"etcd/main.go", "go.mod", "go.sum", "kube-apiserver/main.go", "kube-controller-manager/main.go"}
	if !slices.Equal(got, want) {
		t.Errorf("the source folder holds %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(src, "stale")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("what the folder held before is still there (%v)", err)
	}
	goMod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(goMod), "\tk8s.io/kubernetes "+kubernetesVersion+"\n") {
		t.Errorf("go.mod doesn't require k8s.io/kubernetes %s, the version ldflags stamps:\n%s", kubernetesVersion, goMod)
	}
	for _, p := range programs {
		main, err := os.ReadFile(filepath.Join(src, p, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(main), "package main\n") {
			t.Errorf("%s/main.go isn't a main package:\n%s", p, main)
		}
	}
}

func TestSourceStamp(t *testing.T) {
	first, err := sourceStamp()
	if err != nil {
		t.Fatal(err)
	}
	second, err := sourceStamp()
	if err != nil {
		t.Fatal(err)
	}
	if first != second || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(first) {
		t.Errorf("stamps %q and %q, want one SHA-256 in hex twice", first, second)
	}
}

func TestBuildDir(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // os.UserCacheDir's, on Linux
	t.Setenv("HOME", cache)           // and macOS's

	t.Setenv(EnvDir, "")
	got, err := BuildDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join("humus", "controlplane-"+kubernetesVersion); !strings.HasPrefix(got, cache) || !strings.HasSuffix(got, want) {
		t.Errorf("BuildDir() = %q with %s unset, want %s under the cache folder %s", got, EnvDir, want, cache)
	}

	t.Setenv(EnvDir, "elsewhere/controlplane")
	got, err = BuildDir()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "elsewhere", "controlplane"); got != want {
		t.Errorf("BuildDir() = %q with %s=elsewhere/controlplane, want %q", got, EnvDir, want)
	}
}

// TestBuildWaitsForTheOtherProcess holds the build's lock, as another
// process building would, and completes the build folder while a build
// waits: the build then runs no go command, and says the other process
// built the control plane.
func TestBuildWaitsForTheOtherProcess(t *testing.T) {
	needsUnix(t)
	bin := filepath.Join(t.TempDir(), "controlplane")
	unlock, err := lock(t.Context(), bin+".lock", io.Discard, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "") // no go command to run
	var out procutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := provide(t.Context(), bin, &out, supply{mode: BuildOnly, modeFrom: "Fetch(\"off\")"})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the build is waiting for the lock
	for _, p := range programs {
		if err := os.WriteFile(filepath.Join(bin, p), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stamp, err := sourceStamp()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "stamp"), []byte(stamp+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiting build: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting build didn't return once the lock was released")
	}
	want := "clustertest: another process is fetching or building the control plane (it holds " + bin + ".lock); waiting for it\n" +
		"clustertest: the other process fetched or built the control plane\n"
	if got := out.String(); got != want {
		t.Errorf("the waiting build wrote %q, want %q", got, want)
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
	needsUnix(t)
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := lock(t.Context(), path, io.Discard, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var told procutil.SyncBuffer
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
	if !strings.HasPrefix(got, "clustertest: another process is fetching or building the control plane") {
		t.Errorf("the waiting lock wrote %q, want it to say it waits for another process", got)
	}
	if !strings.Contains(got, "still waiting") {
		t.Errorf("the lock waiting 500ms with an interval of 100ms wrote %q, want a line saying it still waits", got)
	}
}

func TestLockEndsWithContext(t *testing.T) {
	needsUnix(t)
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
	needsUnix(t)
	var out procutil.SyncBuffer
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
	needsUnix(t)
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
	needsUnix(t)
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
	var out procutil.SyncBuffer
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

// needsUnix skips t off Unix, where there is no flock, process group or
// /bin/sh.
func needsUnix(t *testing.T) {
	t.Helper()
	if !procutil.Supported {
		t.Skip("clustertest: the test needs Unix's flock, process groups and /bin/sh")
	}
}
