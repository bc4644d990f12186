package transport

import (
	"context"
	"net"
	"sync"
)

// conns dials the transport's connections and keeps the open ones, so a
// controller that lost its Lease can abort them all at once: an abortive
// close (SO_LINGER 0, a TCP reset) drops whatever a connection hasn't sent
// yet, such as a write queued behind a network that holds its packets, so
// nothing this replica queued before it lost the Lease is sent after. The
// reset needs SetLinger on the Host's connection, or on the one its
// NetConn method unwraps to; without either, the abort is the
// connection's own Close.
type conns struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// graceful, when set, is called once, at the first dial of a
	// connection that abort can't reset: it says so.
	graceful     func(conn net.Conn)
	gracefulOnce sync.Once

	mu   sync.Mutex
	open map[*trackedConn]struct{}
}

func newConns(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *conns {
	return &conns{dial: dial, open: map[*trackedConn]struct{}{}}
}

// Dial dials through the Host, and keeps the connection until it closes.
func (c *conns) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if _, ok := lingerer(conn); !ok && c.graceful != nil {
		c.gracefulOnce.Do(func() { c.graceful(conn) })
	}
	tc := &trackedConn{Conn: conn, owner: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open[tc] = struct{}{}
	return tc, nil
}

// abort closes every open connection abortively.
func (c *conns) abort() {
	c.mu.Lock()
	open := make([]*trackedConn, 0, len(c.open))
	for tc := range c.open {
		open = append(open, tc)
	}
	c.mu.Unlock()
	for _, tc := range open {
		if l, ok := lingerer(tc.Conn); ok {
			_ = l.SetLinger(0) // best effort: the close below is what matters
		}
		_ = tc.Close() // aborting: its error says nothing more
	}
}

// maxUnwrap bounds how many NetConn methods lingerer follows.
const maxUnwrap = 8

// lingerer finds what can make conn's close abortive: conn itself when it
// has SetLinger, as the real Host's *net.TCPConn has, or the connection a
// NetConn method unwraps it to (as *tls.Conn has), and so on. A Host
// connection that has neither is closed as its Close does, which for a
// plain wrapper is a graceful close: its queued bytes may still be sent.
func lingerer(conn net.Conn) (interface{ SetLinger(sec int) error }, bool) {
	for range maxUnwrap {
		if l, ok := conn.(interface{ SetLinger(sec int) error }); ok {
			return l, true
		}
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return nil, false
		}
		if conn = u.NetConn(); conn == nil {
			return nil, false
		}
	}
	return nil, false
}

// count is how many connections are open.
func (c *conns) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

type trackedConn struct {
	net.Conn
	owner *conns
}

func (t *trackedConn) Close() error {
	t.owner.mu.Lock()
	delete(t.owner.open, t)
	t.owner.mu.Unlock()
	return t.Conn.Close()
}
