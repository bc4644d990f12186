package admission_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/webhook"
)

// The fault tests serve the webhook as an App does, from certificate files
// in a Secret volume's layout, on a fixed port, so that the webhook
// started again is where its configuration says: killed, in a process of
// its own (this test binary run again, on humus.Run with humus.OSHost),
// with SIGKILL; hung and renewed, in the test's process. They are named
// TestClusterAdmissionFault, not TestClusterFault, which make test keeps
// for kube's Lease-timed suite, run alone: their bounds are the API
// server's timeouts, seconds, not a Lease's.

// hookServer is a webhook Service that a fault test kills, starts again
// and renews the certificate of.
type hookServer struct {
	t         testing.TB
	hooks     admission.Webhooks
	addr      string
	dir       string // the volume: ..data, and tls.crt and tls.key through it
	authority *clustertest.CA
	next      int

	mu    sync.Mutex
	conns map[net.Conn]bool
	l     net.Listener
	kill  func()
}

// newHookServer starts w's Handler on a free port of 127.0.0.1, and returns
// it with w's Endpoint its URL and CA.
func newHookServer(t testing.TB, w admission.Webhooks) *hookServer {
	t.Helper()
	authority, err := clustertest.NewCA("admission webhook CA")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	s := &hookServer{t: t, addr: addr, dir: t.TempDir(), authority: authority}
	if err := os.MkdirAll(filepath.Join(s.dir, "etc", "webhook", "tls"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.renew()
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(s.dir, "etc", "webhook", "tls", name)); err != nil {
			t.Fatal(err)
		}
	}
	w.Endpoint = admission.Endpoint{URL: "https://" + addr + "/admission", CABundle: authority.PEM()}
	s.hooks = w
	s.start()
	t.Cleanup(func() { s.stop() })
	return s
}

// renew writes a new serving certificate of the CA into the volume, as a
// kubelet writes a renewed Secret: a new folder, ..data swapped to it.
func (s *hookServer) renew() {
	s.t.Helper()
	cert, key, err := s.authority.Serving("127.0.0.1")
	if err != nil {
		s.t.Fatal(err)
	}
	s.next++
	vol := filepath.Join(s.dir, "etc", "webhook", "tls")
	ts := fmt.Sprintf("..2026_12_06_%02d", s.next)
	if err := os.Mkdir(filepath.Join(vol, ts), 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(vol, ts, name), b, 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := os.Symlink(ts, filepath.Join(vol, "..data_tmp")); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")); err != nil {
		s.t.Fatal(err)
	}
}

// start serves the Handler on s.addr, a Service of its own.
func (s *hookServer) start() {
	s.t.Helper()
	tel := humustest.NewTelemetry()
	h, err := s.hooks.Handler(tel.Telemetry())
	if err != nil {
		s.t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /admission/", h)
	host := humustest.NewHost().Host()
	host.FS = os.DirFS(s.dir)
	host.Dir = "/app"
	listen := host.Listen
	host.Listen = func(ctx context.Context, network, addr string) (net.Listener, error) {
		l, err := listen(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.l, s.conns = l, map[net.Conn]bool{}
		s.mu.Unlock()
		return trackedListener{l, s}, nil
	}
	svc, err := webhook.NewService(&humus.Setup{Host: host, Telemetry: tel.Telemetry()},
		webhook.Settings{Addr: s.addr, CertDir: "/etc/webhook/tls", CheckEvery: 50 * time.Millisecond}, mux)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx) }()
	if _, err := svc.Addr(ctx); err != nil {
		s.t.Fatal(err)
	}
	var once sync.Once
	s.kill = func() {
		once.Do(func() {
			s.mu.Lock()
			_ = s.l.Close()
			for c := range s.conns {
				_ = c.Close()
			}
			s.mu.Unlock()
			cancel()
			if err := <-served; err != nil { // an accept on the listener the kill closed
				s.t.Logf("the killed webhook's Serve = %v", err)
			}
			done, stop := context.WithTimeout(context.Background(), time.Second)
			defer stop()
			_ = svc.Shutdown(done) // what is left of it: nothing in flight answers
		})
	}
}

// stop kills the Service, if it serves.
func (s *hookServer) stop() {
	if s.kill != nil {
		s.kill()
	}
}

type trackedListener struct {
	net.Listener
	s *hookServer
}

func (l trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.s.mu.Lock()
		l.s.conns[c] = true
		l.s.mu.Unlock()
	}
	return c, err
}

// faultWrite is one create of the writer, and how it ended.
type faultWrite struct {
	name       string
	start, end time.Time
	err        error
}

// writeUntil creates Widgets named from prefix, of size 5, which the validator refuses, and
// of size 1, which it allows, alternately, one every interval, until stop
// is closed, and returns every create.
func writeUntil(res dynamic.ResourceInterface, ns, prefix string, interval time.Duration, stop <-chan struct{}) <-chan []faultWrite {
	out := make(chan []faultWrite, 1)
	go func() {
		var writes []faultWrite
		for i := 0; ; i++ {
			select {
			case <-stop:
				out <- writes
				return
			case <-time.After(interval):
			}
			size := int64(1)
			if i%2 == 1 {
				size = 5
			}
			w := faultWrite{name: fmt.Sprintf("%s-%d-size-%d", prefix, i, size), start: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, w.err = res.Create(ctx, widgetObject(ns, w.name, map[string]any{"size": size, "host": "h"}), metav1.CreateOptions{})
			cancel()
			w.end = time.Now()
			writes = append(writes, w)
		}
	}()
	return out
}

// faultHooks is a validating webhook of Widgets refusing a size over 3,
// calling seen, unless nil, with the name of each it is handed, with
// policy fp and a timeout of 2s.
func faultHooks(name string, fp admissionregistrationv1.FailurePolicyType, seen func(name string), hang <-chan struct{}) admission.Webhooks {
	return admission.Webhooks{
		Name: name,
		Hooks: []admission.Webhook{admission.Validating(Widget, admission.Settings{FailurePolicy: fp, Timeout: 2 * time.Second},
			func(ctx context.Context, req admission.Request, _, obj *widget) ([]string, error) {
				if seen != nil {
					seen(req.Name)
				}
				if obj.Labels["hang"] == "true" {
					select {
					case <-hang:
					case <-ctx.Done():
					}
				}
				if obj.Spec.Size > 3 {
					return nil, field.ErrorList{field.Invalid(field.NewPath("spec", "size"), obj.Spec.Size, "must be 3 or less")}.ToAggregate()
				}
				return nil, nil
			})},
	}
}

// TestClusterAdmissionFaultKilledUnderWrites kills the validating
// webhook's process with SIGKILL while a writer creates Widgets, and
// starts it again: under
// failurePolicy Fail every create while it is down is refused and none
// stored, and they resume once it is back; under Ignore every create
// while it is down is stored unchecked, those the validator would have
// refused among them, and counted.
func TestClusterAdmissionFaultKilledUnderWrites(t *testing.T) {
	c := clustertest.Get(t)
	c.Install(t, Widget)
	for _, fp := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
		t.Run(string(fp), func(t *testing.T) {
			srv := newProcServer(t, "killed-"+strings.ToLower(string(fp)), fp)
			install(t, c, srv.hooks)
			ns := c.Namespace(t)
			res, _ := widgets(t, c, ns)
			awaitInEffect(t, res, ns)

			stop := make(chan struct{})
			done := writeUntil(res, ns, "w", 20*time.Millisecond, stop)
			time.Sleep(time.Second)
			killed := srv.kill()
			time.Sleep(2 * time.Second)
			restarted := time.Now()
			srv.start()
			time.Sleep(3 * time.Second)
			close(stop)
			writes := <-done

			ctx := t.Context()
			seen := srv.seen()
			var down, after, uncheckedStored int
			for _, w := range writes {
				_, getErr := res.Get(ctx, w.name, metav1.GetOptions{})
				stored := getErr == nil
				checked := seen[w.name]
				invalid := strings.HasSuffix(w.name, "size-5")
				if stored && invalid && fp == admissionregistrationv1.Fail {
					t.Errorf("%s, which the validator refuses, is stored under Fail (its create answered %v)", w.name, w.err)
				}
				if stored && !checked {
					uncheckedStored++
				}
				switch {
				case w.start.After(killed.Add(200*time.Millisecond)) && w.end.Before(restarted):
					down++
					if fp == admissionregistrationv1.Fail {
						if w.err == nil || !strings.Contains(w.err.Error(), "failed calling webhook") || stored {
							t.Errorf("%s, created while the webhook was down, answered %v, stored %v: want refused, calling the webhook failed, nothing stored", w.name, w.err, stored)
						}
					} else if w.err != nil || !stored || checked {
						t.Errorf("%s, created while the webhook was down, answered %v, stored %v, checked %v: want stored unchecked", w.name, w.err, stored, checked)
					}
				case w.start.After(restarted.Add(time.Second)):
					after++
					if invalid != apierrors.IsInvalid(w.err) || (!invalid && w.err != nil) {
						t.Errorf("%s, created after the webhook was back, answered %v: want the validator's answer", w.name, w.err)
					}
				}
			}
			t.Logf("%s: %d creates, %d while the webhook was down, %d after it was back; %d stored unchecked", fp, len(writes), down, after, uncheckedStored)
			if down < 10 || after < 10 { // a loaded machine writes fewer
				t.Errorf("%d creates while the webhook was down and %d after it was back: too few to tell", down, after)
			}
			switch fp {
			case admissionregistrationv1.Fail:
				if uncheckedStored != 0 {
					t.Errorf("%d Widgets stored unchecked under Fail", uncheckedStored)
				}
			case admissionregistrationv1.Ignore:
				if uncheckedStored < down {
					t.Errorf("%d Widgets stored unchecked under Ignore, fewer than the %d creates while the webhook was down", uncheckedStored, down)
				}
			}
		})
	}
}

// TestClusterAdmissionFaultHung holds the validator past the
// configuration's 2s timeout: under Fail the create is refused at the API
// server's timeout and nothing is stored; under Ignore it is stored,
// unchecked, once the timeout passed.
func TestClusterAdmissionFaultHung(t *testing.T) {
	c := clustertest.Get(t)
	c.Install(t, Widget)
	for _, fp := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
		t.Run(string(fp), func(t *testing.T) {
			hang := make(chan struct{})
			defer close(hang)
			srv := newHookServer(t, faultHooks("hung-"+strings.ToLower(string(fp)), fp, nil, hang))
			install(t, c, srv.hooks)
			ns := c.Namespace(t)
			res, _ := widgets(t, c, ns)
			awaitInEffect(t, res, ns)

			obj := widgetObject(ns, "hung", map[string]any{"size": int64(5), "host": "h"})
			obj.SetLabels(map[string]string{"hang": "true"})
			start := time.Now()
			_, err := res.Create(t.Context(), obj, metav1.CreateOptions{})
			took := time.Since(start)
			_, getErr := res.Get(t.Context(), "hung", metav1.GetOptions{})
			t.Logf("%s: the create answered %v after %s", fp, err, took.Round(time.Millisecond))
			if took < 2*time.Second || took > 10*time.Second {
				t.Errorf("the create took %s: want the API server's wait, the 2s timeout", took)
			}
			switch fp {
			case admissionregistrationv1.Fail:
				if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || !apierrors.IsNotFound(getErr) {
					t.Errorf("under Fail, the create answered %v and Get %v: want refused for the timeout, nothing stored", err, getErr)
				}
			case admissionregistrationv1.Ignore:
				if err != nil || getErr != nil {
					t.Errorf("under Ignore, the create answered %v and Get %v: want it stored unchecked", err, getErr)
				}
			}
		})
	}
}

// TestClusterAdmissionFaultCertificateRenewed renews the webhook's
// serving certificate while a writer creates Widgets: no create fails,
// the webhook serves the renewed certificate to new connections, and the
// API server, made to dial again, is answered over one.
func TestClusterAdmissionFaultCertificateRenewed(t *testing.T) {
	c := clustertest.Get(t)
	c.Install(t, Widget)
	srv := newHookServer(t, faultHooks("renewed", admissionregistrationv1.Fail, nil, nil))
	install(t, c, srv.hooks)
	ns := c.Namespace(t)
	res, _ := widgets(t, c, ns)
	awaitInEffect(t, res, ns)
	first := servedSerial(t, srv)

	stop := make(chan struct{})
	done := writeUntil(res, ns, "before", 20*time.Millisecond, stop)
	time.Sleep(time.Second)
	srv.renew()
	time.Sleep(200 * time.Millisecond)
	second := servedSerial(t, srv)
	time.Sleep(time.Second)
	close(stop)
	writes := <-done
	// The API server's connections, kept alive, hold the first
	// certificate; closed, with no write in flight, the API server dials
	// again, and is served the renewed one.
	srv.mu.Lock()
	for conn := range srv.conns {
		_ = conn.Close()
	}
	srv.mu.Unlock()
	stop = make(chan struct{})
	done = writeUntil(res, ns, "after", 20*time.Millisecond, stop)
	time.Sleep(time.Second)
	close(stop)
	writes = append(writes, <-done...)
	if first == second {
		t.Errorf("the webhook serves the certificate of serial %s after the renewal, as before it", second)
	}
	for _, w := range writes {
		invalid := strings.HasSuffix(w.name, "size-5")
		if invalid != apierrors.IsInvalid(w.err) || (!invalid && w.err != nil) {
			t.Errorf("%s, created around the renewal at %s, answered %v: want the validator's answer", w.name, w.start.Format(time.StampMilli), w.err)
		}
	}
	t.Logf("%d creates around the renewal, each answered by the validator", len(writes))
}

// servedSerial is the serial of the certificate the webhook serves a new
// connection.
func servedSerial(t *testing.T, s *hookServer) string {
	t.Helper()
	pool := s.authority.Pool()
	conn, err := tlsDial(s.addr, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func tlsDial(addr string, pool *x509.CertPool) (*tls.Conn, error) {
	return tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
}
