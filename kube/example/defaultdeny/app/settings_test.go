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
	"testing"
	"testing/fstest"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
)

// The Memcached example's tests cover readSettings whole; this is what
// differs: the name, and no namespace to watch.
func TestReadSettingsInAPod(t *testing.T) {
	h := humustest.NewHost()
	h.Env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
	h.Env["KUBERNETES_SERVICE_PORT"] = "443"
	h.Env["POD_NAMESPACE"] = "default-deny"
	h.Env["POD_NAME"] = "default-deny-5c7b9-qx2lm"
	h.Env["WATCH_NAMESPACE"] = "shop" // not read: a Namespace is cluster-scoped
	h.Files[serviceAccount+"ca.crt"] = &fstest.MapFile{Data: caPEM(t)}
	h.Files[serviceAccount+"token"] = &fstest.MapFile{Data: []byte("eyJhbGciOi.payload.sig\n")}

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
