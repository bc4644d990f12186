package procutil

import (
	"os"
	"testing"
	"time"
)

func TestCPUCountsWhatTheProcessSpends(t *testing.T) {
	before, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 100*time.Millisecond; {
		// busy: 100 ms of one core, 10 of the kernel's ticks
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
