package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io/fs"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/z5labs/humus/humustest"
)

// selfSigned returns a certificate and its key, PEM.
func selfSigned(t *testing.T, serial int64) (cert, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "webhook.default.svc"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// swappingFS serves before's files until the certificate has been opened
// once, and after's from then on: a kubelet's swap of a Secret volume
// between the reads of its two files.
type swappingFS struct {
	mu            sync.Mutex
	before, after fstest.MapFS
	swapped       bool
}

func (f *swappingFS) Open(name string) (fs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.swapped {
		return f.after.Open(name)
	}
	if strings.HasSuffix(name, "tls.crt") {
		f.swapped = true
	}
	return f.before.Open(name)
}

// A renewal swapped in between the reads of the certificate and the key is
// read again whole, and serves: not refused as a key of another
// certificate.
func TestRenewalSwappedBetweenReads(t *testing.T) {
	oldCert, oldKey := selfSigned(t, 1)
	newCert, newKey := selfSigned(t, 2)
	files := func(cert, key []byte) fstest.MapFS {
		return fstest.MapFS{"tls/tls.crt": {Data: cert}, "tls/tls.key": {Data: key}}
	}
	h := humustest.NewHost().Host()
	tel := humustest.NewTelemetry()
	h.FS = files(oldCert, oldKey)
	now := time.Now()
	c := &certificates{
		host: h, certPath: "/tls/tls.crt", keyPath: "/tls/tls.key",
		every: time.Second, now: func() time.Time { return now },
		log: slog.New(slog.DiscardHandler),
	}
	if err := c.load(); err != nil {
		t.Fatal(err)
	}
	c.log = slog.New(otelslog.NewHandler(scope, otelslog.WithLoggerProvider(tel.Telemetry().LoggerProvider)))
	c.host.FS = &swappingFS{before: files(oldCert, oldKey), after: files(newCert, newKey)}
	now = now.Add(time.Second)

	got, err := c.get(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Leaf.SerialNumber.Int64() != 2 {
		t.Errorf("served the certificate of serial %v, want the renewed one, 2", got.Leaf.SerialNumber)
	}
	for _, r := range tel.Records() {
		if r.Severity() >= otellog.SeverityError {
			t.Errorf("recorded %q", r.Body().AsString())
		}
	}
}
