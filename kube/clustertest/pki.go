package clustertest

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
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// A CA is a self-signed certificate authority with a fresh P-256 key. The
// control plane's CA signed kube-apiserver's serving certificate, and
// kube-apiserver trusts it for client certificates (ClientCert); a test
// that needs a CA of its own, such as one a connection mustn't trust, or a
// server's without a control plane, makes one with NewCA. Its certificates
// are valid from 1990 to 2100, so a synctest bubble's clock, which starts
// in 2000, accepts them as the real clock does.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// NewCA makes a CA named commonName.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("clustertest: making the key of CA %q: %w", commonName, err)
	}
	tmpl := template(pkix.Name{CommonName: commonName})
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("clustertest: making CA %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("clustertest: making CA %q: %w", commonName, err)
	}
	return &CA{cert: cert, key: key, pem: pemBlock("CERTIFICATE", der)}, nil
}

// PEM is the CA's certificate, PEM-encoded.
func (a *CA) PEM() []byte { return append([]byte(nil), a.pem...) }

// Pool is a pool holding the CA alone.
func (a *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(a.cert)
	return pool
}

// Serving issues a server certificate for hosts, each a DNS name or an IP
// address, named after the first, as PEM.
func (a *CA) Serving(hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("clustertest: a serving certificate for no host")
	}
	tmpl := template(pkix.Name{CommonName: hosts[0]})
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	return a.issue(tmpl)
}

// client issues a client certificate for user in groups, as PEM:
// kube-apiserver reads the user from the common name and the groups from
// the organizations.
func (a *CA) client(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	tmpl := template(pkix.Name{CommonName: user, Organization: groups})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return a.issue(tmpl)
}

// issue signs tmpl for a fresh P-256 key.
func (a *CA) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("clustertest: making a key for %q: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("clustertest: signing a certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err = privateKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), keyPEM, nil
}

// template is a certificate for subject valid from 1990 to 2100, with a
// random serial number.
func template(subject pkix.Name) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	}
}

// signingKey makes the key pair kube-apiserver signs and checks
// service-account tokens with, as PEM.
func signingKey() (privatePEM, publicPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("clustertest: making the service-account signing key: %w", err)
	}
	privatePEM, err = privateKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("clustertest: encoding the service-account key: %w", err)
	}
	return privatePEM, pemBlock("PUBLIC KEY", pub), nil
}

func privateKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("clustertest: encoding a key: %w", err)
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
