package clustertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/z5labs/humus/humustest"
)

// These tests run a TCP server on 127.0.0.1, so they use real time.

// quiet is how long a test waits to see that nothing arrives.
const quiet = 200 * time.Millisecond

// A server is a TCP server on 127.0.0.1 whose accepted connections a test
// takes with accept.
type server struct {
	ln       net.Listener
	accepted chan net.Conn
}

func newServer(t *testing.T) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, accepted: make(chan net.Conn, 16)}
	go func() {
		defer close(s.accepted)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted <- conn
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for conn := range s.accepted {
			_ = conn.Close()
		}
	})
	return s
}

func (s *server) addr() string { return s.ln.Addr().String() }

// accept is the server's side of the next connection.
func (s *server) accept(t *testing.T) net.Conn {
	t.Helper()
	select {
	case conn := <-s.accepted:
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	case <-time.After(5 * time.Second):
		t.Fatal("the server accepted no connection")
		return nil
	}
}

// dial dials the server through the link, and returns both sides.
func dial(t *testing.T, link *Link, s *server) (client, srv net.Conn) {
	t.Helper()
	client, err := link.Dial(t.Context(), "tcp", s.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client, s.accept(t)
}

func write(t *testing.T, conn net.Conn, data string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := conn.Write([]byte(data))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("writing %q: %v", data, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("writing %q blocked", data)
	}
}

// read reads exactly len(want) bytes from conn and checks them.
func read(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	got := make([]byte, len(want))
	if n, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("read %q, then %v; want %q", got[:n], err, want)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// nothing checks that nothing arrives on conn for a while.
func nothing(t *testing.T, conn net.Conn) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(quiet))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read %q, %v; want nothing until the deadline", buf[:n], err)
	}
}

// reset checks that reading conn fails with a reset, before any byte.
func reset(t *testing.T, conn net.Conn) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	data, err := io.ReadAll(conn)
	if len(data) != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read %q, then %v; want a reset and no bytes", data, err)
	}
}

func TestLinkForwards(t *testing.T) {
	s := newServer(t)
	link := NewLink(t)
	client, srv := dial(t, link, s)

	write(t, client, "ping")
	read(t, srv, "ping")
	write(t, srv, "pong")
	read(t, client, "pong")
	if client.RemoteAddr().String() != s.addr() || client.LocalAddr().String() != srv.RemoteAddr().String() {
		t.Errorf("the client's connection is from %s to %s, want from %s to %s", client.LocalAddr(), client.RemoteAddr(), srv.RemoteAddr(), s.addr())
	}
	if d, o := link.Dials(), link.Open(); d != 1 || o != 1 {
		t.Errorf("Dials() = %d, Open() = %d; want 1, 1", d, o)
	}

	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	reset(t, srv)
	if o := link.Open(); o != 0 {
		t.Errorf("Open() = %d after the client closed, want 0", o)
	}
	if err := client.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a second Close = %v, want net.ErrClosed", err)
	}
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close = %v, want net.ErrClosed", err)
	}
	if _, err := client.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close = %v, want net.ErrClosed", err)
	}
}

func TestLinkServerCloses(t *testing.T) {
	s := newServer(t)
	link := NewLink(t)
	client, srv := dial(t, link, s)
	write(t, srv, "bye")
	_ = srv.Close()
	read(t, client, "bye")
	if n, err := client.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("Read at the end = %d, %v; want io.EOF", n, err)
	}
	if o := link.Open(); o != 1 {
		t.Errorf("Open() = %d before the client closed, want 1", o)
	}
}

func TestLinkHoldRelease(t *testing.T) {
	s := newServer(t)
	link := NewLink(t)
	client1, srv1 := dial(t, link, s)

	link.Hold()
	// Writes return at once; nothing reaches the server.
	for _, piece := range []string{"a", "bb", "ccc"} {
		write(t, client1, piece)
	}
	nothing(t, srv1)
	// What the server sends doesn't reach the client.
	write(t, srv1, "x")
	write(t, srv1, "yy")
	nothing(t, client1)

	// A connection dialled while held is held too, its server's close
	// included.
	client2, srv2 := dial(t, link, s)
	write(t, client2, "2")
	nothing(t, srv2)
	write(t, srv2, "z")
	_ = srv2.Close()
	nothing(t, client2)

	link.Release()
	read(t, srv1, "abbccc")
	read(t, client1, "xyy")
	read(t, client2, "z")
	if n, err := client2.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("Read after the released bytes = %d, %v; want io.EOF", n, err)
	}

	// Forwarding as usual again.
	write(t, client1, "after")
	read(t, srv1, "after")
	write(t, srv1, "back")
	read(t, client1, "back")
	if d, o := link.Dials(), link.Open(); d != 2 || o != 2 {
		t.Errorf("Dials() = %d, Open() = %d; want 2, 2", d, o)
	}
}

func TestLinkCloseWhileHeldDrops(t *testing.T) {
	s := newServer(t)
	link := NewLink(t)
	client, srv := dial(t, link, s)
	write(t, client, "before")
	read(t, srv, "before")

	link.Hold()
	write(t, client, "secret")
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	link.Release()
	// The server never sees the queued bytes: its connection is reset.
	reset(t, srv)
	if o := link.Open(); o != 0 {
		t.Errorf("Open() = %d, want 0", o)
	}
}

func TestLinkRefuse(t *testing.T) {
	s := newServer(t)
	link := NewLink(t)
	client, srv := dial(t, link, s)
	held, heldSrv := dial(t, link, s)
	link.Hold()
	write(t, held, "dropped")

	link.Refuse()
	link.Release()
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("Read on a reset connection = %v, want ECONNRESET", err)
	}
	if _, err := client.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("Write on a reset connection = %v, want ECONNRESET", err)
	}
	reset(t, srv)
	reset(t, heldSrv)
	if _, err := link.Dial(t.Context(), "tcp", s.addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Dial while refusing = %v, want ECONNREFUSED", err)
	}
	select {
	case conn := <-s.accepted:
		_ = conn.Close()
		t.Errorf("a dial while refusing reached the server")
	case <-time.After(quiet):
	}
	if d, o := link.Dials(), link.Open(); d != 3 || o != 0 {
		t.Errorf("Dials() = %d, Open() = %d; want 3, 0", d, o)
	}
	if err := client.Close(); err != nil {
		t.Errorf("closing a reset connection = %v, want nil", err)
	}

	link.Accept()
	again, srvAgain := dial(t, link, s)
	write(t, again, "again")
	read(t, srvAgain, "again")
}

func TestLinkDeadlines(t *testing.T) {
	s := newServer(t)
	link := NewLink(t)
	client, srv := dial(t, link, s)
	isTimeout := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
	}

	_ = client.SetDeadline(time.Now().Add(-time.Second))
	if _, err := client.Write([]byte("late")); !isTimeout(err) {
		t.Errorf("Write past the deadline = %v, want a timeout", err)
	}
	if _, err := client.Read(make([]byte, 1)); !isTimeout(err) {
		t.Errorf("Read past the deadline = %v, want a timeout", err)
	}
	_ = client.SetDeadline(time.Time{})
	write(t, client, "ok")
	read(t, srv, "ok")

	// A read waiting for a held server ends at its deadline, and one with
	// the deadline lifted gets the bytes on Release.
	link.Hold()
	write(t, srv, "held")
	begin := time.Now()
	_ = client.SetReadDeadline(time.Now().Add(quiet))
	if _, err := client.Read(make([]byte, 4)); !isTimeout(err) || time.Since(begin) < quiet {
		t.Errorf("Read while held = %v after %s, want a timeout after %s", err, time.Since(begin), quiet)
	}
	_ = client.SetReadDeadline(time.Time{})
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 4)
		n, _ := io.ReadFull(client, buf)
		got <- string(buf[:n])
	}()
	time.Sleep(quiet)
	link.Release()
	select {
	case s := <-got:
		if s != "held" {
			t.Errorf("read %q, want held", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waiting while held got nothing on Release")
	}
}

// TestLinkLarge moves megabytes both ways through an echo server, held and
// released meanwhile, and checks that every byte arrives in order.
func TestLinkLarge(t *testing.T) {
	s := newServer(t)
	link := NewLink(t)
	client, srv := dial(t, link, s)
	go func() { _, _ = io.Copy(srv, srv) }()

	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	wrote := make(chan error, 1)
	go func() {
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 100_000)
			if _, err := client.Write(rest[:n]); err != nil {
				wrote <- err
				return
			}
			rest = rest[n:]
		}
		wrote <- nil
	}()
	go func() {
		for range 5 {
			time.Sleep(20 * time.Millisecond)
			link.Hold()
			time.Sleep(20 * time.Millisecond)
			link.Release()
		}
	}()
	_ = client.SetReadDeadline(time.Now().Add(time.Minute))
	got := make([]byte, len(data))
	if n, err := io.ReadFull(client, got); err != nil {
		t.Fatalf("read %d of %d bytes, then %v", n, len(data), err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the bytes echoed differ from those written")
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

func TestLinkLoopbackOnly(t *testing.T) {
	link := NewLink(t)
	for _, tc := range []struct{ network, addr string }{
		{"tcp", "10.1.2.3:80"},
		{"tcp", "example.com:80"},
		{"udp", "127.0.0.1:53"},
		{"tcp", "127.0.0.1"},
	} {
		if conn, err := link.Dial(t.Context(), tc.network, tc.addr); err == nil {
			_ = conn.Close()
			t.Errorf("Dial(%s, %s) succeeded, want it refused", tc.network, tc.addr)
		}
	}
	if d := link.Dials(); d != 0 {
		t.Errorf("Dials() = %d, want 0", d)
	}
}

func TestLinkClose(t *testing.T) {
	s := newServer(t)
	link := &Link{}
	client, srv := dial(t, link, s)
	idle, idleSrv := dial(t, link, s)
	link.Hold()
	write(t, client, "queued")
	_ = idleSrv.Close() // the link's reading of it ends first

	done := make(chan struct{})
	go func() {
		link.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close didn't return: a connection's goroutines are still running")
	}
	reset(t, srv)
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("Read after the link's Close = %v, want ECONNRESET", err)
	}
	if _, err := idle.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("Write after the link's Close = %v, want ECONNRESET", err)
	}
	if _, err := link.Dial(t.Context(), "tcp", s.addr()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Dial after Close = %v, want net.ErrClosed", err)
	}
	if o := link.Open(); o != 0 {
		t.Errorf("Open() = %d after Close, want 0", o)
	}
	link.Close() // again: nothing
}

// TestLinkHTTP puts a Link under a humus.Host's Dial: a request held by the
// link, which the client gives up on, never reaches the server.
func TestLinkHTTP(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	link := NewLink(t)
	h := humustest.NewHost().Host()
	h.Dial = link.Dial
	transport := &http.Transport{DialContext: h.Dial}
	t.Cleanup(transport.CloseIdleConnections)
	client := &http.Client{Transport: transport}
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}

	if err := get(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	link.Hold()
	if err := get(quiet); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a request while held: %v, want the deadline exceeded", err)
	}
	link.Release()
	time.Sleep(quiet)
	if n := requests.Load(); n != 1 {
		t.Errorf("the server got %d requests, want only the first: the held one was dropped", n)
	}
	if err := get(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n, d := requests.Load(), link.Dials(); n != 2 || d != 2 {
		t.Errorf("the server got %d requests over %d dials, want 2 over 2", n, d)
	}
}
