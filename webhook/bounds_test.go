package webhook_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/net/http2"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/webhook"
)

// These tests run the Service in a synctest bubble, its clock the
// bubble's, on a network of net.Pipe connections, each a real TLS
// connection, so that its timeouts, tens of seconds, are kept as they are
// and seen in no time.

// pipeNet is a network of one listener: Dial hands the server's end of a
// net.Pipe to Accept, through a backlog, as a kernel queues connections
// the server hasn't accepted yet.
type pipeNet struct {
	backlog chan net.Conn
	closed  chan struct{}
	once    sync.Once
}

func newPipeNet() *pipeNet {
	return &pipeNet{backlog: make(chan net.Conn, 512), closed: make(chan struct{})}
}

func (p *pipeNet) listen(context.Context, string, string) (net.Listener, error) { return p, nil }

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.backlog:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

// Close closes the listener and the connections it never accepted.
func (p *pipeNet) Close() error {
	p.once.Do(func() {
		close(p.closed)
		for {
			select {
			case c := <-p.backlog:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return nil
}

func (p *pipeNet) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9443} }

func (p *pipeNet) dial(context.Context, string, string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case p.backlog <- server:
		return client, nil
	case <-p.closed:
		return nil, errors.New("connection refused")
	}
}

// bubble is a Service serving h on a pipeNet, in the synctest bubble the
// test runs in, and the CA that issued its certificate.
type bubble struct {
	svc       *webhook.Service
	net       *pipeNet
	authority *ca
}

// watchedConn is a connection that sends when a read of it first fails:
// when the server closed it, as its reader, whoever that is, sees.
type watchedConn struct {
	net.Conn
	once   sync.Once
	closed chan time.Time
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { c.closed <- time.Now() })
	}
	return n, err
}

// startInBubble serves h until the test ends; the Service's certificate,
// and its CA, are made in the bubble, valid at its clock's time.
func startInBubble(t *testing.T, h http.Handler) *bubble {
	t.Helper()
	root := t.TempDir()
	authority := newCA(t)
	newVolume(t, filepath.Join(root, "tls"), authority.valid(t))
	p := newPipeNet()
	host := hostOn(root)
	host.Listen, host.Dial = p.listen, p.dial
	svc, err := webhook.NewService(&humus.Setup{Host: host}, webhook.Settings{Addr: "127.0.0.1:9443", CertDir: "/tls"}, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		_ = svc.Shutdown(context.Background())
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = p.Close()
	})
	if _, err := svc.Addr(ctx); err != nil {
		t.Fatal(err)
	}
	return &bubble{svc: svc, net: p, authority: authority}
}

// tlsDial opens a TLS connection to the Service, offering protos by ALPN.
func (b *bubble) tlsDial(t *testing.T, protos ...string) (*tls.Conn, error) {
	t.Helper()
	raw, err := b.net.dial(t.Context(), "tcp", "127.0.0.1:9443")
	if err != nil {
		t.Fatal(err)
	}
	conn := tls.Client(raw, &tls.Config{RootCAs: b.authority.pool, ServerName: "webhook.default.svc", NextProtos: protos, MinVersion: tls.VersionTLS12})
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if err := conn.Handshake(); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	t.Cleanup(func() { _ = conn.Close() })
	return conn, nil
}

// closedAt reads conn until it fails, and sends when, once the server has
// closed it (or io.ErrClosedPipe, once the test has).
func closedAt(conn net.Conn) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		at <- time.Now()
	}()
	return at
}

// bodyReader is a handler that reads the request's body whole, and
// answers 200, or 400 with the error reading it, which it sends.
func bodyReader(readErr chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "read")
	})
}

// trickle sends a request's headers on conn, for a body of 1,000 bytes,
// then a byte of it every 5s, in the background, until a write fails or
// the bubble's clock has gone on 10 minutes. The test waits for it to
// stop, once it has closed conn.
func trickle(t *testing.T, conn net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.WriteString(conn, "POST /convert HTTP/1.1\r\nHost: webhook.default.svc\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
		for start := time.Now(); time.Since(start) < 10*time.Minute; {
			time.Sleep(5 * time.Second)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = conn.Close()
		<-done
	})
}

// A client that trickles its request's body, a byte every 5s, is cut off
// by the read timeout, 30s from the request's start, the most the API
// server waits for a webhook: its handler's read fails and its connection
// is closed. The Service kept reading it for as long as it trickled.
func TestTricklingClientIsCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		readErr := make(chan error, 1)
		b := startInBubble(t, bodyReader(readErr))
		conn, err := b.tlsDial(t, "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		closed := closedAt(conn)
		trickle(t, conn)
		select {
		case at := <-closed:
			if took := at.Sub(start); took > webhook.ReadTimeout+5*time.Second {
				t.Errorf("the trickling client was cut off after %s, want within the read timeout %s and one trickle", took, webhook.ReadTimeout)
			}
		case <-time.After(10 * time.Minute):
			t.Fatalf("a body trickled a byte every 5s was still being read after 10m")
		}
		if err := <-readErr; err == nil {
			t.Error("the handler read the trickled body whole, want an error")
		}
	})
}

// An idle keep-alive connection, its request answered, is closed by the
// Service once it has been idle IdleTimeout, over HTTP/1.1 and HTTP/2.
func TestIdleConnectionIsClosed(t *testing.T) {
	for _, proto := range []string{"http/1.1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := startInBubble(t, echo())
				conn, err := b.tlsDial(t, proto)
				if err != nil {
					t.Fatal(err)
				}
				if got := conn.ConnectionState().NegotiatedProtocol; got != proto {
					t.Fatalf("negotiated %q, want %q", got, proto)
				}
				watched := &watchedConn{Conn: conn, closed: make(chan time.Time, 1)}
				closed := watched.closed
				rt, url := oneConn(watched, proto)
				resp, err := (&http.Client{Transport: rt}).Post(url, "application/json", strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				idle := time.Now()
				select {
				case at := <-closed:
					if took := at.Sub(idle); took > webhook.IdleTimeout+time.Second {
						t.Errorf("the idle connection was closed after %s, want within IdleTimeout %s", took, webhook.IdleTimeout)
					}
				case <-time.After(10 * time.Minute):
					t.Fatalf("an idle keep-alive connection was still open after 10m")
				}
			})
		})
	}
}

// oneConn is a RoundTripper over conn alone, a TLS connection that
// negotiated proto, and the URL to post to through it. Over HTTP/2, it is
// a transport of unencrypted HTTP/2 on a connection that is, as far as it
// knows, plain: conn's TLS is beneath it, where the transport can't see.
func oneConn(conn net.Conn, proto string) (http.RoundTripper, string) {
	var once sync.Once
	dial := func(context.Context, string, string) (net.Conn, error) {
		var c net.Conn
		once.Do(func() { c = conn })
		if c == nil {
			return nil, errors.New("a second connection")
		}
		return c, nil
	}
	if proto == "h2" {
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		return &http.Transport{DialContext: dial, Protocols: &protocols}, "http://webhook.default.svc/convert"
	}
	return &http.Transport{DialTLSContext: dial}, "https://webhook.default.svc/convert"
}

// Shutdown with a client in flight that trickles its body doesn't wait out
// its context for it: the body is cut at once, the request answered, and
// the connection closed, and Shutdown returns nil in a second or two. It
// spent the whole context and failed.
func TestShutdownCutsASlowClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		readErr := make(chan error, 1)
		b := startInBubble(t, bodyReader(readErr))
		conn, err := b.tlsDial(t, "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		closed := closedAt(conn)
		trickle(t, conn)
		time.Sleep(12 * time.Second) // two bytes of the body in

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		err = b.svc.Shutdown(ctx)
		if took := time.Since(start); err != nil || took > 2*time.Second {
			t.Errorf("Shutdown with a slow client in flight returned %v after %s, want nil within 2s", err, took)
		}
		select {
		case <-closed:
		default:
			t.Error("the slow client's connection is open once Shutdown returned")
		}
		select {
		case err := <-readErr:
			if err == nil {
				t.Error("the handler read the trickled body whole, want an error")
			}
		default:
			t.Error("the handler is still reading the trickled body once Shutdown returned")
		}
	})
}

// The Service accepts at most MaxConnections connections at once: one
// more waits, unaccepted, until one of them closes. A connection that
// sends no request is closed after ReadHeaderTimeout, which frees its
// place.
func TestConnectionsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startInBubble(t, echo())
		conns := make([]*tls.Conn, webhook.MaxConnections)
		for i := range conns {
			conn, err := b.tlsDial(t, "http/1.1")
			if err != nil {
				t.Fatalf("connection %d of %d: %v", i+1, webhook.MaxConnections, err)
			}
			conns[i] = conn
		}
		if conn, err := b.tlsDial(t, "http/1.1"); err == nil {
			_ = conn.Close()
			t.Fatalf("connection %d was served, want it to wait for one of the %d before it", webhook.MaxConnections+1, webhook.MaxConnections)
		}
		_ = conns[0].Close()
		if _, err := b.tlsDial(t, "http/1.1"); err != nil {
			t.Errorf("a connection once one of %d closed: %v", webhook.MaxConnections, err)
		}
		// The rest, sending nothing, are closed by ReadHeaderTimeout.
		start := time.Now()
		closed := closedAt(conns[1])
		if at := <-closed; at.Sub(start) > webhook.ReadHeaderTimeout {
			t.Errorf("a connection that sent no request was closed after %s, want within ReadHeaderTimeout %s", at.Sub(start), webhook.ReadHeaderTimeout)
		}
	})
}

// Over HTTP/2, the Service tells the client it takes at most
// MaxConcurrentStreams requests at once on a connection.
func TestHTTP2StreamsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startInBubble(t, echo())
		conn, err := b.tlsDial(t, "h2")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(conn, conn)
		go func() { _ = fr.WriteSettings() }()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			sf, ok := f.(*http2.SettingsFrame)
			if !ok || sf.IsAck() {
				continue
			}
			n, ok := sf.Value(http2.SettingMaxConcurrentStreams)
			if !ok || n != webhook.MaxConcurrentStreams {
				t.Errorf("the server's SETTINGS say %d streams at once (given: %v), want %d", n, ok, webhook.MaxConcurrentStreams)
			}
			return
		}
	})
}

// Over HTTP/2, as the API server calls a webhook, a request whose body
// trickles is cut off by the read timeout as over HTTP/1.1: its stream
// is answered, or reset, by then, and its handler's read fails.
func TestTricklingStreamIsCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		readErr := make(chan error, 1)
		b := startInBubble(t, bodyReader(readErr))
		conn, err := b.tlsDial(t, "h2")
		if err != nil {
			t.Fatal(err)
		}
		body, w := io.Pipe()
		trickled := make(chan struct{})
		go func() {
			defer close(trickled)
			for start := time.Now(); time.Since(start) < 10*time.Minute; {
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(5 * time.Second)
			}
			_ = w.Close()
		}()
		defer func() {
			_ = w.CloseWithError(errors.New("the test is over"))
			<-trickled
		}()
		rt, url := oneConn(conn, "h2")
		req, err := http.NewRequest(http.MethodPost, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			resp, err := rt.RoundTrip(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
		select {
		case <-answered:
			if took := time.Since(start); took > webhook.ReadTimeout+5*time.Second {
				t.Errorf("the trickling stream was cut off after %s, want within the read timeout %s and one trickle", took, webhook.ReadTimeout)
			}
		case <-time.After(10 * time.Minute):
			t.Fatal("a stream's body trickled a byte every 5s was still being read after 10m")
		}
		if err := <-readErr; err == nil {
			t.Error("the handler read the trickled body whole, want an error")
		}
	})
}

// A handler's context is done WriteTimeout after its request began: the
// API server has given up on it by then.
func TestHandlerContextEndsWithTheAPIServersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		waited := make(chan time.Duration, 1)
		b := startInBubble(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			select {
			case <-r.Context().Done():
				waited <- time.Since(start)
			case <-time.After(10 * time.Minute):
				waited <- -1
			}
		}))
		conn, err := b.tlsDial(t, "h2")
		if err != nil {
			t.Fatal(err)
		}
		rt, url := oneConn(conn, "h2")
		resp, err := (&http.Client{Transport: rt}).Post(url, "application/json", strings.NewReader("{}"))
		if err == nil {
			_ = resp.Body.Close()
		}
		if got := <-waited; got < 0 || got > webhook.WriteTimeout {
			t.Errorf("the handler's context was done after %s, want within WriteTimeout %s", got, webhook.WriteTimeout)
		}
	})
}
