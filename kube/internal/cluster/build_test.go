package cluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSourceStamp(t *testing.T) {
	src := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		path := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stamp := func() string {
		t.Helper()
		s, err := sourceStamp(src)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	write("go.mod", "module m\n")
	write("go.sum", "")
	write("etcd/main.go", "package main\n")
	first := stamp()

	write("README.md", "not source")
	if stamp() != first {
		t.Errorf("a README changed the stamp")
	}
	for _, change := range []struct{ name, data string }{
		{"etcd/main.go", "package main // changed\n"},
		{"kube-apiserver/main.go", "package main\n"},
		{"go.sum", "k8s.io/api v0.37.2 h1:x\n"},
		{"go.mod", "module m\n\ngo 1.26\n"},
	} {
		before := stamp()
		write(change.name, change.data)
		if stamp() == before {
			t.Errorf("writing %s left the stamp unchanged", change.name)
		}
	}
}

func TestUpToDate(t *testing.T) {
	bin := t.TempDir()
	if upToDate(bin, "abc") {
		t.Errorf("an empty folder is up to date")
	}
	for _, p := range programs {
		if err := os.WriteFile(filepath.Join(bin, p), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "stamp"), []byte("abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !upToDate(bin, "abc") {
		t.Errorf("every program and a matching stamp isn't up to date")
	}
	if upToDate(bin, "def") {
		t.Errorf("a stamp of other source is up to date")
	}
	if err := os.Remove(filepath.Join(bin, "kube-apiserver")); err != nil {
		t.Fatal(err)
	}
	if upToDate(bin, "abc") {
		t.Errorf("a folder missing kube-apiserver is up to date")
	}
}

// TestLockExcludes uses real time: a goroutine blocked in flock is in a
// system call, which testing/synctest doesn't count as durably blocked.
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := lock(path)
	if err != nil {
		t.Fatal(err)
	}
	acquired := make(chan func())
	go func() {
		second, err := lock(path)
		if err != nil {
			t.Error(err)
			second = func() {}
		}
		acquired <- second
	}()
	select {
	case second := <-acquired:
		second()
		t.Fatal("a second lock was taken while the first was held")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case second := <-acquired:
		second()
	case <-time.After(5 * time.Second):
		t.Fatal("the second lock wasn't taken after the first was released")
	}
}
