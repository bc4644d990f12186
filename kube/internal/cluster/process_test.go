package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
	eventually(t, 5*time.Second, func() error {
		_, err := os.Stat(childPID)
		return err
	})
	data, _ := os.ReadFile(childPID)
	sleepPID, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	if err := p.stop(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("stop took %s, want the 300ms grace and a kill", took)
	}
	if alive(pid) {
		t.Errorf("the shell, pid %d, outlived stop", pid)
	}
	// SIGKILL is delivered asynchronously; the shell's child, reparented, may
	// take a moment to end.
	eventually(t, 5*time.Second, func() error {
		if alive(sleepPID) {
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
	if want := "cluster: false had exited before it was stopped: exit status 1"; err == nil || err.Error() != want {
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
