package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// A terminal is where the demo writes: its narration, and the lines of the
// processes it runs, each prefixed, one whole line at a time.
type terminal struct {
	mu    sync.Mutex
	w     io.Writer
	begin time.Time
}

// step writes a step's heading, with the time since the demo began.
func (t *terminal) step(format string, args ...any) {
	t.line(fmt.Sprintf("\n[%3ds] ", int(time.Since(t.begin).Seconds())) + fmt.Sprintf(format, args...))
}

// say writes a line telling what happened.
func (t *terminal) say(format string, args ...any) {
	t.line("       " + fmt.Sprintf(format, args...))
}

func (t *terminal) line(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = io.WriteString(t.w, s+"\n")
}

// prefixed is a writer that writes each whole line written to it to t,
// after prefix.
func (t *terminal) prefixed(prefix string) *prefixWriter {
	return &prefixWriter{t: t, prefix: prefix}
}

type prefixWriter struct {
	mu      sync.Mutex
	t       *terminal
	prefix  string
	skip    func(line string) bool // the lines left out, if not nil
	partial []byte
}

// belowInfo reports whether line is a log line of the controller's, a
// time and a level first, at DEBUG or TRACE.
func belowInfo(line string) bool {
	fields := strings.SplitN(line, " ", 3)
	if len(fields) < 3 {
		return false
	}
	if _, err := time.Parse(time.RFC3339Nano, fields[0]); err != nil {
		return false
	}
	return fields[1] == "DEBUG" || fields[1] == "TRACE"
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		if line := string(p.partial[:i]); p.skip == nil || !p.skip(line) {
			p.t.line(p.prefix + line)
		}
		p.partial = p.partial[i+1:]
	}
}
