package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// programs are the control plane's commands, each a main package in
// tools/controlplane and a binary of the same name in .bin/controlplane.
var programs = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// ldflags stamps the version kube-apiserver reports at /version. A build
// with other flags misses Go's build cache, so every build of the control
// plane uses exactly these.
const ldflags = "-X k8s.io/component-base/version.gitVersion=v1.37.2" +
	" -X k8s.io/component-base/version.gitMajor=1" +
	" -X k8s.io/component-base/version.gitMinor=37" +
	" -X k8s.io/component-base/version.gitTreeState=clean"

// Build builds the control plane's binaries into .bin/controlplane at the
// repository root (the folder holding go.work, above the working directory)
// unless they are already built from tools/controlplane's current source.
// A build holds a lock on .bin/controlplane.lock, so two processes
// building at once build once. A warm start runs no go command at all; a
// cold build takes about 18 minutes on two cores, and a line on stderr
// says so when it begins.
func Build(ctx context.Context) error {
	_, err := build(ctx, os.Stderr)
	return err
}

// build is Build, returning the folder that holds the binaries and
// writing its notice to w.
func build(ctx context.Context, w io.Writer) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "tools", "controlplane")
	bin := filepath.Join(root, ".bin", "controlplane")
	want, err := sourceStamp(src)
	if err != nil {
		return "", err
	}
	if upToDate(bin, want) {
		return bin, nil
	}

	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	unlock, err := lock(filepath.Join(root, ".bin", "controlplane.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if upToDate(bin, want) { // built by another process while this one waited
		return bin, nil
	}

	_, _ = fmt.Fprintln(w, "cluster: building the control plane, a cold build takes about 18 minutes on two cores")
	stampPath := filepath.Join(bin, "stamp")
	if err := os.Remove(stampPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("cluster: %w", err)
	}
	args := append([]string{"build", "-ldflags", ldflags, "-o", bin + string(filepath.Separator)}, packages()...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Cancel = func() error {
		killGroup(cmd.Process.Pid)
		return nil
	}
	if err := spawn(cmd); err != nil {
		return "", fmt.Errorf("cluster: building the control plane: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("cluster: building the control plane in %s: %w\n%s", src, err, lastLines(out.Bytes(), 40))
	}
	if err := os.WriteFile(stampPath, []byte(want+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return bin, nil
}

// packages are the go build arguments naming the programs.
func packages() []string {
	pkgs := make([]string, len(programs))
	for i, p := range programs {
		pkgs[i] = "./" + p
	}
	return pkgs
}

// repoRoot is the nearest folder at or above the working directory that
// holds go.work.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("cluster: no go.work in %s or any folder above it", wd)
		}
	}
}

// sourceStamp is a hash of what the binaries are built from: the build
// flags, and tools/controlplane's go.mod, go.sum and Go files.
func sourceStamp(src string) (string, error) {
	var files []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if !d.IsDir() && (name == "go.mod" || name == "go.sum" || strings.HasSuffix(name, ".go")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("cluster: reading the control plane's source: %w", err)
	}
	slices.Sort(files)
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "ldflags %q\n", ldflags)
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("cluster: reading the control plane's source: %w", err)
		}
		rel, _ := filepath.Rel(src, path)
		_, _ = fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(data))
		_, _ = h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// upToDate reports whether bin holds every program and a stamp equal to
// want.
func upToDate(bin, want string) bool {
	got, err := os.ReadFile(filepath.Join(bin, "stamp"))
	if err != nil || strings.TrimSpace(string(got)) != want {
		return false
	}
	for _, p := range programs {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			return false
		}
	}
	return true
}

// lock takes an exclusive flock on path, waiting for it, and returns its
// release. The kernel releases it too when the process dies.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cluster: locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
