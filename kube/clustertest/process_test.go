//go:build (unix && !aix && !solaris) || illumos

package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/procutil"
)

// These tests run real processes, so they use real time.

func TestProcessStopKillsAfterGrace(t *testing.T) {
	dir := t.TempDir()
	childPID := filepath.Join(dir, "child.pid")
	// A shell that ignores SIGTERM, with a child in its process group.
	p := &process{
		name: "stubborn",
		path: "/bin/sh",
		args: []string{"-c", `trap "" TERM; sleep 1000 & echo $! > ` + childPID + `; echo started; wait`},
		log:  filepath.Join(dir, "stubborn.log"),
	}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	pid := p.pid()
	// The shell creates the file before it writes the pid into it: wait
	// for the pid, not the file.
	var sleepPID int
	Eventually(t, 5*time.Second, func(context.Context) error {
		data, err := os.ReadFile(childPID)
		if err != nil {
			return err
		}
		sleepPID, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err
	})

	begin := time.Now()
	if err := p.stop(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("stop took %s, want the 300ms grace and a kill", took)
	}
	if procutil.Alive(pid) {
		t.Errorf("the shell, pid %d, outlived stop", pid)
	}
	// SIGKILL is delivered asynchronously; the shell's child, reparented, may
	// take a moment to end.
	Eventually(t, 5*time.Second, func(context.Context) error {
		if procutil.Alive(sleepPID) {
			return fmt.Errorf("the shell's child, pid %d, outlived stop", sleepPID)
		}
		return nil
	})
	if p.running() {
		t.Errorf("running() after stop")
	}
	if log := tail(p.log, 5); !strings.Contains(log, "==== stubborn starting at") || !strings.Contains(log, "started") {
		t.Errorf("the log holds %q, want the start line and the output", log)
	}
}

func TestProcessStopTerminates(t *testing.T) {
	p := &process{name: "sleep", path: "/bin/sleep", args: []string{"1000"}, log: filepath.Join(t.TempDir(), "sleep.log")}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := p.stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("stopping sleep took %s, want it to end on SIGTERM", took)
	}
}

func TestProcessStopAfterExit(t *testing.T) {
	p := &process{name: "false", path: "/bin/false", log: filepath.Join(t.TempDir(), "false.log")}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	err := p.stop(time.Second)
	if want := "clustertest: false had exited before it was stopped: exit status 1"; err == nil || err.Error() != want {
		t.Errorf("stop = %v, want %q", err, want)
	}
	if err := p.stop(time.Second); err != nil {
		t.Errorf("a second stop = %v, want nil", err)
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		data string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a", 3, "a"},
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 3, "a\nb\nc"},
		{"a\nb\nc\n\n", 1, "c"},
		{"a\nb", 0, ""},
	} {
		if got := lastLines([]byte(tc.data), tc.n); got != tc.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tc.data, tc.n, got, tc.want)
		}
	}
}

// state is process pid's state letter in /proc: R, S, T (stopped), Z...
func state(t testing.TB, pid int) string {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) && !procutil.Alive(pid) {
		t.Fatalf("process %d is gone", pid)
	}
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no /proc to read a process's state from")
	}
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return fields[0]
}

func TestProcessPauseResume(t *testing.T) {
	p := &process{name: "sleep", path: "/bin/sleep", args: []string{"1000"}, log: filepath.Join(t.TempDir(), "sleep.log")}
	if err := p.resume(); err == nil {
		t.Errorf("resume before start succeeded")
	}
	if err := p.pause(); err == nil {
		t.Errorf("pause before start succeeded")
	}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	pid := p.pid()
	if err := p.pause(); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 5*time.Second, func(context.Context) error {
		if s := state(t, pid); s != "T" {
			return fmt.Errorf("state %s after pause, want T", s)
		}
		return nil
	})
	if err := p.pause(); err == nil {
		t.Errorf("a second pause succeeded")
	}
	if err := p.resume(); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 5*time.Second, func(context.Context) error {
		if s := state(t, pid); s == "T" {
			return fmt.Errorf("state %s after resume", s)
		}
		return nil
	})
	if err := p.resume(); err == nil {
		t.Errorf("a second resume succeeded")
	}

	// A paused process still stops on SIGTERM, without waiting for the kill.
	if err := p.pause(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := p.stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("stopping a paused sleep took %s, want it to end on SIGTERM", took)
	}
	if p.paused || p.running() {
		t.Errorf("after stop: paused %t, running %t", p.paused, p.running())
	}
}

func TestProcessKill(t *testing.T) {
	dir := t.TempDir()
	p := &process{
		name: "stubborn",
		path: "/bin/sh",
		args: []string{"-c", `trap "" TERM; sleep 1000 & echo started; wait`},
		log:  filepath.Join(dir, "stubborn.log"),
	}
	if err := p.kill(); err == nil {
		t.Errorf("kill before start succeeded")
	}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	pid := p.pid()
	if err := p.pause(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := p.kill(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("kill took %s", took)
	}
	if procutil.Alive(pid) || p.running() || p.paused {
		t.Errorf("after kill: alive %t, running %t, paused %t", procutil.Alive(pid), p.running(), p.paused)
	}
	if err := p.stop(time.Second); err != nil {
		t.Errorf("stop after kill = %v, want nil", err)
	}
	// It starts again.
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	if err := p.kill(); err != nil {
		t.Fatal(err)
	}
}
