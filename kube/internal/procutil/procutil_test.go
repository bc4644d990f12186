//go:build (unix && !aix && !solaris) || illumos

package procutil

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestSpawnGroupAndSignals(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 1000 & wait")
	if err := Spawn(cmd); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { KillGroup(pid) })
	pgid, err := syscall.Getpgid(pid)
	if err != nil || pgid != pid {
		t.Fatalf("the child's process group = %d, %v; want its own, %d", pgid, err, pid)
	}
	if !Alive(pid) {
		t.Errorf("Alive(%d) of a running child = false", pid)
	}
	if err := PauseGroup(pid); err != nil {
		t.Fatal(err)
	}
	if err := ResumeGroup(pid); err != nil {
		t.Fatal(err)
	}
	if err := TerminateGroup(pid); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("the child ended with %v, want SIGTERM", err)
	}
	if Alive(pid) {
		t.Errorf("Alive(%d) of a child that was waited for = true", pid)
	}
	// The shell's sleep, signalled with it, may take a moment to end.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err = TerminateGroup(pid); err != nil || time.Now().After(deadline) {
			break
		}
	}
	if want := "procutil: sending terminated to process group "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("TerminateGroup of a gone group = %v, want %q...", err, want)
	}
}

func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	first, second := open(), open()
	defer func() { _ = second.Close() }()
	if ok, err := TryLock(first); !ok || err != nil {
		t.Fatalf("the first TryLock = %t, %v; want true", ok, err)
	}
	if ok, err := TryLock(second); ok || err != nil {
		t.Fatalf("TryLock while another file holds the lock = %t, %v; want false", ok, err)
	}
	_ = first.Close()
	if ok, err := TryLock(second); !ok || err != nil {
		t.Fatalf("TryLock once the holder closed = %t, %v; want true", ok, err)
	}
}

func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
				time.Sleep(time.Microsecond)
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Errorf("String() = %d bytes, want 800 x's", len(got))
	}
}
