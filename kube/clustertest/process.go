package clustertest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/z5labs/humus/kube/internal/procutil"
)

// A process is one component of the control plane: its command line, the
// file its output goes to, and, while it runs, its process group.
// A process is not safe for concurrent use: the Cluster serialises it.
type process struct {
	name    string
	path    string
	args    []string
	log     string
	pidFile string // where start writes the pid, for removeOrphans; "" for none

	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd has exited
	exitErr error         // cmd.Wait's result, set before done is closed
	paused  bool          // stopped by SIGSTOP, not yet continued
}

// start starts the process in its own process group, appending its output
// to its log. On Linux it dies with this process (SIGKILL), however this
// one ends (see procutil.Spawn).
func (p *process) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("clustertest: starting %s: %w", p.name, err)
	}
	defer func() { _ = f.Close() }() // the child holds its own copy
	_, _ = fmt.Fprintf(f, "==== %s starting at %s\n", p.name, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := procutil.Spawn(cmd); err != nil {
		return fmt.Errorf("clustertest: starting %s: %w", p.name, err)
	}
	if p.pidFile != "" {
		// Best effort: without it, removeOrphans takes the process for
		// gone once its test binary is.
		_ = os.WriteFile(p.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exitErr, p.paused = cmd, done, nil, false
	go func() {
		p.exitErr = cmd.Wait()
		close(done)
	}()
	return nil
}

// running reports whether the process was started and hasn't exited.
func (p *process) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// pid is the process's id, or 0 when it was never started.
func (p *process) pid() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stop sends SIGTERM to the process group, and SIGKILL when the process
// hasn't exited within grace; it returns once the process has exited. Its
// error says the process had already exited before stop asked it to. A
// nil process, one the control plane doesn't run, has nothing to stop.
func (p *process) stop(grace time.Duration) error {
	if p == nil || p.cmd == nil {
		return nil
	}
	defer func() { p.cmd, p.paused = nil, false }()
	pid := p.cmd.Process.Pid
	select {
	case <-p.done:
		procutil.KillGroup(pid) // anything it left behind
		return fmt.Errorf("clustertest: %s had exited before it was stopped: %w", p.name, p.exitError())
	default:
	}
	_ = procutil.TerminateGroup(pid) // if it exited meanwhile, done is closed
	if p.paused {
		_ = procutil.ResumeGroup(pid) // a stopped process acts on SIGTERM only once continued
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		procutil.KillGroup(pid)
		<-p.done
	}
	procutil.KillGroup(pid)
	return nil
}

// kill sends SIGKILL to the process group and returns once the process
// has exited. Its error says the process wasn't running.
func (p *process) kill() error {
	if !p.running() {
		return fmt.Errorf("clustertest: %s isn't running", p.name)
	}
	procutil.KillGroup(p.cmd.Process.Pid)
	<-p.done
	p.cmd, p.paused = nil, false
	return nil
}

// pause stops the process group with SIGSTOP, as a process that no
// longer gets the CPU: its sockets stay open and the kernel still accepts
// connections on them, but nothing answers.
func (p *process) pause() error {
	if !p.running() {
		return fmt.Errorf("clustertest: %s isn't running", p.name)
	}
	if p.paused {
		return fmt.Errorf("clustertest: %s is already paused", p.name)
	}
	if err := procutil.PauseGroup(p.cmd.Process.Pid); err != nil {
		return fmt.Errorf("clustertest: pausing %s: %w", p.name, err)
	}
	p.paused = true
	return nil
}

// resume continues a process group that pause stopped.
func (p *process) resume() error {
	if !p.paused {
		return fmt.Errorf("clustertest: %s isn't paused", p.name)
	}
	p.paused = false
	if !p.running() {
		return fmt.Errorf("clustertest: %s exited while paused: %w", p.name, p.exitError())
	}
	if err := procutil.ResumeGroup(p.cmd.Process.Pid); err != nil {
		return fmt.Errorf("clustertest: resuming %s: %w", p.name, err)
	}
	return nil
}

// flag is the value of the process's argument "name=value".
func (p *process) flag(name string) string {
	for _, arg := range p.args {
		if v, ok := strings.CutPrefix(arg, name+"="); ok {
			return v
		}
	}
	return ""
}

// exitError is why the exited process ended: cmd.Wait's error, or one
// saying it exited with status 0.
func (p *process) exitError() error {
	if p.exitErr != nil {
		return p.exitErr
	}
	return errors.New("exit status 0")
}

// tail is the last n lines of the file at path, or a note saying why it
// can't be read.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer func() { _ = f.Close() }()
	const window = 64 << 10
	if info, err := f.Stat(); err == nil && info.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return fmt.Sprintf("(%v)", err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return lastLines(data, n)
}

// lastLines is the last n lines of data.
func lastLines(data []byte, n int) string {
	if n <= 0 {
		return ""
	}
	data = bytes.TrimRight(data, "\n")
	at := len(data)
	for range n {
		i := bytes.LastIndexByte(data[:at], '\n')
		if i < 0 {
			return string(data)
		}
		at = i
	}
	return string(data[at+1:])
}
