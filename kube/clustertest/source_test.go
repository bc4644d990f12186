package clustertest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want from
		err  string
	}{
		{name: "none", want: from{kind: fromSource}},
		{name: "a nil option", opts: []Option{nil}, want: from{kind: fromSource}},
		{name: "assets", opts: []Option{FromAssets("/assets")}, want: from{kind: fromAssets, path: "/assets"}},
		{name: "kubeconfig", opts: []Option{FromKubeconfig("/kubeconfig")}, want: from{kind: fromKubeconfig, path: "/kubeconfig"}},
		{
			name: "empty assets",
			opts: []Option{FromAssets("")},
			err:  "clustertest: FromAssets: the folder is empty; it is the folder setup-envtest prints, which envtest's users keep in KUBEBUILDER_ASSETS",
		},
		{
			name: "two, one empty",
			opts: []Option{FromAssets("/assets"), FromKubeconfig("")},
			err: "clustertest: 2 sources of a control plane given ([the control plane of envtest's assets in /assets the existing cluster of the kubeconfig ]):" +
				" give FromAssets or FromKubeconfig once, or neither\n" +
				"clustertest: FromKubeconfig: the kubeconfig's path is empty",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolve(tc.opts)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("err = %v, want\n%s", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("resolve = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestStartFromAssetsLacking(t *testing.T) {
	assets := t.TempDir()
	if err := os.WriteFile(filepath.Join(assets, "etcd"), []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Start(t.Context(), t.TempDir(), FromAssets(assets))
	want := fmt.Sprintf("clustertest: FromAssets(%[1]q): etcd is not an executable file\n"+
		"clustertest: FromAssets(%[1]q): stat %[1]s/kube-apiserver: no such file or directory", assets)
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want\n%s", err, want)
	}
}

func TestStartFromKubeconfigFails(t *testing.T) {
	dir := t.TempDir()
	absent := filepath.Join(dir, "absent")
	_, err := Start(t.Context(), "", FromKubeconfig(absent))
	if want := fmt.Sprintf("clustertest: FromKubeconfig(%q): open %s: no such file or directory", absent, absent); err == nil || err.Error() != want {
		t.Errorf("a missing kubeconfig: err = %v, want %s", err, want)
	}

	// A server no one listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := l.Addr().String()
	_ = l.Close()
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	data, err := kubeconfig(server, ca.PEM(), "admin", "token")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Start(t.Context(), "", FromKubeconfig(path))
	want := fmt.Sprintf("clustertest: FromKubeconfig(%q): kube-apiserver at https://%s isn't ready: ", path, server)
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a server no one listens on: err = %v, want %s...connection refused", err, want)
	}
}

// TestFromKubeconfigFileCA checks that a kubeconfig naming its CA by a
// relative path has it read, relative to the kubeconfig's folder.
func TestFromKubeconfigFileCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthority: "ca.crt"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	c, err := loadKubeconfig(from{kind: fromKubeconfig, path: path})
	if err != nil {
		t.Fatal(err)
	}
	if string(c.CAPEM()) != string(ca.PEM()) || c.Server() != "127.0.0.1:1" || c.AdminToken() != "t" {
		t.Errorf("CAPEM %q, Server %q, AdminToken %q; want the CA file's, 127.0.0.1:1, t", c.CAPEM(), c.Server(), c.AdminToken())
	}
	if got := c.KubeconfigPath(); got != path {
		t.Errorf("KubeconfigPath() = %q, want %q", got, path)
	}
	loaded, err := clientcmd.Load(c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded.Clusters["c"]; got == nil || string(got.CertificateAuthorityData) != string(ca.PEM()) || got.CertificateAuthority != "" {
		t.Errorf("Kubeconfig()'s cluster = %+v, want the CA file's contents embedded", got)
	}
}

func TestHostPort(t *testing.T) {
	for server, want := range map[string]string{
		"https://127.0.0.1:6443":     "127.0.0.1:6443",
		"https://example.com":        "example.com:443",
		"https://[::1]:6443/prefix":  "[::1]:6443",
		"https://[fd00::1]":          "[fd00::1]:443",
		"https://kind-control-plane": "kind-control-plane:443",
	} {
		if got, err := hostPort(server); err != nil || got != want {
			t.Errorf("hostPort(%q) = %q, %v; want %q", server, got, err, want)
		}
	}
	if _, err := hostPort("127.0.0.1:6443"); err == nil {
		t.Errorf("hostPort of a URL without a scheme: no error")
	}
}
