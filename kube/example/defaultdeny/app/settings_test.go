package app

import (
	"context"
	"testing"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
)

// kubeenv's tests cover what every controller reads; this is what differs:
// the name, and no namespace to watch.
func TestReadSettingsInAPod(t *testing.T) {
	h := clustertest.OfflinePodHost(t, "default-deny", "default-deny-5c7b9-qx2lm")
	h.Env["WATCH_NAMESPACE"] = "shop" // not read: a Namespace is cluster-scoped

	got, err := readSettings(context.Background(), &humus.Setup{Host: h.Host()})
	if err != nil {
		t.Fatalf("readSettings: %v", err)
	}
	want := kube.DefaultSettings()
	want.Name = "default-deny"
	want.LeaderElection.Namespace = "default-deny"
	want.LeaderElection.Identity = "default-deny-5c7b9-qx2lm"
	if got.controller != want {
		t.Errorf("Settings = %+v, want %+v", got.controller, want)
	}
	if got.conn.Server != "10.96.0.1:443" || got.conn.TLS.RootCAs == nil || got.probesAddr != ":8081" {
		t.Errorf("Server, RootCAs, probes = %q, %v, %q, want 10.96.0.1:443, the CA, :8081", got.conn.Server, got.conn.TLS.RootCAs, got.probesAddr)
	}
}
