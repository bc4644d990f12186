package clustertest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"
	"time"
)

func TestCA(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM()) {
		t.Fatal("the CA's PEM holds no certificate")
	}

	certPEM, keyPEM, err := ca.Serving("localhost", "127.0.0.1", "::1")
	if err != nil {
		t.Fatal(err)
	}
	serving := parse(t, certPEM, keyPEM)
	// A synctest bubble's clock starts in 2000.
	for _, at := range []time.Time{time.Now(), time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		for _, name := range []string{"127.0.0.1", "::1", "localhost"} {
			if _, err := serving.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.Pool(), CurrentTime: at}); err != nil {
				t.Errorf("the serving certificate for %s at %s: %v", name, at.Format(time.DateOnly), err)
			}
		}
	}
	if _, _, err := ca.Serving(); err == nil {
		t.Error("a serving certificate for no host: no error")
	}

	certPEM, keyPEM, err = ca.client("alice", []string{"team-a", "team-b"})
	if err != nil {
		t.Fatal(err)
	}
	client := parse(t, certPEM, keyPEM)
	if _, err := client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the client certificate: %v", err)
	}
	if client.Subject.CommonName != "alice" || !slices.Equal(client.Subject.Organization, []string{"team-a", "team-b"}) {
		t.Errorf("the client certificate's subject is %v, want CN=alice, O=team-a+team-b", client.Subject)
	}
}

func TestSigningKey(t *testing.T) {
	private, public, err := signingKey()
	if err != nil {
		t.Fatal(err)
	}
	for data, kind := range map[string]string{string(private): "EC PRIVATE KEY", string(public): "PUBLIC KEY"} {
		if block, _ := pem.Decode([]byte(data)); block == nil || block.Type != kind {
			t.Errorf("want a PEM %s, got %q", kind, data)
		}
	}
}

// parse checks that certPEM and keyPEM are a pair and returns the
// certificate.
func parse(t *testing.T, certPEM, keyPEM []byte) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
