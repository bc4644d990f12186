package kubeenv_test

import (
	"testing"
	"testing/fstest"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// newCA makes a CA, whose PEM a test writes as a cluster's CA.
func newCA(t testing.TB) *clustertest.CA {
	t.Helper()
	ca, err := clustertest.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// workstation is a Host as a person's shell is: working in
// /home/me/project, with no KUBECONFIG set.
func workstation() *humustest.Host {
	h := humustest.NewHost()
	h.Dir = "/home/me/project"
	return h
}

// kubeconfig is a kubeconfig with a context "dev", current, of cluster
// "dev" at server and user "me", as edit leaves them.
func kubeconfig(t testing.TB, server string, edit func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)) *clientcmdapi.Config {
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
	return cfg
}

// write puts cfg, encoded as kubectl writes it, at p in h's files, a path
// without its leading slash.
func write(t testing.TB, h *humustest.Host, p string, cfg *clientcmdapi.Config) {
	t.Helper()
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.Files[p] = &fstest.MapFile{Data: data}
}
