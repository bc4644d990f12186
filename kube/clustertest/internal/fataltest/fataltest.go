// Package fataltest runs a test helper that is expected to fail its test,
// and returns what it failed with, so a test can check a helper's failure
// message without failing itself.
//
//   - The helper runs on a goroutine of its own with a testing.TB whose
//     Fatal, Fatalf, FailNow, Skip, Skipf and SkipNow record the message
//     and end that goroutine, as the testing package's do; Error and
//     Errorf record it and go on.
//   - Everything else (Cleanup, Context, TempDir, Name, Setenv, Log, ...)
//     is the real test's, so what the helper registers for cleanup runs
//     at the real test's end.
package fataltest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Message runs helper with a testing.TB standing in for t, and returns
// the messages it failed or skipped with, one a line, or "" when it did
// neither.
func Message(t testing.TB, helper func(testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		helper(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.messages, "\n")
}

type recorder struct {
	testing.TB
	mu       sync.Mutex
	messages []string
}

func (r *recorder) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages = append(r.messages, msg)
}

func (r *recorder) Helper() {}

func (r *recorder) Error(args ...any) { r.record(sprintln(args...)) }

func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }

func (r *recorder) Fatal(args ...any) {
	r.record(sprintln(args...))
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recorder) FailNow() {
	r.record("FailNow")
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.record("skip: " + sprintln(args...))
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.record("skip: " + fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recorder) SkipNow() {
	r.record("skip")
	runtime.Goexit()
}

// sprintln formats args as Fatal and Error do: fmt.Sprintln, without the
// newline.
func sprintln(args ...any) string {
	return strings.TrimSuffix(fmt.Sprintln(args...), "\n")
}
