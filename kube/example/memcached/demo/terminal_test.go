package main

import (
	"strings"
	"testing"
	"time"
)

func TestBelowInfo(t *testing.T) {
	for line, want := range map[string]bool{
		"2026-12-03T18:33:14.377Z DEBUG Caches populated type=x":   true,
		"2026-12-03T18:33:14.577Z TRACE Request Body body=x":       true,
		"2026-12-03T18:33:14.373Z INFO Waiting for caches to sync": false,
		"2026-12-03T18:33:14.373Z WARN reconcile failed":           false,
		"DEBUG not a log line":                                     false,
		"panic: oops":                                              false,
	} {
		if got := belowInfo(line); got != want {
			t.Errorf("belowInfo(%q) = %v, want %v", line, got, want)
		}
	}
}

func TestPrefixWriter(t *testing.T) {
	var b strings.Builder
	term := &terminal{w: &b, begin: time.Now()}
	w := term.prefixed("  x | ")
	w.skip = belowInfo
	for _, s := range []string{"one\ntw", "o\n2026-12-03T18:33:14.377Z DEBUG hidden\n", "three\n"} {
		_, _ = w.Write([]byte(s))
	}
	if got, want := b.String(), "  x | one\n  x | two\n  x | three\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}
