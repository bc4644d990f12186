// Package procutil starts and signals the child processes of kube's test
// support (the test control plane, the Memcached demo's controller, the
// bench's Apps) and collects their output.
//
//   - Spawn starts a child in a process group of its own, so a Ctrl-C at
//     the terminal reaches only its parent, and, on Linux, with a
//     parent-death signal of SIGKILL, so it dies with its parent however
//     the parent ends, even by SIGKILL. Elsewhere a child outlives a parent
//     that dies without stopping it.
//   - TerminateGroup, KillGroup, PauseGroup and ResumeGroup signal a whole
//     process group (SIGTERM, SIGKILL, SIGSTOP, SIGCONT), so a child's own
//     children are signalled with it.
//   - TryLock takes an exclusive advisory lock on a file (flock), which the
//     kernel releases when the process holding it dies.
//   - Alive says whether a process exists; on Linux a zombie counts as dead.
//   - SyncBuffer is a bytes.Buffer safe for a child's stdout and stderr
//     written as it runs and read by a test.
//
// Process groups, signals and flock need Unix (Linux, macOS, the BSDs,
// illumos): Supported says whether this system has them. Elsewhere the
// package builds, and each of these but SyncBuffer returns an error
// wrapping errors.ErrUnsupported (Alive reports true, so nothing is taken
// for dead).
package procutil
