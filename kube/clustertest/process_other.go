//go:build !linux

package clustertest

import (
	"errors"
	"syscall"
)

// dieWithParent does nothing: only Linux has a parent-death signal, so
// elsewhere a child outlives a parent that dies without stopping it.
// The control plane runs on Linux; this lets the package, and what
// imports it, build and run its unit tests on macOS.
func dieWithParent(*syscall.SysProcAttr) {}

// alive reports whether process pid exists. Without /proc it can't tell
// a zombie from a live process, and counts it as alive.
func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
