package procutil

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// rusageCPU is the process's CPU time, user and system, as the kernel
// tells the process itself.
func rusageCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestCPUCountsWhatTheProcessSpends(t *testing.T) {
	before, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Busy until the process has spent 100 ms of CPU, 10 of the kernel's
	// ticks, by its own count: on a loaded machine that takes longer than
	// 100 ms of the clock.
	start, deadline := rusageCPU(t), time.Now().Add(30*time.Second)
	for rusageCPU(t)-start < 100*time.Millisecond && time.Now().Before(deadline) {
	}
	after, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if spent := after - before; spent < 50*time.Millisecond || spent > 10*time.Second {
		t.Errorf("100 ms of busy work counted as %s (%s then %s)", spent, before, after)
	}
	if _, err := CPU(1 << 30); err == nil {
		t.Error("no error for a process that doesn't exist")
	}
}
