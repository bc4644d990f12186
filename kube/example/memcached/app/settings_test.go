package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
)

// podHost is a Host as the kubelet sets up a pod: the Service's address,
// the service account's files, and the downward API's variables.
func podHost(t *testing.T) *humustest.Host {
	h := humustest.NewHost()
	h.Env["KUBERNETES_SERVICE_HOST"] = "fd00::1"
	h.Env["KUBERNETES_SERVICE_PORT"] = "443"
	h.Env["POD_NAMESPACE"] = "memcached-system"
	h.Env["POD_NAME"] = "memcached-controller-7d9f-x2k4q"
	h.Files[serviceAccount+"ca.crt"] = &fstest.MapFile{Data: caPEM(t)}
	h.Files[serviceAccount+"token"] = &fstest.MapFile{Data: []byte("eyJhbGciOi.payload.sig\n")}
	return h
}

func TestReadSettingsInAPod(t *testing.T) {
	s := &humus.Setup{Host: podHost(t).Host()}

	got, err := readSettings(context.Background(), s)
	if err != nil {
		t.Fatalf("readSettings: %v", err)
	}

	if got.conn.Server != "[fd00::1]:443" {
		t.Errorf("Server = %q, want [fd00::1]:443", got.conn.Server)
	}
	if got.conn.TLS == nil || got.conn.TLS.RootCAs == nil {
		t.Errorf("TLS = %+v, want the service account's CA in RootCAs", got.conn.TLS)
	}
	if token, err := got.conn.Token(context.Background()); token != "eyJhbGciOi.payload.sig" || err != nil {
		t.Errorf("Token() = %q, %v, want the token file's, trimmed", token, err)
	}
	want := kube.DefaultSettings()
	want.Name = "memcached-controller"
	want.LeaderElection.Namespace = "memcached-system"
	want.LeaderElection.Identity = "memcached-controller-7d9f-x2k4q"
	if got.controller != want {
		t.Errorf("Settings = %+v, want %+v", got.controller, want)
	}
	if got.probesAddr != ":8081" {
		t.Errorf("probes' address = %q, want :8081", got.probesAddr)
	}
}

func TestReadSettingsOverrides(t *testing.T) {
	h := podHost(t)
	h.Env["WATCH_NAMESPACE"] = "shop"
	h.Env["WORKERS"] = "4"
	h.Env["PROBES_ADDR"] = "127.0.0.1:9000"

	got, err := readSettings(context.Background(), &humus.Setup{Host: h.Host()})
	if err != nil {
		t.Fatalf("readSettings: %v", err)
	}
	if got.controller.Namespace != "shop" || got.controller.Workers != 4 || got.probesAddr != "127.0.0.1:9000" {
		t.Errorf("Namespace, Workers, probes = %q, %d, %q, want shop, 4, 127.0.0.1:9000",
			got.controller.Namespace, got.controller.Workers, got.probesAddr)
	}
}

func TestReadSettingsNamesEveryProblemInOneError(t *testing.T) {
	h := podHost(t)
	delete(h.Env, "KUBERNETES_SERVICE_PORT")
	delete(h.Env, "POD_NAME")
	delete(h.Files, serviceAccount+"token")
	h.Files[serviceAccount+"ca.crt"] = &fstest.MapFile{Data: []byte("not a certificate")}
	h.Env["POD_NAMESPACE"] = "Memcached_System"
	h.Env["WORKERS"] = "0"

	_, err := readSettings(context.Background(), &humus.Setup{Host: h.Host()})

	want := strings.Join([]string{
		`app: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt: no PEM certificate in it`,
		`app: reading /var/run/secrets/kubernetes.io/serviceaccount/token: file does not exist`,
		`config: environment variable "KUBERNETES_SERVICE_PORT" is not set`,
		`config: environment variable "WORKERS": invalid value "0": kube: workers 0 must be at least 1`,
		`config: environment variable "POD_NAMESPACE": invalid value "Memcached_System": kube: namespace "Memcached_System" must be a DNS-1123 label: ` +
			`a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		`config: environment variable "POD_NAME" is not set`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("readSettings's error =\n%v\nwant\n%s", err, want)
	}
}

func TestReadSettingsFromAKubeconfig(t *testing.T) {
	h := podHost(t)
	delete(h.Env, "KUBERNETES_SERVICE_HOST")
	delete(h.Env, "KUBERNETES_SERVICE_PORT")
	h.Env["KUBECONFIG"] = "/home/me/.kube/config"
	h.Files["home/me/.kube/config"] = &fstest.MapFile{Data: kubeconfig(t, "https://127.0.0.1:6443", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.CertificateAuthorityData = caPEM(t)
		u.Token = "admin-token"
	})}

	got, err := readSettings(context.Background(), &humus.Setup{Host: h.Host()})
	if err != nil {
		t.Fatalf("readSettings: %v", err)
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

// caPEM is a self-signed CA certificate, PEM-encoded.
func caPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
