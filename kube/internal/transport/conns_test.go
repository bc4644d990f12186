package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// wrappedConn is a Host's connection that wraps the TCP one, as a proxy
// or a meter would, and unwraps to it with NetConn, as *tls.Conn does.
type wrappedConn struct{ net.Conn }

func (w wrappedConn) NetConn() net.Conn { return w.Conn }

// opaqueConn is a Host's connection that hides the TCP one.
type opaqueConn struct{ net.Conn }

// serverReads reads once from each of conns, and returns what each read
// returned, and how many were ECONNRESET.
func serverReads(t *testing.T, conns ...net.Conn) (got []error, resets int) {
	t.Helper()
	for _, s := range conns {
		_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := s.Read(make([]byte, 1))
		got = append(got, err)
		switch {
		case errors.Is(err, syscall.ECONNRESET):
			resets++
		case !errors.Is(err, io.EOF):
			t.Errorf("the server's read = %v, want ECONNRESET or EOF", err)
		}
	}
	return got, resets
}

// tcpServer listens on a loopback port until t ends, and returns its
// address and the connections it accepts.
func tcpServer(t *testing.T) (string, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return ln.Addr().String(), accepted
}

// An abort closes every open connection abortively: a TCP reset, so the
// peer reads ECONNRESET, not the EOF of a graceful close, and whatever the
// connection still queued is dropped, not sent late. That holds for the
// Host's TCP connection, and for one that wraps it and unwraps with
// NetConn; a connection that hides its TCP one gets a graceful close,
// which the docs say. Real TCP connections: net.Pipe has no SetLinger, so
// a test on it passes without the reset.
func TestAbortClosesEveryOpenConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wrap  func(net.Conn) net.Conn
		reset bool
	}{
		{"TCP", func(c net.Conn) net.Conn { return c }, true},
		{"wrapped, with NetConn", func(c net.Conn) net.Conn { return wrappedConn{c} }, true},
		{"opaque", func(c net.Conn) net.Conn { return opaqueConn{c} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, accepted := tcpServer(t)
			var d net.Dialer
			c := newConns(func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return tc.wrap(conn), nil
			})
			graceful := 0
			c.graceful = func(net.Conn) { graceful++ }
			a, err := c.Dial(t.Context(), "tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Dial(t.Context(), "tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			server := <-accepted
			defer func() { _ = server.Close() }()
			other := <-accepted
			defer func() { _ = other.Close() }()
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if n := c.count(); n != 1 {
				t.Fatalf("open connections after one closed = %d, want 1", n)
			}
			c.abort()
			if n := c.count(); n != 0 {
				t.Errorf("open connections after abort = %d, want 0", n)
			}
			if _, err := a.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
				t.Errorf("a write on an aborted connection = %v, want net.ErrClosed", err)
			}
			// The server's side of a: which of the two dials it accepted
			// first isn't known, so read both: b's closed gracefully.
			got, resets := serverReads(t, server, other)
			want := 0
			if tc.reset {
				want = 1
			}
			if said := min(graceful, 1) == 1; graceful > 1 || said == tc.reset {
				t.Errorf("said %d times that the abort is a graceful close, want once when it is, else never", graceful)
			}
			if resets != want {
				t.Errorf("the server's reads after abort = %v: %d ECONNRESET, want %d (the aborted connection reset, the closed one not)", got, resets, want)
			}
		})
	}
}
