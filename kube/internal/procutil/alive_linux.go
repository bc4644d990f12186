package procutil

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dieWithParent makes a child started with attr receive SIGKILL when the
// thread that started it exits (see Spawn).
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// Alive reports whether process pid exists and isn't a zombie.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	fields, err := stat(pid)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	return len(fields) == 0 || fields[0] != "Z"
}

// stat is the fields of /proc/pid/stat after "pid (comm)", state first:
// comm may hold spaces and parentheses.
func stat(pid int) ([]string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:])), nil
}

// CPU is the CPU time process pid has used, in user and system mode, from
// /proc: in ticks of 10 ms, the kernel's USER_HZ.
func CPU(pid int) (time.Duration, error) {
	fields, err := stat(pid)
	if err != nil {
		return 0, err
	}
	// Of the whole line's fields, state is 3, utime 14 and stime 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("procutil: /proc/%d/stat has %d fields after its command", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procutil: /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
