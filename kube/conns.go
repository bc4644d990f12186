package kube

import (
	"context"
	"net"
	"sync"
)

// conns dials the transport's connections and keeps the open ones, so a
// controller that lost its Lease can abort them all at once: an abortive
// close (SO_LINGER 0, a TCP reset) drops whatever a connection hasn't sent
// yet, such as a write queued behind a network that holds its packets, so
// nothing this replica queued before it lost the Lease is sent after.
type conns struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

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
		if l, ok := tc.Conn.(interface{ SetLinger(sec int) error }); ok {
			_ = l.SetLinger(0) // best effort: the close below is what matters
		}
		_ = tc.Close() // aborting: its error says nothing more
	}
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
