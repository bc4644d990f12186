package clustertest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/z5labs/humus/kube/internal/procutil"
)

// TestStartRefusesAFolderOfOthers pins the data loss of -dir . or
// -dir ~/k8s: Start (and so Launch and the cluster command) used to empty
// whatever folder it was given. A folder holding anything without the
// marker of an earlier start is refused, named with what it holds, and
// left as it was.
func TestStartRefusesAFolderOfOthers(t *testing.T) {
	needsUnix(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // nothing is built or started, whatever Start does
	for _, tc := range []struct {
		name  string
		files []string
		holds string
	}{
		{"a user's file", []string{"notes.txt"}, `"notes.txt"`},
		{"many", []string{"a", "b", "c", "d", "e/f"}, `"a", "b", "c" and 2 more`},
		{"a marker of other text", []string{markerFile}, `".clustertest"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				writeFile(t, filepath.Join(dir, f), "a user's work")
			}
			_, err := Start(ctx, dir)
			want := "clustertest: refusing to use the folder " + dir + " for the control plane's files: it holds " + tc.holds +
				", and no .clustertest file of an earlier start says it is the control plane's to empty; name a folder that is missing or empty"
			if err == nil || err.Error() != want {
				t.Errorf("Start = %v, want\n%s", err, want)
			}
			for _, f := range tc.files {
				if data, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(data) != "a user's work" {
					t.Errorf("%s after Start: %q, %v; want it as it was", f, data, err)
				}
			}
		})
	}
}

// TestStartEmptiesItsOwnFolder checks that Start empties a folder an
// earlier start wrote its marker into, creates a missing one, and takes
// an empty one, writing the marker into each. FromAssets of a folder
// without the binaries makes Start fail just after, starting nothing.
func TestStartEmptiesItsOwnFolder(t *testing.T) {
	needsUnix(t)
	lacking := t.TempDir()
	earlier := t.TempDir()
	writeFile(t, filepath.Join(earlier, markerFile), markerText)
	writeFile(t, filepath.Join(earlier, "kubeconfig"), "old")
	writeFile(t, filepath.Join(earlier, "etcd", "member", "snap"), "old")
	for name, dir := range map[string]string{
		"an earlier start's": earlier,
		"missing":            filepath.Join(t.TempDir(), "a", "b"),
		"empty":              t.TempDir(),
	} {
		_, err := Start(t.Context(), dir, FromAssets(lacking))
		if err == nil || !strings.HasPrefix(err.Error(), "clustertest: FromAssets(") {
			t.Errorf("%s folder: Start = %v, want FromAssets' error", name, err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{markerFile}) {
			t.Errorf("%s folder holds %q after Start, want only %s", name, names, markerFile)
		}
		if !marked(dir) {
			t.Errorf("%s folder: its %s doesn't hold the marker's text", name, markerFile)
		}
	}
}

func TestStartFolder(t *testing.T) {
	needsUnix(t)
	t.Chdir(t.TempDir())
	got, err := prepareDir("rel")
	if want, _ := filepath.Abs("rel"); err != nil || got != want {
		t.Errorf("prepareDir(%q) = %q, %v; want %q", "rel", got, err, want)
	}
	if _, err := Start(t.Context(), ""); err == nil || err.Error() != "clustertest: no folder given for the control plane's files" {
		t.Errorf("Start with no folder = %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "")
	if _, err := prepareDir(file); err == nil || !strings.HasPrefix(err.Error(), "clustertest: the folder "+file+": ") {
		t.Errorf("prepareDir of a file = %v, want an error naming it", err)
	}
}

// TestUnixOnly checks what Start says off Unix, where the control plane
// can't run.
func TestUnixOnly(t *testing.T) {
	want := "clustertest: the control plane runs on Unix only, and this is " + runtime.GOOS
	if errUnixOnly.Error() != want {
		t.Errorf("errUnixOnly = %q, want %q", errUnixOnly, want)
	}
	if procutil.Supported {
		return
	}
	if _, err := Start(t.Context(), t.TempDir()); !errors.Is(err, errUnixOnly) {
		t.Errorf("Start off Unix = %v, want %v", err, errUnixOnly)
	}
}

// TestRemoveOrphansLeavesAFolderWhoseComponentsRun is the sweep off Linux,
// where a component outlives the test binary that died without stopping
// it: the binary is gone, but a component's pid is alive, so its folder
// stays, and the sweep says which process holds it. A folder whose
// binary and components are all gone is removed, and one whose binary
// runs is left alone.
func TestRemoveOrphansLeavesAFolderWhoseComponentsRun(t *testing.T) {
	needsUnix(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone, alive := strconv.Itoa(dead.Process.Pid), strconv.Itoa(os.Getpid())

	orphaned := filepath.Join(tmp, tempPrefix+"orphaned")
	writeFile(t, filepath.Join(orphaned, "pid"), gone)
	writeFile(t, filepath.Join(orphaned, "etcd.pid"), gone)
	writeFile(t, filepath.Join(orphaned, "kube-apiserver.pid"), alive)
	writeFile(t, filepath.Join(orphaned, "kube-apiserver.log"), "serving\n")
	finished := filepath.Join(tmp, tempPrefix+"finished")
	writeFile(t, filepath.Join(finished, "pid"), gone)
	writeFile(t, filepath.Join(finished, "etcd.pid"), gone)
	running := filepath.Join(tmp, tempPrefix+"running")
	writeFile(t, filepath.Join(running, "pid"), alive)

	var said bytes.Buffer
	removeOrphans(&said)
	for dir, kept := range map[string]bool{orphaned: true, finished: false, running: true} {
		if _, err := os.Stat(dir); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", filepath.Base(dir), err == nil, kept)
		}
	}
	want := "clustertest: " + orphaned + ": its test binary (pid " + gone + ") is gone, but kube-apiserver (pid " + alive +
		") is still running in it, so it is left in place: kill it to have it removed\n"
	if said.String() != want {
		t.Errorf("removeOrphans said %q, want %q", said.String(), want)
	}
}

// writeFile writes data to path, making its folder.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
