package kube

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
)

func TestAbortClosesEveryOpenConnection(t *testing.T) {
	var servers []net.Conn
	c := newConns(func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		servers = append(servers, server)
		return client, nil
	})
	a, err := c.Dial(t.Context(), "tcp", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Dial(t.Context(), "tcp", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := a.Write([]byte("late")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("a write on an aborted connection = %v, want it refused", err)
	}
	if _, err := servers[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the server's read after abort = %v, want EOF: nothing more sent", err)
	}
}
