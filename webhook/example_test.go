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
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing/fstest"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/health"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/webhook"
)

// An App serving an admission webhook, and its readiness. The pod mounts
// the Secret a cert-manager Certificate writes at /etc/webhook/tls:
//
//	volumes:
//	- name: webhook-tls
//	  secret:
//	    secretName: webhook-tls # the Certificate's spec.secretName
//	containers:
//	- volumeMounts:
//	  - name: webhook-tls
//	    mountPath: /etc/webhook/tls
//	    readOnly: true
//
// and the webhook's configuration names the Service in front of port 9443,
// with cert-manager's CA injector filling in its caBundle.
func Example() {
	validate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Decode the AdmissionReview, and answer one with its uid and
		// allowed: true or false, with a status of 200 either way.
	})
	app := func(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
		mux := http.NewServeMux()
		mux.Handle("POST /validate", validate)
		hook, err := webhook.NewService(s, webhook.Settings{Addr: ":9443", CertDir: "/etc/webhook/tls"}, mux)
		if err != nil {
			return nil, err
		}
		probes := health.NewService(s, ":8081", health.Readiness(hook.Ready()))
		return []humus.Service{hook, probes}, nil
	}
	_ = app // humus.Main(app)
}

// A Service on humustest's Host, its certificate and key in the Host's
// files, asked over real HTTPS by a client that trusts the certificate, as
// the API server does through the caBundle.
func ExampleNewService() {
	certPEM, keyPEM := selfSignedFor127()
	h := humustest.NewHost()
	h.Files["etc/webhook/tls/tls.crt"] = &fstest.MapFile{Data: certPEM}
	h.Files["etc/webhook/tls/tls.key"] = &fstest.MapFile{Data: keyPEM}
	s := &humus.Setup{Host: h.Host()}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /convert", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body) // a ConversionReview's response, in a real webhook
	})
	hook, err := webhook.NewService(s, webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/etc/webhook/tls"}, mux)
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- hook.Serve(ctx) }()
	addr, err := hook.Addr(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	client := &http.Client{Transport: &http.Transport{
		DialContext:     s.Host.Dial,
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
	resp, err := client.Post("https://"+addr.String()+"/convert", "application/json", strings.NewReader(`{"kind":"ConversionReview"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	fmt.Println("ready:", hook.Ready().Healthy(ctx))

	cancel()
	fmt.Println("serve:", <-served, "shutdown:", hook.Shutdown(context.Background()))
	// Output:
	// 200 OK {"kind":"ConversionReview"}
	// ready: <nil>
	// serve: <nil> shutdown: <nil>
}

// A controller served after its conversion webhook: it starts once the
// webhook is ready, and the webhook answers until it has stopped.
func ExampleService_Before() {
	certPEM, keyPEM := selfSignedFor127()
	h := humustest.NewHost()
	h.Files["etc/webhook/tls/tls.crt"] = &fstest.MapFile{Data: certPEM}
	h.Files["etc/webhook/tls/tls.key"] = &fstest.MapFile{Data: keyPEM}

	ctx, stop := context.WithCancel(context.Background())
	code := humus.Run(ctx, h.Host(), func(_ context.Context, s *humus.Setup) ([]humus.Service, error) {
		hook, err := webhook.NewService(s, webhook.Settings{Addr: "127.0.0.1:0", CertDir: "/etc/webhook/tls"}, http.NotFoundHandler())
		if err != nil {
			return nil, err
		}
		ctrl := &controller{ready: hook.Ready(), started: stop}
		return []humus.Service{hook.Before(ctrl)}, nil
	})
	fmt.Println("exit code", code)
	// Output:
	// the controller starts; the webhook's readiness: <nil>
	// the controller stops; the webhook's readiness: <nil>
	// exit code 0
}

// controller stands for a kube.Controller: it says whether the webhook is
// ready as it starts and as it stops, and stops the App once it started.
type controller struct {
	ready   health.Monitor
	started func()
}

func (c *controller) Serve(ctx context.Context) error {
	fmt.Println("the controller starts; the webhook's readiness:", c.ready.Healthy(ctx))
	c.started()
	<-ctx.Done()
	return nil
}

func (c *controller) Shutdown(ctx context.Context) error {
	fmt.Println("the controller stops; the webhook's readiness:", c.ready.Healthy(ctx))
	return nil
}

// selfSignedFor127 returns a certificate for 127.0.0.1, signed by its own
// key, and the key, PEM: what cert-manager's Certificate would write.
func selfSignedFor127() (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "webhook.default.svc"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
