package podenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/example/internal/apptest"
)

// pod is what an App reads with podenv, as the examples' readSettings do.
type pod struct {
	conn       kube.Connection
	controller kube.Settings
	probesAddr string
}

// read reads a pod from h as an App does: the Connection, then the
// settings in one config.Struct, every problem joined in one error.
func read(h *humustest.Host) (pod, error) {
	host := h.Host()
	conn, connErr := ReadConnection(context.Background(), host)
	p, setErr := config.Struct(func(r *config.Resolver) pod {
		return pod{controller: Controller(r, host, "memcached-controller"), probesAddr: ProbesAddr(r, host)}
	}).Read(context.Background())
	if err := errors.Join(connErr, setErr); err != nil {
		return pod{}, err
	}
	p.conn = conn
	return p, nil
}

// podHost is a Host as the kubelet sets up a pod, on an IPv6 Service
// address.
func podHost(t *testing.T) *humustest.Host {
	h := apptest.PodHost(t, "memcached-system", "memcached-controller-7d9f-x2k4q")
	h.Env["KUBERNETES_SERVICE_HOST"] = "fd00::1"
	return h
}

func TestReadInAPod(t *testing.T) {
	got, err := read(podHost(t))
	if err != nil {
		t.Fatalf("read: %v", err)
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

func TestReadOverrides(t *testing.T) {
	h := podHost(t)
	h.Env["WORKERS"] = "4"
	h.Env["PROBES_ADDR"] = "127.0.0.1:9000"

	got, err := read(h)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if got.controller.Namespace != "" || got.controller.Workers != 4 || got.probesAddr != "127.0.0.1:9000" {
		t.Errorf("Namespace, Workers, probes = %q, %d, %q, want \"\", 4, 127.0.0.1:9000",
			got.controller.Namespace, got.controller.Workers, got.probesAddr)
	}
}

func TestReadNamesEveryProblemInOneError(t *testing.T) {
	h := podHost(t)
	delete(h.Env, "KUBERNETES_SERVICE_PORT")
	delete(h.Env, "POD_NAME")
	delete(h.Files, serviceAccount+"token")
	h.Files[serviceAccount+"ca.crt"] = &fstest.MapFile{Data: []byte("not a certificate")}
	h.Env["POD_NAMESPACE"] = "Memcached_System"
	h.Env["WORKERS"] = "0"

	_, err := read(h)

	want := strings.Join([]string{
		`podenv: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt: no PEM certificate in it`,
		`podenv: reading /var/run/secrets/kubernetes.io/serviceaccount/token: file does not exist`,
		`config: environment variable "KUBERNETES_SERVICE_PORT" is not set`,
		`config: environment variable "WORKERS": invalid value "0": kube: workers 0 must be at least 1`,
		`config: environment variable "POD_NAMESPACE": invalid value "Memcached_System": kube: namespace "Memcached_System" must be a DNS-1123 label: ` +
			`a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		`config: environment variable "POD_NAME" is not set`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("read's error =\n%v\nwant\n%s", err, want)
	}
}
