package app

import (
	"context"
	"strings"
	"testing"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
)

// kubeenv's tests cover what every controller reads; these cover what is
// this App's own: its name, the namespace it may be limited to, and where
// its probes are served.

func TestReadSettingsInAPod(t *testing.T) {
	h := clustertest.OfflinePodHost(t, "memcached-system", "memcached-controller-7d9f-x2k4q")

	got, err := readSettings(context.Background(), &humus.Setup{Host: h.Host()})
	if err != nil {
		t.Fatalf("readSettings: %v", err)
	}

	want := kube.DefaultSettings()
	want.Name = "memcached-controller"
	want.LeaderElection.Namespace = "memcached-system"
	want.LeaderElection.Identity = "memcached-controller-7d9f-x2k4q"
	if got.controller != want {
		t.Errorf("Settings = %+v, want %+v", got.controller, want)
	}
	if got.conn.Server != "10.96.0.1:443" || got.conn.TLS == nil || got.conn.TLS.RootCAs == nil || got.probesAddr != ":8081" {
		t.Errorf("Server, TLS, probes = %q, %+v, %q, want 10.96.0.1:443, the CA in RootCAs, :8081", got.conn.Server, got.conn.TLS, got.probesAddr)
	}
}

func TestReadSettingsWatchesOneNamespace(t *testing.T) {
	h := clustertest.OfflinePodHost(t, "memcached-system", "memcached-controller-7d9f-x2k4q")
	h.Env["WATCH_NAMESPACE"] = "shop"

	got, err := readSettings(context.Background(), &humus.Setup{Host: h.Host()})
	if err != nil {
		t.Fatalf("readSettings: %v", err)
	}
	if got.controller.Namespace != "shop" {
		t.Errorf("Namespace = %q, want shop", got.controller.Namespace)
	}
}

func TestReadSettingsServesTheProbesWherePROBES_ADDRSays(t *testing.T) {
	h := clustertest.OfflinePodHost(t, "memcached-system", "memcached-controller-7d9f-x2k4q")
	h.Env["PROBES_ADDR"] = "127.0.0.1:9000"

	got, err := readSettings(context.Background(), &humus.Setup{Host: h.Host()})
	if err != nil {
		t.Fatalf("readSettings: %v", err)
	}
	if got.probesAddr != "127.0.0.1:9000" {
		t.Errorf("probes' address = %q, want 127.0.0.1:9000", got.probesAddr)
	}
}

func TestReadSettingsNamesEveryProblemInOneError(t *testing.T) {
	h := clustertest.OfflinePodHost(t, "memcached-system", "memcached-controller-7d9f-x2k4q")
	delete(h.Env, "KUBERNETES_SERVICE_PORT")
	delete(h.Env, "POD_NAME")
	h.Env["WATCH_NAMESPACE"] = "Shop" // not a DNS-1123 label

	_, err := readSettings(context.Background(), &humus.Setup{Host: h.Host()})

	want := strings.Join([]string{
		`kubeenv: config: environment variable "KUBERNETES_SERVICE_PORT" is not set`,
		`config: environment variable "POD_NAME" is not set`,
		`config: environment variable "WATCH_NAMESPACE": invalid value "Shop": kube: namespace "Shop" must be a DNS-1123 label: ` +
			`a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("readSettings's error =\n%v\nwant\n%s", err, want)
	}
}
