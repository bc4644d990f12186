package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// An authority is the control plane's certificate authority: it signed
// kube-apiserver's serving certificate, kube-apiserver trusts it for client
// certificates, and it signs the ones a test asks for.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// newAuthority makes a self-signed CA with a fresh P-256 key.
func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cluster: making the CA's key: %w", err)
	}
	tmpl := template(pkix.Name{CommonName: "humus test control plane CA"})
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("cluster: making the CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("cluster: making the CA: %w", err)
	}
	return &authority{cert: cert, key: key, pem: pemBlock("CERTIFICATE", der)}, nil
}

// serving issues a server certificate for 127.0.0.1 and localhost, as PEM.
func (a *authority) serving() (certPEM, keyPEM []byte, err error) {
	tmpl := template(pkix.Name{CommonName: "localhost"})
	tmpl.DNSNames = []string{"localhost"}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	return a.issue(tmpl)
}

// client issues a client certificate for user in groups, as PEM:
// kube-apiserver reads the user from the common name and the groups from
// the organizations.
func (a *authority) client(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	tmpl := template(pkix.Name{CommonName: user, Organization: groups})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return a.issue(tmpl)
}

// issue signs tmpl for a fresh P-256 key.
func (a *authority) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: making a key for %q: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: signing a certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err = privateKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), keyPEM, nil
}

// template is a certificate for subject valid from an hour ago for ten
// years, with a random serial number.
func template(subject pkix.Name) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
	}
}

// signingKey makes the key pair kube-apiserver signs and checks
// service-account tokens with, as PEM.
func signingKey() (privatePEM, publicPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: making the service-account signing key: %w", err)
	}
	privatePEM, err = privateKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: encoding the service-account key: %w", err)
	}
	return privatePEM, pemBlock("PUBLIC KEY", pub), nil
}

func privateKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("cluster: encoding a key: %w", err)
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

// tlsConfig trusts only pool.
func tlsConfig(pool *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// newToken is a random bearer token.
func newToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}
