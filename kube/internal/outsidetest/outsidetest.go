// Package outsidetest runs the go command in a module outside this
// repository, as a user's own module runs it, pointed at this checkout:
// for the tests that build and test a module the docs or a command write
// (the docs' Website, a scaffolded controller). It promises that such a
// module needs nothing from the network the repository's own modules
// don't: its go.sum is seeded from theirs. It imports nothing of kube.
package outsidetest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Sums writes into dir, a module's folder, a go.sum of every line of root's
// go.sum and kube/go.sum, root being this repository's checkout: what a
// module requiring both, through replace directives, checks.
func Sums(t testing.TB, dir, root string) {
	t.Helper()
	var sums []byte
	for _, f := range []string{"go.sum", "kube/go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	lines := slices.Compact(slices.Sorted(slices.Values(strings.Split(string(sums), "\n"))))
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), []byte(strings.TrimSpace(strings.Join(lines, "\n"))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Go runs the go command in dir as a user's module runs it, within
// timeout: no workspace, modules downloaded as needed. The environment is
// otherwise the test's, so HUMUS_CONTROLPLANE, which make test sets, names
// the control plane this repository's tests use, and the child builds
// none. A failure fails t, naming what, the module, with the command's
// output.
func Go(t testing.TB, what, dir string, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), what, err, out.String())
	}
	return out.String()
}
