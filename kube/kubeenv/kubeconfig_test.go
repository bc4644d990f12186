package kubeenv_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/kubeenv"
)

func TestKubeconfigWithEmbeddedCredentials(t *testing.T) {
	h := workstation()
	ca := newCA(t)
	write(t, h, "home/me/.kube/config", kubeconfig(t, "https://127.0.0.1:6443", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.CertificateAuthorityData = ca.PEM()
		u.Token = "admin-token"
	}))

	conn, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")
	if err != nil {
		t.Fatalf("Kubeconfig: %v", err)
	}

	if conn.Server != "127.0.0.1:6443" {
		t.Errorf("Server = %q, want 127.0.0.1:6443", conn.Server)
	}
	if conn.TLS == nil || !conn.TLS.RootCAs.Equal(ca.Pool()) || conn.TLS.ServerName != "" || conn.TLS.Certificates != nil {
		t.Errorf("TLS = %+v, want the kubeconfig's CA alone in RootCAs, no ServerName, no certificate", conn.TLS)
	}
	wantToken(t, conn, "admin-token")
}

func TestKubeconfigDefaultsThePortAndTheRoots(t *testing.T) {
	h := workstation()
	write(t, h, "home/me/.kube/config", kubeconfig(t, "https://[fd00::1]", nil))

	conn, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")
	if err != nil {
		t.Fatalf("Kubeconfig: %v", err)
	}
	if conn.Server != "[fd00::1]:443" || conn.Token != nil || conn.TLS.RootCAs != nil {
		t.Errorf("Server = %q, a Token %v, RootCAs %v, want [fd00::1]:443, no Token, and the system's roots (nil)",
			conn.Server, conn.Token != nil, conn.TLS.RootCAs)
	}
}

func TestKubeconfigReadsTheNamedContext(t *testing.T) {
	h := workstation()
	cfg := kubeconfig(t, "https://dev.example.com:6443", nil)
	cfg.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://prod.example.com", TLSServerName: "kubernetes.default"}
	cfg.AuthInfos["deployer"] = &clientcmdapi.AuthInfo{Token: "prod-token"}
	cfg.Contexts["prod"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "deployer"}
	cfg.CurrentContext = "dev"
	write(t, h, "home/me/.kube/config", cfg)

	prod, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "prod")
	if err != nil {
		t.Fatalf("Kubeconfig(prod): %v", err)
	}
	if prod.Server != "prod.example.com:443" || prod.TLS.ServerName != "kubernetes.default" {
		t.Errorf("prod's Server, ServerName = %q, %q, want prod.example.com:443, kubernetes.default", prod.Server, prod.TLS.ServerName)
	}
	wantToken(t, prod, "prod-token")

	current, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")
	if err != nil {
		t.Fatalf("Kubeconfig(\"\"): %v", err)
	}
	if current.Server != "dev.example.com:6443" {
		t.Errorf("the current context's Server = %q, want dev.example.com:6443", current.Server)
	}

	_, err = kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "staging")
	want := `kubeenv: kubeconfig /home/me/.kube/config has no context "staging" (it has dev, prod)`
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig(staging)'s error = %v, want %s", err, want)
	}
}

// A relative path in a kubeconfig is taken against the kubeconfig's own
// folder, as kubectl takes it, and a relative path of the kubeconfig
// against the Host's working directory.
func TestKubeconfigReadsFilesRelativeToItsFolder(t *testing.T) {
	h := workstation() // in /home/me/project
	ca := newCA(t)
	certPEM, keyPEM, err := ca.Serving("me")
	if err != nil {
		t.Fatal(err)
	}
	write(t, h, "home/me/.kube/dev/config", kubeconfig(t, "https://dev.example.com:6443", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.CertificateAuthority = "ca.crt"
		u.ClientCertificate = "certs/me.crt"
		u.ClientKey = "/home/me/.kube/dev/certs/me.key"
		u.TokenFile = "../token"
	}))
	h.Files["home/me/.kube/dev/ca.crt"] = &fstest.MapFile{Data: ca.PEM()}
	h.Files["home/me/.kube/dev/certs/me.crt"] = &fstest.MapFile{Data: certPEM}
	h.Files["home/me/.kube/dev/certs/me.key"] = &fstest.MapFile{Data: keyPEM}
	h.Files["home/me/.kube/token"] = &fstest.MapFile{Data: []byte("first-token\n")}

	conn, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "../.kube/dev/config", "")
	if err != nil {
		t.Fatalf("Kubeconfig: %v", err)
	}

	if !conn.TLS.RootCAs.Equal(ca.Pool()) {
		t.Errorf("RootCAs isn't ca.crt's CA alone")
	}
	want, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(conn.TLS.Certificates) != 1 || !conn.TLS.Certificates[0].Leaf.Equal(want.Leaf) {
		t.Errorf("Certificates = %d, want me.crt's certificate alone", len(conn.TLS.Certificates))
	}
	wantToken(t, conn, "first-token")

	// The token file is read again on each call.
	h.Files["home/me/.kube/token"] = &fstest.MapFile{Data: []byte("second-token\n")}
	wantToken(t, conn, "second-token")
	delete(h.Files, "home/me/.kube/token")
	if token, err := conn.Token(context.Background()); token != "" || err == nil ||
		err.Error() != "kubeenv: reading /home/me/.kube/token: file does not exist" {
		t.Errorf("Token() with the file gone = %q, %v, want the error naming the file", token, err)
	}
}

// A relative path taken against a Dir that isn't absolute would silently
// be a path from "/".
func TestKubeconfigRefusesARelativePathWithoutADir(t *testing.T) {
	h := workstation().Host()
	h.Dir = ""

	_, err := kubeenv.Kubeconfig(t.Context(), h, "kubeconfig", "")

	want := `kubeenv: kubeconfig kubeconfig is a relative path, and Host.Dir "" isn't an absolute path to take it against`
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error = %v, want %s", err, want)
	}
}

// A list, as KUBECONFIG holds one, is merged as kubectl merges it: the
// first file to name a cluster, a user or a context wins it, the first to
// set current-context wins it, and a missing file is skipped.
func TestKubeconfigMergesAList(t *testing.T) {
	h := workstation()
	ca := newCA(t)
	first := kubeconfig(t, "https://first.example.com", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = "first-token" })
	write(t, h, "home/me/.kube/config", first)
	second := kubeconfig(t, "https://second.example.com", nil) // its dev and me lose to the first's
	second.Clusters["lab"] = &clientcmdapi.Cluster{Server: "https://lab.example.com", CertificateAuthority: "lab-ca.crt"}
	second.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: "me"}
	second.CurrentContext = "lab"
	write(t, h, "home/me/project/lab/config", second)
	h.Files["home/me/project/lab/lab-ca.crt"] = &fstest.MapFile{Data: ca.PEM()}
	list := "/home/me/.kube/config:/home/me/.kube/missing:lab/config"

	current, err := kubeenv.Kubeconfig(t.Context(), h.Host(), list, "")
	if err != nil {
		t.Fatalf("Kubeconfig: %v", err)
	}
	if current.Server != "first.example.com:443" {
		t.Errorf("Server = %q, want the first file's current context's, first.example.com:443", current.Server)
	}
	wantToken(t, current, "first-token")

	lab, err := kubeenv.Kubeconfig(t.Context(), h.Host(), list, "lab")
	if err != nil {
		t.Fatalf("Kubeconfig(lab): %v", err)
	}
	if lab.Server != "lab.example.com:443" || !lab.TLS.RootCAs.Equal(ca.Pool()) {
		t.Errorf("lab's Server = %q, want lab.example.com:443 and the CA beside the second file", lab.Server)
	}
	wantToken(t, lab, "first-token") // its user "me" is the first file's
}

func TestKubeconfigListOfMissingFiles(t *testing.T) {
	_, err := kubeenv.Kubeconfig(t.Context(), workstation().Host(), "a:/b", "")

	want := strings.Join([]string{
		`kubeenv: kubeconfig reading /home/me/project/a: file does not exist`,
		`kubeenv: kubeconfig reading /b: file does not exist`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error =\n%v\nwant\n%s", err, want)
	}
}

func TestKubeconfigRefusesAnExecPlugin(t *testing.T) {
	h := workstation()
	write(t, h, "home/me/.kube/config", kubeconfig(t, "https://eks.example.com", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		u.Exec = &clientcmdapi.ExecConfig{Command: "aws", Args: []string{"eks", "get-token"}, APIVersion: "client.authentication.k8s.io/v1"}
	}))

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	want := `kubeenv: kubeconfig /home/me/.kube/config: context "dev": user "me": exec: not supported: kubeenv runs no credential plugin (here "aws"); ` +
		`fill kube.Connection.Token with the cloud's own SDK in your code instead, or use a token (kubectl create token)`
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error =\n%v\nwant\n%s", err, want)
	}
}

func TestKubeconfigNamesEveryProblemInOneError(t *testing.T) {
	h := workstation()
	write(t, h, "home/me/.kube/config", kubeconfig(t, "http://127.0.0.1:8080", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.CertificateAuthority = "ca.crt"
		c.CertificateAuthorityData = []byte("data")
		c.InsecureSkipTLSVerify = true
		c.ProxyURL = "http://proxy:3128"
		u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		u.Username, u.Password = "admin", "hunter2"
		u.Impersonate = "system:admin"
		u.ClientCertificateData = []byte("not a certificate")
		u.Token = "secret-token"
		u.TokenFile = "token"
	}))

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	at := `kubeenv: kubeconfig /home/me/.kube/config: context "dev": `
	want := strings.Join([]string{
		at + `cluster "dev": server: http://127.0.0.1:8080 isn't an https:// URL: a kube.Client always speaks TLS`,
		at + `cluster "dev": certificate-authority and certificate-authority-data: both set: keep one`,
		at + `cluster "dev": insecure-skip-tls-verify: not supported: a kube.Client always verifies the API server's certificate; ` +
			`give the CA that signed it in certificate-authority or certificate-authority-data instead`,
		at + `cluster "dev": proxy-url: not supported: a kube.Client dials the API server through its Host, never through a proxy; ` +
			`reach the API server directly instead, or give the Host a Dial that goes through the proxy`,
		at + `user "me": auth-provider: not supported: kubeenv runs no auth provider (here "oidc"); ` +
			`fill kube.Connection.Token with the provider's own SDK in your code instead, or use a token (kubectl create token)`,
		at + `user "me": username and password: not supported: basic auth, which kube-apiserver no longer accepts; use a token or a client certificate`,
		at + `user "me": as: not supported: impersonation; use a kubeconfig with the credentials of the identity itself`,
		at + `user "me": client-key: not set: a client certificate needs its key, in client-key or client-key-data`,
		at + `user "me": token and tokenFile: both set: keep one`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error =\n%v\nwant\n%s", err, want)
	}
	for _, secret := range []string{"hunter2", "secret-token"} {
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the error holds the secret %q", secret)
		}
	}
}

func TestKubeconfigServerThatIsntAURLKeepsItsPassword(t *testing.T) {
	h := workstation()
	write(t, h, "home/me/.kube/config", kubeconfig(t, "https://me:hunter2@dev.example.com:port", nil))

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	want := `kubeenv: kubeconfig /home/me/.kube/config: context "dev": cluster "dev": server: not a URL: invalid port ":port" after host`
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error = %v, want %s", err, want)
	}
}

func TestKubeconfigRefusesAServerWithAPath(t *testing.T) {
	h := workstation()
	write(t, h, "home/me/.kube/config", kubeconfig(t, "https://me:hunter2@rancher.example.com/k8s/clusters/c-m-1", nil))

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	want := `kubeenv: kubeconfig /home/me/.kube/config: context "dev": cluster "dev": server: https://me:xxxxx@rancher.example.com/k8s/clusters/c-m-1 ` +
		`has more than a host and a port, which kube.Connection.Server is: give the API server's own address`
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error = %v, want %s", err, want)
	}
}

// A server URL's query and fragment, where a token is sometimes placed,
// aren't shown, as its password isn't (issue 35).
func TestKubeconfigRedactsAServersQuery(t *testing.T) {
	h := workstation()
	write(t, h, "home/me/.kube/config", kubeconfig(t, "https://me:hunter2@proxy.example.com/k8s?token=s3cret#s3cret", nil))

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	want := `kubeenv: kubeconfig /home/me/.kube/config: context "dev": cluster "dev": server: https://me:xxxxx@proxy.example.com/k8s?token=xxxxx#xxxxx ` +
		`has more than a host and a port, which kube.Connection.Server is: give the API server's own address`
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error = %v, want %s", err, want)
	}
}

func TestKubeconfigNamesMissingFiles(t *testing.T) {
	h := workstation()
	write(t, h, "home/me/.kube/config", kubeconfig(t, "https://dev.example.com/", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.CertificateAuthority = "/etc/kubernetes/ca.crt"
		u.ClientCertificate = "me.crt"
		u.ClientKey = "me.key"
		u.TokenFile = "token"
	}))
	h.Files["home/me/.kube/me.key"] = &fstest.MapFile{Data: []byte("not a key")}
	h.Files["home/me/.kube/token"] = &fstest.MapFile{Data: []byte("\n")}

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	at := `kubeenv: kubeconfig /home/me/.kube/config: context "dev": `
	want := strings.Join([]string{
		at + `cluster "dev": certificate-authority: reading /etc/kubernetes/ca.crt: file does not exist`,
		at + `user "me": client-certificate: reading /home/me/.kube/me.crt: file does not exist`,
		at + `user "me": tokenFile: token file /home/me/.kube/token is empty`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error =\n%v\nwant\n%s", err, want)
	}
}

// Each problem is a line of its own, and every line is kubeenv's, naming
// the file, the context and the field.
func TestKubeconfigNamesAMissingCertificateAndKeyOnLinesOfTheirOwn(t *testing.T) {
	h := workstation()
	write(t, h, "home/me/.kube/config", kubeconfig(t, "https://dev.example.com", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		u.ClientCertificate = "me.crt"
		u.ClientKey = "me.key"
	}))

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	at := `kubeenv: kubeconfig /home/me/.kube/config: context "dev": user "me": `
	want := strings.Join([]string{
		at + `client-certificate: reading /home/me/.kube/me.crt: file does not exist`,
		at + `client-key: reading /home/me/.kube/me.key: file does not exist`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error =\n%v\nwant\n%s", err, want)
	}
}

func TestKubeconfigNamesAMissingClusterAndUser(t *testing.T) {
	h := workstation()
	cfg := kubeconfig(t, "https://dev.example.com", nil)
	cfg.Contexts["dev"] = &clientcmdapi.Context{Cluster: "staging", AuthInfo: "ci"}
	write(t, h, "home/me/.kube/config", cfg)

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	want := strings.Join([]string{
		`kubeenv: kubeconfig /home/me/.kube/config: context "dev": cluster "staging" isn't in the kubeconfig (it has dev)`,
		`kubeenv: kubeconfig /home/me/.kube/config: context "dev": user "ci" isn't in the kubeconfig (it has me)`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error =\n%v\nwant\n%s", err, want)
	}
}

func TestKubeconfigWithoutACurrentContext(t *testing.T) {
	h := workstation()
	cfg := kubeconfig(t, "https://dev.example.com", nil)
	cfg.CurrentContext = ""
	write(t, h, "home/me/.kube/config", cfg)

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	want := `kubeenv: kubeconfig /home/me/.kube/config has no current-context: name one of its contexts (dev)`
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig's error = %v, want %s", err, want)
	}
}

func TestKubeconfigThatIsntOne(t *testing.T) {
	h := workstation()
	h.Files["home/me/.kube/config"] = &fstest.MapFile{Data: []byte("clusters: [unclosed\n")}

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")

	if err == nil || !strings.HasPrefix(err.Error(), "kubeenv: kubeconfig /home/me/.kube/config: ") {
		t.Errorf("Kubeconfig's error = %v, want one naming the file", err)
	}
}

// An empty kubeconfig is one with nothing in it, as kubectl takes it, and
// a file of another kind is named.
func TestKubeconfigEmptyOrOfAnotherKind(t *testing.T) {
	h := workstation()
	h.Files["home/me/.kube/config"] = &fstest.MapFile{}
	h.Files["home/me/.kube/pod.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n")}

	_, err := kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/config", "")
	want := `kubeenv: kubeconfig /home/me/.kube/config has no current-context: name one of its contexts (none)`
	if err == nil || err.Error() != want {
		t.Errorf("Kubeconfig(an empty file)'s error = %v, want %s", err, want)
	}

	_, err = kubeenv.Kubeconfig(t.Context(), h.Host(), "/home/me/.kube/pod.yaml", "")
	want = `kubeenv: kubeconfig /home/me/.kube/pod.yaml: no kind "Pod" is registered for version "v1" in scheme`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Kubeconfig(a Pod)'s error = %v, want one starting %s (then the scheme's name, a line of apimachinery's source)", err, want)
	}
}

func TestKubeconfigWithAContextDoneReadsNothing(t *testing.T) {
	h := workstation()
	write(t, h, "home/me/.kube/config", kubeconfig(t, "https://dev.example.com", nil))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := kubeenv.Kubeconfig(ctx, h.Host(), "/home/me/.kube/config", "")

	want := "kubeenv: reading kubeconfig /home/me/.kube/config: context canceled"
	if err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
		t.Errorf("Kubeconfig's error = %v, want %s, wrapping context.Canceled", err, want)
	}
}

// wantToken checks that conn's Token returns want.
func wantToken(t *testing.T, conn kube.Connection, want string) {
	t.Helper()
	if conn.Token == nil {
		t.Errorf("Token is nil, want one returning %q", want)
		return
	}
	if token, err := conn.Token(context.Background()); token != want || err != nil {
		t.Errorf("Token() = %q, %v, want %q", token, err, want)
	}
}
