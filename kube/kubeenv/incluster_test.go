package kubeenv_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/kubeenv"
)

// The service account's files in a Host's FS, whose paths have no leading
// slash.
const (
	caFile    = "var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	tokenFile = "var/run/secrets/kubernetes.io/serviceaccount/token"
)

// pod is a Host as the kubelet sets up a pod, on an IPv6 Service address,
// with the downward API's POD_NAMESPACE and POD_NAME.
func pod(t testing.TB) (*humustest.Host, *clustertest.CA) {
	t.Helper()
	ca := newCA(t)
	h := humustest.NewHost()
	h.Env["KUBERNETES_SERVICE_HOST"] = "fd00::1"
	h.Env["KUBERNETES_SERVICE_PORT"] = "443"
	h.Env["POD_NAMESPACE"] = "memcached-system"
	h.Env["POD_NAME"] = "memcached-controller-7d9f-x2k4q"
	h.Files[caFile] = &fstest.MapFile{Data: ca.PEM()}
	h.Files[tokenFile] = &fstest.MapFile{Data: []byte("eyJhbGciOi.payload.sig\n")}
	return h, ca
}

func TestInCluster(t *testing.T) {
	h, ca := pod(t)

	conn, err := kubeenv.InCluster(context.Background(), h.Host())
	if err != nil {
		t.Fatalf("InCluster: %v", err)
	}

	if conn.Server != "[fd00::1]:443" {
		t.Errorf("Server = %q, want [fd00::1]:443", conn.Server)
	}
	if conn.TLS == nil || !conn.TLS.RootCAs.Equal(ca.Pool()) {
		t.Errorf("TLS = %+v, want the service account's CA alone in RootCAs", conn.TLS)
	}
	wantToken(t, conn, "eyJhbGciOi.payload.sig")

	// The kubelet rotates the projected token: Token reads it again.
	h.Files[tokenFile] = &fstest.MapFile{Data: []byte("eyJhbGciOi.rotated.sig\n")}
	wantToken(t, conn, "eyJhbGciOi.rotated.sig")
}

func TestInClusterNamesEveryProblemInOneError(t *testing.T) {
	h, _ := pod(t)
	delete(h.Env, "KUBERNETES_SERVICE_HOST")
	h.Env["KUBERNETES_SERVICE_PORT"] = "https"
	delete(h.Files, tokenFile)
	h.Files[caFile] = &fstest.MapFile{Data: []byte("not a certificate")}

	_, err := kubeenv.InCluster(context.Background(), h.Host())

	want := strings.Join([]string{
		`kubeenv: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt: no PEM certificate in it`,
		`kubeenv: reading /var/run/secrets/kubernetes.io/serviceaccount/token: file does not exist`,
		`config: environment variable "KUBERNETES_SERVICE_HOST" is not set`,
		`config: environment variable "KUBERNETES_SERVICE_PORT": invalid value "https": strconv.Atoi: parsing "https": invalid syntax`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("InCluster's error =\n%v\nwant\n%s", err, want)
	}
}

func TestInClusterNamesAMissingCAAndAPortOutOfRange(t *testing.T) {
	h, _ := pod(t)
	delete(h.Files, caFile)
	h.Env["KUBERNETES_SERVICE_PORT"] = "0"

	_, err := kubeenv.InCluster(context.Background(), h.Host())

	want := strings.Join([]string{
		`kubeenv: reading /var/run/secrets/kubernetes.io/serviceaccount/ca.crt: file does not exist`,
		`config: environment variable "KUBERNETES_SERVICE_PORT": invalid value "0": port 0 isn't from 1 to 65535`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("InCluster's error =\n%v\nwant\n%s", err, want)
	}
}
