//go:build !unix || aix || (solaris && !illumos)

package procutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"
)

// Supported reports whether this system has the process groups, signals
// and flock the package needs: Unix but AIX and Solaris, whose syscall
// package lacks flock.
const Supported = false

// errUnsupported says this system lacks what the package needs.
var errUnsupported = fmt.Errorf("procutil: process groups, signals and flock need Unix, and this is %s: %w", runtime.GOOS, errors.ErrUnsupported)

// Spawn returns an error wrapping errors.ErrUnsupported: see Supported.
func Spawn(*exec.Cmd) error { return errUnsupported }

// TerminateGroup returns an error wrapping errors.ErrUnsupported.
func TerminateGroup(int) error { return errUnsupported }

// KillGroup does nothing: no process group was started.
func KillGroup(int) {}

// PauseGroup returns an error wrapping errors.ErrUnsupported.
func PauseGroup(int) error { return errUnsupported }

// ResumeGroup returns an error wrapping errors.ErrUnsupported.
func ResumeGroup(int) error { return errUnsupported }

// TryLock returns an error wrapping errors.ErrUnsupported.
func TryLock(*os.File) (bool, error) { return false, errUnsupported }

// Alive reports true: with no way to tell, nothing is taken for dead.
func Alive(int) bool { return true }

// CPU returns an error wrapping errors.ErrUnsupported.
func CPU(int) (time.Duration, error) { return 0, errUnsupported }
