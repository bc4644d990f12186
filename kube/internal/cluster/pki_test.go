package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"
)

func TestAuthority(t *testing.T) {
	ca, err := newAuthority()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.pem) {
		t.Fatal("the CA's PEM holds no certificate")
	}

	certPEM, keyPEM, err := ca.serving()
	if err != nil {
		t.Fatal(err)
	}
	serving := parse(t, certPEM, keyPEM)
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := serving.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("the serving certificate for %s: %v", name, err)
		}
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
