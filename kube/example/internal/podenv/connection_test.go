package podenv

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/z5labs/humus/kube/clustertest"
)

func TestReadFromAKubeconfig(t *testing.T) {
	h := podHost(t)
	delete(h.Env, "KUBERNETES_SERVICE_HOST")
	delete(h.Env, "KUBERNETES_SERVICE_PORT")
	h.Env["KUBECONFIG"] = "/home/me/.kube/config"
	ca, err := clustertest.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	h.Files["home/me/.kube/config"] = &fstest.MapFile{Data: kubeconfig(t, "https://127.0.0.1:6443", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.CertificateAuthorityData = ca.PEM()
		u.Token = "admin-token"
	})}

	got, err := read(h)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if got.conn.Server != "127.0.0.1:6443" {
		t.Errorf("Server = %q, want 127.0.0.1:6443", got.conn.Server)
	}
	if got.conn.TLS == nil || got.conn.TLS.RootCAs == nil {
		t.Errorf("TLS = %+v, want the kubeconfig's CA in RootCAs", got.conn.TLS)
	}
	if token, err := got.conn.Token(context.Background()); token != "admin-token" || err != nil {
		t.Errorf("Token() = %q, %v, want the kubeconfig's", token, err)
	}
}

func TestFromKubeconfigDefaultsThePort(t *testing.T) {
	conn, err := fromKubeconfig(kubeconfig(t, "https://api.example.com", nil))
	if err != nil {
		t.Fatalf("fromKubeconfig: %v", err)
	}
	if conn.Server != "api.example.com:443" || conn.Token != nil {
		t.Errorf("Server = %q and a Token %v, want api.example.com:443 and none", conn.Server, conn.Token != nil)
	}
}

func TestFromKubeconfigRefusesWhatItWouldHaveToFollow(t *testing.T) {
	data := kubeconfig(t, "http://127.0.0.1:8080", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.CertificateAuthority = "/etc/kubernetes/ca.crt"
		u.Token = "secret-token"
		u.TokenFile = "/var/run/token"
		u.Exec = &clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1"}
	})

	_, err := fromKubeconfig(data)

	want := strings.Join([]string{
		`a CA file (/etc/kubernetes/ca.crt) isn't supported: embed the credentials instead`,
		`a token file isn't supported: embed the credentials instead`,
		`an exec plugin isn't supported: embed the credentials instead`,
		`server "http://127.0.0.1:8080" isn't an https:// URL`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("fromKubeconfig's error =\n%v\nwant\n%s", err, want)
	}
}

// kubeconfig is a kubeconfig whose current context is server's, as edit
// leaves it.
func kubeconfig(t *testing.T, server string, edit func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cluster, user := &clientcmdapi.Cluster{Server: server}, &clientcmdapi.AuthInfo{}
	if edit != nil {
		edit(cluster, user)
	}
	cfg.Clusters["dev"] = cluster
	cfg.AuthInfos["me"] = user
	cfg.Contexts["dev"] = &clientcmdapi.Context{Cluster: "dev", AuthInfo: "me"}
	cfg.CurrentContext = "dev"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
