//go:build (unix && !aix && !solaris) || illumos

package procutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Supported reports whether this system has the process groups, signals
// and flock the package needs: Unix but AIX and Solaris, whose syscall
// package lacks flock.
const Supported = true

// Spawn starts cmd in a process group of its own, and, on Linux, with a
// parent-death signal of SIGKILL, from one OS thread that never exits.
//
// Linux sends the parent-death signal when the thread that forked the
// child exits, not the process: a child forked from an ordinary
// goroutine's thread would be killed whenever the Go runtime retires that
// thread. The spawning goroutine locks its thread and never returns, so
// the signal comes only when the whole process dies, by panic, timeout or
// SIGKILL.
func Spawn(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.requests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for r := range spawner.requests {
				r.result <- r.cmd.Start()
			}
		}()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	dieWithParent(cmd.SysProcAttr)
	r := spawnRequest{cmd: cmd, result: make(chan error, 1)}
	spawner.requests <- r
	return <-r.result
}

// spawner is the goroutine that starts every child process; see Spawn.
var spawner struct {
	once     sync.Once
	requests chan spawnRequest
}

type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

// TerminateGroup sends SIGTERM to process group pgid.
func TerminateGroup(pgid int) error { return signalGroup(pgid, syscall.SIGTERM) }

// KillGroup sends SIGKILL to process group pgid; a group that is gone
// already is no error.
func KillGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH: the group is gone already
}

// PauseGroup stops process group pgid with SIGSTOP: its processes no
// longer get the CPU, but their sockets stay open.
func PauseGroup(pgid int) error { return signalGroup(pgid, syscall.SIGSTOP) }

// ResumeGroup continues process group pgid with SIGCONT.
func ResumeGroup(pgid int) error { return signalGroup(pgid, syscall.SIGCONT) }

func signalGroup(pgid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pgid, sig); err != nil {
		return fmt.Errorf("procutil: sending %s to process group %d: %w", sig, pgid, err)
	}
	return nil
}

// TryLock takes an exclusive flock on f without waiting: it reports false
// when another open file holds one. The lock lasts until f is closed, or
// the process dies.
func TryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		return false, nil
	}
	return false, fmt.Errorf("procutil: locking %s: %w", f.Name(), err)
}
