package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/procutil"
)

// TestClusterCommandStopsOnSignal builds the command, starts it, and sends
// it SIGTERM or SIGINT, as make or a terminal would: it must stop etcd,
// kube-apiserver and kube-controller-manager and exit 0, leaving none of
// them running.
func TestClusterCommandStopsOnSignal(t *testing.T) {
	clustertest.SkipShort(t)
	if runtime.GOOS != "linux" {
		t.Skip("finds the command's children in /proc")
	}
	if _, err := clustertest.Build(t.Context(), clustertest.Fetch(clustertest.BuildOnly)); err != nil { // so the command doesn't build; these tests fetch nothing
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "cluster")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) { testStopsOn(t, bin, sig) })
	}
}

// TestRefusesAFolderOfOthers runs the command's body with -dir naming a
// folder that holds a user's file and no .clustertest file: it must
// refuse, naming the folder and why, and leave the file as it was. (It
// used to empty the folder: -dir . lost a user's work.)
func TestRefusesAFolderOfOthers(t *testing.T) {
	if !procutil.Supported {
		t.Skip("the control plane runs on Unix only")
	}
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("a user's work"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // nothing is built or started, whatever run does
	err := run(ctx, func() {}, dir, false)
	want := "clustertest: refusing to use the folder " + dir + ` for the control plane's files: it holds "notes.txt",` +
		" and no .clustertest file of an earlier start says it is the control plane's to empty; name a folder that is missing or empty"
	if err == nil || err.Error() != want {
		t.Errorf("run = %v, want\n%s", err, want)
	}
	if data, err := os.ReadFile(notes); err != nil || string(data) != "a user's work" {
		t.Errorf("the user's file after run: %q, %v; want it as it was", data, err)
	}
}

func testStopsOn(t *testing.T, bin string, sig syscall.Signal) {
	dir := filepath.Join(t.TempDir(), ".cluster")
	cmd := exec.Command(bin, "-dir", dir)
	var stderr procutil.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line := firstLine(t, stdout, &stderr)
	if want := "export KUBECONFIG=" + filepath.Join(dir, "kubeconfig"); line != want {
		t.Errorf("stdout's first line = %q, want %q", line, want)
	}
	// stderr is copied from a pipe of its own, maybe behind stdout.
	clustertest.Eventually(t, 5*time.Second, func(context.Context) error {
		for _, want := range []string{
			"clustertest: " + dir + " holds its files",
			"kill -TERM " + strconv.Itoa(cmd.Process.Pid) + " (this process)",
		} {
			if !strings.Contains(stderr.String(), want) {
				return fmt.Errorf("stderr lacks %q:\n%s", want, stderr.String())
			}
		}
		return nil
	})
	children := childrenOf(t, cmd.Process.Pid)
	var names []string
	for _, c := range children {
		names = append(names, c.name)
	}
	slices.Sort(names)
	if want := []string{"etcd", "kube-apiserver", "kube-controller-manager"}; !slices.Equal(names, want) {
		t.Fatalf("the command's children are %v, want %v", names, want)
	}

	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the command exited with %v after %s, want 0; stderr:\n%s", err, sig, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the command didn't exit within a minute of %s; stderr:\n%s", sig, stderr.String())
	}
	for _, c := range children {
		if procutil.Alive(c.pid) {
			t.Errorf("%s (pid %d) outlived the command", c.name, c.pid)
		}
	}
	if !strings.HasSuffix(stderr.String(), "clustertest: stopped\n") {
		t.Errorf("stderr doesn't end saying it stopped:\n%s", stderr.String())
	}
}

// firstLine is the first line the command writes to stdout, once its
// control plane is running.
func firstLine(t *testing.T, stdout io.Reader, stderr *procutil.SyncBuffer) string {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		if scanner.Scan() {
			lines <- scanner.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("the command wrote nothing to stdout; stderr:\n%s", stderr.String())
		}
		return line
	case <-ctx.Done():
		t.Fatalf("the command didn't start its control plane within 5 minutes; stderr:\n%s", stderr.String())
	}
	return ""
}

type child struct {
	pid  int
	name string // the base name of its program
}

// childrenOf is the processes whose parent is pid, from /proc.
func childrenOf(t *testing.T, pid int) []child {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var children []child
	for _, path := range stats {
		stat, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		dir := filepath.Dir(path)
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		n, _ := strconv.Atoi(filepath.Base(dir))
		children = append(children, child{pid: n, name: filepath.Base(string(argv0))})
	}
	return children
}
