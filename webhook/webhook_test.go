package webhook_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/webhook"
)

// ca is a certificate authority of a test's own, which the test's client
// trusts, as the API server trusts a webhook's caBundle.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

var serial atomic.Int64

func newCA(t *testing.T) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: "webhook test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &ca{cert: cert, key: key, pool: pool}
}

// pair is a serving certificate and its key, PEM, as cert-manager writes
// them into a Secret's tls.crt and tls.key.
type pair struct {
	cert, key []byte
	serial    *big.Int
}

// issue returns a serving certificate for 127.0.0.1, valid from notBefore
// to notAfter.
func (c *ca) issue(t *testing.T, notBefore, notAfter time.Time) pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: "webhook.default.svc"},
		DNSNames:     []string{"webhook.default.svc"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pair{
		cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		serial: tmpl.SerialNumber,
	}
}

// valid returns a certificate valid now, for an hour.
func (c *ca) valid(t *testing.T) pair {
	return c.issue(t, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
}

// volume is a Secret volume as a kubelet writes it: the files in a
// timestamped folder, ..data a symlink to it, and tls.crt and tls.key
// symlinks through ..data. Renewing swaps ..data at once.
type volume struct {
	t    *testing.T
	dir  string
	next int
}

func newVolume(t *testing.T, dir string, p pair) *volume {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	v := &volume{t: t, dir: dir}
	v.write(p)
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// write puts p in a new timestamped folder, and swaps ..data to it.
func (v *volume) write(p pair) {
	v.t.Helper()
	v.next++
	ts := fmt.Sprintf("..2026_12_06_05_00_%02d", v.next)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		v.t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": p.cert, "tls.key": p.key} {
		if err := os.WriteFile(filepath.Join(v.dir, ts, name), b, 0o600); err != nil {
			v.t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
}

// hostOn returns a test Host whose FS is the folder root, and whose
// working directory is /app in it.
func hostOn(root string) humus.Host {
	h := humustest.NewHost().Host()
	h.FS = os.DirFS(root)
	h.Dir = "/app"
	return h
}

// serve runs svc until the test ends, and returns its address.
func serve(t *testing.T, svc *webhook.Service) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := svc.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	addr, err := svc.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return addr.String()
}

// client returns an HTTPS client that trusts c, dialling through h, with a
// connection of its own for each request, so each is a handshake.
func (c *ca) client(h humus.Host) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:       h.Dial,
		TLSClientConfig:   &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
}

// served returns the serial number of the certificate a handshake with
// addr is served.
func (c *ca) served(t *testing.T, h humus.Host, addr string) *big.Int {
	t.Helper()
	resp, err := c.client(h).Post("https://"+addr+"/convert", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.TLS.PeerCertificates[0].SerialNumber
}

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

// A handler served over TLS, listening and reading its certificate through
// the Host, a relative CertDir taken against Host.Dir; a span a request,
// under the request's trace context; Ready while serving.
func TestServe(t *testing.T) {
	root := t.TempDir()
	authority := newCA(t)
	first := authority.valid(t)
	newVolume(t, filepath.Join(root, "app", "certs"), first)
	h := hostOn(root)
	tel := humustest.NewTelemetry()

	svc, err := webhook.NewService(&humus.Setup{Host: h, Telemetry: tel.Telemetry()},
		webhook.Settings{Addr: "127.0.0.1:0", CertDir: "certs"}, echo())
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Ready().Healthy(context.Background()); err == nil {
		t.Error("Ready is healthy before Serve")
	}
	addr := serve(t, svc)
	if err := svc.Ready().Healthy(context.Background()); err != nil {
		t.Errorf("Ready while serving: %v", err)
	}

	req, err := http.NewRequest(http.MethodPost, "https://"+addr+"/convert", strings.NewReader(`{"kind":"ConversionReview"}`))
	if err != nil {
		t.Fatal(err)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := authority.client(h).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != `{"kind":"ConversionReview"}` {
		t.Errorf("got %d %q, want 200 and the body echoed", resp.StatusCode, body)
	}
	if got := resp.TLS.PeerCertificates[0].SerialNumber; got.Cmp(first.serial) != 0 {
		t.Errorf("served certificate %v, want %v", got, first.serial)
	}

	spans := tel.Spans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	span := spans[0]
	if span.Name() != "POST" || span.SpanKind() != trace.SpanKindServer || span.Parent().TraceID().String() != traceID {
		t.Errorf("span %q, kind %v, parent trace %s; want POST, server, %s", span.Name(), span.SpanKind(), span.Parent().TraceID(), traceID)
	}
	want := map[attribute.Key]string{"url.path": "/convert", "http.response.status_code": "200", "http.request.method": "POST"}
	for _, a := range span.Attributes() {
		if w, ok := want[a.Key]; ok {
			if a.Value.String() != w {
				t.Errorf("span attribute %s = %s, want %s", a.Key, a.Value.String(), w)
			}
			delete(want, a.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("span lacks attributes %v", want)
	}
}

// records returns the log records of severity sev, each its body and
// attributes.
func records(tel *humustest.Telemetry, sev otellog.Severity) []string {
	var out []string
	for _, r := range tel.Records() {
		if r.Severity() != sev {
			continue
		}
		var b strings.Builder
		b.WriteString(r.Body().AsString())
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.String())
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// A renewed certificate, swapped in as a kubelet swaps a Secret volume's
// files, is served on the next handshake after CheckEvery, without a
// restart; a renewed pair that can't serve leaves the one before it
// serving, and is recorded once.
func TestRenewal(t *testing.T) {
	root := t.TempDir()
	authority := newCA(t)
	first := authority.valid(t)
	vol := newVolume(t, filepath.Join(root, "etc", "webhook", "tls"), first)
	h := hostOn(root)
	tel := humustest.NewTelemetry()
	const every = 20 * time.Millisecond
	svc, err := webhook.NewService(&humus.Setup{Host: h, Telemetry: tel.Telemetry()},
		webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/etc/webhook/tls", CheckEvery: every}, echo())
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, svc)
	servedNext := func() *big.Int {
		t.Helper()
		time.Sleep(every + 5*time.Millisecond)
		return authority.served(t, h, addr)
	}

	if got := authority.served(t, h, addr); got.Cmp(first.serial) != 0 {
		t.Fatalf("served %v, want the first certificate %v", got, first.serial)
	}
	second := authority.valid(t)
	vol.write(second)
	if got := servedNext(); got.Cmp(second.serial) != 0 {
		t.Fatalf("after the renewal, served %v, want the second certificate %v", got, second.serial)
	}
	if got := records(tel, otellog.SeverityInfo); len(got) != 1 || !strings.Contains(got[0], "serving a renewed certificate") {
		t.Errorf("info records %q, want one of the renewal", got)
	}

	// Bad renewals: a key of another certificate, then an expired
	// certificate. The second keeps serving through both, each recorded
	// once however many handshakes see it.
	third := authority.valid(t)
	vol.write(pair{cert: third.cert, key: first.key})
	for range 2 {
		if got := servedNext(); got.Cmp(second.serial) != 0 {
			t.Fatalf("after a renewal with another certificate's key, served %v, want the second certificate %v still", got, second.serial)
		}
	}
	vol.write(authority.issue(t, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)))
	for range 2 {
		if got := servedNext(); got.Cmp(second.serial) != 0 {
			t.Fatalf("after a renewal with an expired certificate, served %v, want the second certificate %v still", got, second.serial)
		}
	}
	errs := records(tel, otellog.SeverityError)
	if len(errs) != 2 ||
		!strings.Contains(errs[0], "private key does not match public key") ||
		!strings.Contains(errs[1], `the certificate "/etc/webhook/tls/tls.crt" expired at`) {
		t.Errorf("error records %q, want one for the key of another certificate, then one for the expired certificate", errs)
	}
	for _, r := range errs {
		if !strings.Contains(r, "the one before it keeps serving") {
			t.Errorf("error record %q doesn't say the one before keeps serving", r)
		}
	}

	// A good renewal after the bad ones serves.
	fourth := authority.valid(t)
	vol.write(fourth)
	if got := servedNext(); got.Cmp(fourth.serial) != 0 {
		t.Fatalf("after a good renewal, served %v, want the fourth certificate %v", got, fourth.serial)
	}
}

// NewService returns every mistake in its settings and the files at once,
// each naming the value and what is wrong.
func TestNewServiceErrors(t *testing.T) {
	root := t.TempDir()
	authority := newCA(t)
	good := authority.valid(t)
	other := authority.valid(t)
	expired := authority.issue(t, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	early := authority.issue(t, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
	writeFiles(t, root, map[string]pair{
		"nokey":    {cert: good.cert},
		"mismatch": {cert: good.cert, key: other.key},
		"expired":  expired,
		"early":    early,
		"notpem":   {cert: []byte("not a certificate"), key: good.key},
	})
	writeFiles(t, root, map[string]pair{"named": good}, "serving.pem", "serving-key.pem")
	h := hostOn(root)

	for _, tc := range newServiceErrorCases(expiredAt(t, expired)) {
		t.Run(tc.name, func(t *testing.T) {
			_, err := webhook.NewService(&humus.Setup{Host: h}, tc.settings, tc.handler)
			if err == nil {
				t.Fatal("NewService returned no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("NewService's error has %d lines, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewService's error lacks %q:\n%v", w, err)
				}
			}
		})
	}

	// A Setup whose Host has no FS, made by hand, is an error, not a panic.
	if _, err := webhook.NewService(&humus.Setup{}, webhook.Settings{Addr: ":9443", CertDir: "/tls"}, echo()); err == nil ||
		!strings.Contains(err.Error(), "webhook: NewService: the Setup's Host has no FS or no Listen") {
		t.Errorf("NewService on a zero Host returned %v, want an error saying so", err)
	}

	// And the files named otherwise, named so, serve.
	if _, err := webhook.NewService(&humus.Setup{Host: h}, webhook.Settings{
		Addr: ":9443", CertDir: "/named", CertName: "serving.pem", KeyName: "serving-key.pem",
	}, echo()); err != nil {
		t.Errorf("NewService with CertName and KeyName: %v", err)
	}
}

// writeFiles writes each pair into the folder of root its key names, as
// tls.crt and tls.key, or the names given; an empty file isn't written.
func writeFiles(t *testing.T, root string, pairs map[string]pair, names ...string) {
	t.Helper()
	certName, keyName := "tls.crt", "tls.key"
	if len(names) == 2 {
		certName, keyName = names[0], names[1]
	}
	for dir, p := range pairs {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{certName: p.cert, keyName: p.key} {
			if b == nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(root, dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

type newServiceCase struct {
	name     string
	settings webhook.Settings
	handler  http.Handler
	want     []string // each in the error, one a line
}

// newServiceErrorCases are TestNewServiceErrors' settings, of the folders
// it writes, and the mistakes NewService finds in them.
func newServiceErrorCases(expiredAt string) []newServiceCase {
	return []newServiceCase{{
		name:     "several at once",
		settings: webhook.Settings{Addr: "localhost", CertDir: "/nokey", CheckEvery: -time.Second},
		want: []string{
			`webhook: Settings.Addr "localhost" isn't a host and port, such as ":9443": missing port in address`,
			`webhook: Settings.CheckEvery -1s is negative`,
			`webhook: NewService: a nil handler`,
			`webhook: the key file "/nokey/tls.key" doesn't exist`,
		},
	}, {
		name:     "nothing set",
		settings: webhook.Settings{},
		handler:  echo(),
		want: []string{
			`webhook: Settings.Addr is empty`,
			`webhook: Settings.CertDir is empty`,
		},
	}, {
		name:     "neither file",
		settings: webhook.Settings{Addr: ":9443", CertDir: "missing"},
		handler:  echo(),
		want: []string{
			`webhook: the certificate file "missing/tls.crt" doesn't exist`,
			`webhook: the key file "missing/tls.key" doesn't exist`,
		},
	}, {
		name:     "a port out of range",
		settings: webhook.Settings{Addr: "0.0.0.0:70000", CertDir: "/mismatch"},
		handler:  echo(),
		want: []string{
			`webhook: Settings.Addr "0.0.0.0:70000": the port "70000" isn't a number from 0 to 65535`,
			`webhook: the certificate "/mismatch/tls.crt" and key "/mismatch/tls.key": tls: private key does not match public key`,
		},
	}, {
		name:     "expired",
		settings: webhook.Settings{Addr: ":9443", CertDir: "/expired"},
		handler:  echo(),
		want:     []string{`webhook: the certificate "/expired/tls.crt" expired at ` + expiredAt},
	}, {
		name:     "not valid yet",
		settings: webhook.Settings{Addr: ":9443", CertDir: "/early"},
		handler:  echo(),
		want:     []string{`webhook: the certificate "/early/tls.crt" isn't valid until `},
	}, {
		name:     "not PEM",
		settings: webhook.Settings{Addr: ":9443", CertDir: "/notpem"},
		handler:  echo(),
		want:     []string{`webhook: the certificate "/notpem/tls.crt" and key "/notpem/tls.key": tls: failed to find any PEM data in certificate input`},
	}, {
		name:     "files named otherwise",
		settings: webhook.Settings{Addr: ":9443", CertDir: "/named"},
		handler:  echo(),
		want: []string{
			`webhook: the certificate file "/named/tls.crt" doesn't exist`,
			`webhook: the key file "/named/tls.key" doesn't exist`,
		},
	}}
}

func expiredAt(t *testing.T, p pair) string {
	t.Helper()
	block, _ := pem.Decode(p.cert)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.NotAfter.UTC().Format(time.RFC3339)
}

// answer is a request's answer, or why there is none.
type answer struct {
	body string
	err  error
}

// post sends a request to addr in the background, and returns where its
// answer arrives.
func (c *ca) post(h humus.Host, addr string) <-chan answer {
	answered := make(chan answer, 1)
	go func() {
		resp, err := c.client(h).Post("https://"+addr+"/convert", "application/json", strings.NewReader("{}"))
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{body: string(b), err: err}
	}()
	return answered
}

// Once its context is done, Serve stops accepting connections and
// returns; Shutdown lets the request in flight finish, and returns once it
// has, or with its context's error when that ends first.
func TestShutdownDrains(t *testing.T) {
	root := t.TempDir()
	authority := newCA(t)
	newVolume(t, filepath.Join(root, "tls"), authority.valid(t))
	h := hostOn(root)
	entered, release := make(chan struct{}), make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "converted")
	})
	svc, err := webhook.NewService(&humus.Setup{Host: h}, webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/tls"}, handler)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx) }()
	addr, err := svc.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}

	answered := authority.post(h, addr.String())
	<-entered

	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve returned %v once its context was done, want nil", err)
	}
	if err := svc.Ready().Healthy(context.Background()); err == nil {
		t.Error("Ready is healthy once Serve has returned")
	}
	if conn, err := h.Dial(context.Background(), "tcp", addr.String()); err == nil {
		_ = conn.Close()
		t.Error("a connection was accepted after Serve returned")
	}

	// A Shutdown whose context ends first says so, and leaves the
	// request be.
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := svc.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a request in flight past its context returned %v, want one wrapping context.DeadlineExceeded", err)
	}

	shut := make(chan error, 1)
	go func() { shut <- svc.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if a := <-answered; a.err != nil || a.body != "converted" {
		t.Errorf("the request in flight got %q, %v; want its answer", a.body, a.err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// The Service keeps humus.Service's contract, and leaves no goroutine
// behind.
func TestServiceContract(t *testing.T) {
	root := t.TempDir()
	authority := newCA(t)
	newVolume(t, filepath.Join(root, "tls"), authority.valid(t))
	h := hostOn(root)
	svc, err := webhook.NewService(&humus.Setup{Host: h}, webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/tls"}, echo())
	if err != nil {
		t.Fatal(err)
	}
	humustest.TestService(t, svc, humustest.During(func(ctx context.Context) {
		addr, err := svc.Addr(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		authority.served(t, h, addr.String())
	}))
}

// A listener that fails is Serve's error, naming the address.
func TestServeListenError(t *testing.T) {
	root := t.TempDir()
	authority := newCA(t)
	newVolume(t, filepath.Join(root, "tls"), authority.valid(t))
	h := hostOn(root)
	svc, err := webhook.NewService(&humus.Setup{Host: h}, webhook.Settings{Addr: "10.0.0.1:9443", CertDir: "/tls"}, echo())
	if err != nil {
		t.Fatal(err)
	}
	err = svc.Serve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "webhook: listening on 10.0.0.1:9443: ") {
		t.Errorf("Serve on an address the Host refuses returned %v, want an error naming it", err)
	}
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// A whole App through humus.Run: the webhook serves beside its readiness
// probe, and stops on the signal with exit code 0; an App whose key is
// missing never serves, and says why on stderr with exit code 1.
func TestApp(t *testing.T) {
	root := t.TempDir()
	authority := newCA(t)
	first := authority.valid(t)
	newVolume(t, filepath.Join(root, "etc", "webhook", "tls"), first)
	h := hostOn(root)
	addrs := make(chan string, 1)
	app := func(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
		hook, err := webhook.NewService(s, webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/etc/webhook/tls"}, echo())
		if err != nil {
			return nil, err
		}
		go func() {
			if a, err := hook.Addr(ctx); err == nil {
				addrs <- a.String()
			}
		}()
		return []humus.Service{hook}, nil
	}
	p := humustest.Start(t, h, app)
	if got := authority.served(t, h, <-addrs); got.Cmp(first.serial) != 0 {
		t.Errorf("served %v, want %v", got, first.serial)
	}
	p.Signal()
	if code := p.Wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}

	th := humustest.NewHost()
	missing := humustest.Start(t, th.Host(), func(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
		hook, err := webhook.NewService(s, webhook.Settings{Addr: ":9443", CertDir: "/etc/webhook/tls"}, echo())
		if err != nil {
			return nil, err
		}
		return []humus.Service{hook}, nil
	})
	if code := missing.Wait(); code != 1 {
		t.Errorf("exit code %d without a certificate, want 1", code)
	}
	for _, want := range []string{
		`webhook: the certificate file "/etc/webhook/tls/tls.crt" doesn't exist`,
		`webhook: the key file "/etc/webhook/tls/tls.key" doesn't exist`,
	} {
		if !strings.Contains(th.Stderr(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, th.Stderr())
		}
	}
}

// A handler that panics fails its request, not the App: its span's status
// is an error, and net/http's record of the panic is a log record.
func TestHandlerPanics(t *testing.T) {
	root := t.TempDir()
	authority := newCA(t)
	newVolume(t, filepath.Join(root, "tls"), authority.valid(t))
	h := hostOn(root)
	tel := humustest.NewTelemetry()
	panics := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a conversion gone wrong") })
	svc, err := webhook.NewService(&humus.Setup{Host: h, Telemetry: tel.Telemetry()},
		webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/tls"}, panics)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, svc)
	if a := <-authority.post(h, addr); a.err == nil {
		t.Errorf("a request whose handler panicked got %q, want an error", a.body)
	}
	if err := svc.Ready().Healthy(context.Background()); err != nil {
		t.Errorf("Ready after a panic: %v", err)
	}
	if spans := tel.Spans(); len(spans) != 1 || spans[0].Status().Code != codes.Error {
		t.Errorf("spans %v, want one with an error status", spans)
	}
	if got := records(tel, otellog.SeverityWarn); len(got) != 1 || !strings.Contains(got[0], "a conversion gone wrong") {
		t.Errorf("warning records %q, want net/http's of the panic", got)
	}
}
