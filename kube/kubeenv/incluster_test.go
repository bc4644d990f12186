package kubeenv_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/kubeenv"
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
	h.Files[clustertest.CAFile] = &fstest.MapFile{Data: ca.PEM()}
	h.Files[clustertest.TokenFile] = &fstest.MapFile{Data: []byte("eyJhbGciOi.payload.sig\n")}
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
	h.Files[clustertest.TokenFile] = &fstest.MapFile{Data: []byte("eyJhbGciOi.rotated.sig\n")}
	wantToken(t, conn, "eyJhbGciOi.rotated.sig")
}

func TestInClusterNamesEveryProblemInOneError(t *testing.T) {
	h, _ := pod(t)
	delete(h.Env, "KUBERNETES_SERVICE_HOST")
	h.Env["KUBERNETES_SERVICE_PORT"] = "https"
	delete(h.Files, clustertest.TokenFile)
	h.Files[clustertest.CAFile] = &fstest.MapFile{Data: []byte("not a certificate")}

	_, err := kubeenv.InCluster(context.Background(), h.Host())

	want := strings.Join([]string{
		`kubeenv: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt: no PEM certificate in it`,
		`kubeenv: reading /var/run/secrets/kubernetes.io/serviceaccount/token: file does not exist`,
		`kubeenv: config: environment variable "KUBERNETES_SERVICE_HOST" is not set`,
		`kubeenv: config: environment variable "KUBERNETES_SERVICE_PORT": invalid value "https": strconv.Atoi: parsing "https": invalid syntax`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("InCluster's error =\n%v\nwant\n%s", err, want)
	}
}

func TestInClusterNamesAMissingCAAndAPortOutOfRange(t *testing.T) {
	h, _ := pod(t)
	delete(h.Files, clustertest.CAFile)
	h.Env["KUBERNETES_SERVICE_PORT"] = "0"

	_, err := kubeenv.InCluster(context.Background(), h.Host())

	want := strings.Join([]string{
		`kubeenv: reading /var/run/secrets/kubernetes.io/serviceaccount/ca.crt: file does not exist`,
		`kubeenv: config: environment variable "KUBERNETES_SERVICE_PORT": invalid value "0": port 0 isn't from 1 to 65535`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("InCluster's error =\n%v\nwant\n%s", err, want)
	}
}

// Each line of InCluster's error is kubeenv's, and the ones config found
// still wrap config's, which names the variable.
func TestInClusterErrorIsKubeenvsOnEveryLine(t *testing.T) {
	h, _ := pod(t)
	delete(h.Env, "KUBERNETES_SERVICE_HOST")
	delete(h.Env, "KUBERNETES_SERVICE_PORT")
	delete(h.Files, clustertest.TokenFile)

	_, err := kubeenv.InCluster(t.Context(), h.Host())

	if err == nil {
		t.Fatal("InCluster returned no error")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, line := range lines {
		if !strings.HasPrefix(line, "kubeenv: ") {
			t.Errorf("a line of InCluster's error isn't kubeenv's: %s", line)
		}
	}
	if len(lines) != 3 {
		t.Errorf("InCluster's error has %d lines, want 3, one each for the token and the two variables:\n%v", len(lines), err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("InCluster's error doesn't wrap fs.ErrNotExist, for the token file")
	}
}

func TestInClusterWithAContextDoneReadsNothing(t *testing.T) {
	h, _ := pod(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := kubeenv.InCluster(ctx, h.Host())

	want := "kubeenv: reading the pod's connection: context canceled"
	if err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
		t.Errorf("InCluster's error = %v, want %s, wrapping context.Canceled", err, want)
	}
}
