package humus_test

import (
	"io/fs"
	"os"
	"testing"

	"github.com/z5labs/humus"
)

func TestOSHostIsTheRealProcess(t *testing.T) {
	h := humus.OSHost()
	if h.Dial == nil || h.Listen == nil || h.FS == nil || h.LookupEnv == nil {
		t.Fatalf("OSHost() = %+v, want every field set", h)
	}
	if h.Stdout != os.Stdout || h.Stderr != os.Stderr {
		t.Errorf("OSHost's Stdout and Stderr = %v, %v; want os.Stdout and os.Stderr", h.Stdout, h.Stderr)
	}

	t.Setenv("HUMUS_TEST_OSHOST", "real")
	if v, ok := h.LookupEnv("HUMUS_TEST_OSHOST"); !ok || v != "real" {
		t.Errorf("LookupEnv(HUMUS_TEST_OSHOST) = %q, %v; want the process's real", v, ok)
	}

	// The FS is the root directory, with paths that have no leading slash.
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/token", []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(h.FS, dir[1:]+"/token")
	if err != nil || string(b) != "secret" {
		t.Errorf("reading %s/token through OSHost's FS = %q, %v; want secret", dir, b, err)
	}
}

func TestHostPathTakesARelativePathAgainstDir(t *testing.T) {
	h := humus.Host{Dir: "/home/me/app"}
	for p, want := range map[string]string{
		"/etc/kube/config":      "etc/kube/config",
		"kubeconfig":            "home/me/app/kubeconfig",
		"./.cluster/kubeconfig": "home/me/app/.cluster/kubeconfig",
		"../other/config":       "home/me/other/config",
		"/":                     ".",
	} {
		if got := h.HostPath(p); got != want {
			t.Errorf("HostPath(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestOSHostsDirIsTheWorkingDirectory(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got := humus.OSHost().Dir; got != wd {
		t.Errorf("OSHost().Dir = %q, want %q", got, wd)
	}
}
