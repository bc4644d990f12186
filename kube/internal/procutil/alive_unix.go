//go:build ((unix && !aix && !solaris) || illumos) && !linux

package procutil

import (
	"errors"
	"syscall"
	"time"
)

// dieWithParent does nothing: only Linux has a parent-death signal, so
// here a child outlives a parent that dies without stopping it.
func dieWithParent(*syscall.SysProcAttr) {}

// Alive reports whether process pid exists. Without /proc it can't tell
// a zombie from a live process, and counts it as alive.
func Alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// CPU returns an error wrapping errors.ErrUnsupported: only Linux's /proc
// says what another process has used.
func CPU(int) (time.Duration, error) { return 0, errors.ErrUnsupported }
