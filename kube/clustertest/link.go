package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Link is a network between one client and the servers it dials, that a
// test can hold, release, refuse and accept; its Dial stands in for a
// humus.Host's:
//
//	link := clustertest.NewLink(t)
//	h := humustest.NewHost().Host()
//	h.Dial = link.Dial
//
// Dial dials TCP on loopback only (127.0.0.0/8, ::1 or localhost), with a
// net.Dialer, and returns a connection whose bytes go through the link,
// in order, in both directions. The link's model:
//
//   - Hold holds the traffic of every connection, open or dialled while
//     held, as a network holding the packets: the client's writes return
//     at once and are queued, not forwarded, so the server sees nothing;
//     and the client's reads get nothing, what the server sends, its close
//     included, being queued too (up to 1MiB a connection, beyond which
//     the server's writes block, as on a network that acknowledges
//     nothing). Dials still succeed.
//   - Release forwards what was queued, in order, in both directions, and
//     then forwards as usual. While the link forwards, a client's Write
//     returns once its bytes are written to the server's connection.
//   - Closing a connection, by the client or by the link, is abortive, as
//     a close with SO_LINGER 0 that discards a socket's unsent data: what
//     the link still queues of it, in either direction, is dropped and
//     never delivered, and the server's connection is reset. So a client
//     that gives up on a request held by the link, and closes its
//     connection, never had its request reach the server.
//   - Refuse resets every open connection (the client's reads and writes
//     fail with ECONNRESET) and makes new dials fail with ECONNREFUSED,
//     until Accept.
//
// A Link is safe for concurrent use, and so is each of its connections;
// Close resets every connection and returns once the link's goroutines
// have ended. The zero Link is ready to use, and forwards.
type Link struct {
	mu      sync.Mutex
	held    bool
	refused bool
	closed  bool
	dials   int
	conns   map[*linkConn]struct{} // neither closed nor reset
	pumps   sync.WaitGroup
}

// NewLink returns a Link that forwards, closed at t's cleanup.
func NewLink(t testing.TB) *Link {
	l := &Link{}
	t.Cleanup(l.Close)
	return l
}

// Dial dials addr, which must be a loopback TCP address, and returns a
// connection through the link; it fails with ECONNREFUSED while the link
// refuses, and once it is closed.
func (l *Link) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := loopbackTCP(network, addr); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: linkAddr{network, addr}, Err: err}
	}
	l.mu.Lock()
	l.dials++
	err := l.refusal(network, addr)
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	up, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.refusal(network, addr); err != nil {
		abort(up)
		return nil, err
	}
	c := &linkConn{l: l, up: up, wake: make(chan struct{})}
	if l.conns == nil {
		l.conns = make(map[*linkConn]struct{})
	}
	l.conns[c] = struct{}{}
	l.pumps.Add(2)
	go c.pumpUp()
	go c.pumpDown()
	return c, nil
}

// refusal is the error a dial gets while the link refuses or once it is
// closed, or nil. l.mu is held.
func (l *Link) refusal(network, addr string) error {
	switch {
	case l.closed:
		return &net.OpError{Op: "dial", Net: network, Addr: linkAddr{network, addr}, Err: errLinkClosed}
	case l.refused:
		return &net.OpError{Op: "dial", Net: network, Addr: linkAddr{network, addr}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return nil
}

var errLinkClosed = fmt.Errorf("clustertest: the link is closed: %w", net.ErrClosed)

// Hold holds the traffic of every connection, open or to be dialled, in
// both directions, until Release.
func (l *Link) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = true
	for c := range l.conns {
		// Interrupts a write to the server under way: its unwritten
		// rest stays queued.
		_ = c.up.SetWriteDeadline(aLongTimeAgo)
		c.notify()
	}
}

// Release forwards what Hold queued, in order, in both directions, and
// forwards as usual from then on. It doesn't wait for the queued bytes to
// be delivered.
func (l *Link) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = false
	for c := range l.conns {
		_ = c.up.SetWriteDeadline(time.Time{})
		c.notify()
	}
}

// Refuse resets every open connection, dropping what the link queues of
// it, and makes new dials fail with ECONNREFUSED, until Accept.
func (l *Link) Refuse() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused = true
	for c := range l.conns {
		c.resetLocked()
	}
}

// Accept lets new dials through again after Refuse.
func (l *Link) Accept() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused = false
}

// Close resets every open connection, makes new dials fail, and returns
// once the goroutines of every connection have ended. Closing again does
// nothing.
func (l *Link) Close() {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		c.resetLocked()
	}
	l.mu.Unlock()
	l.pumps.Wait()
}

// Dials is how many times Dial was called with a loopback TCP address,
// refused dials and failed ones included.
func (l *Link) Dials() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dials
}

// Open is how many of the link's connections are open: dialled, and
// neither closed by the client nor reset by the link. One the server
// closed is open until the client closes it.
func (l *Link) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// aLongTimeAgo is a deadline in the past, to interrupt I/O under way.
var aLongTimeAgo = time.Unix(1, 0)

// downLimit is how many bytes from the server a connection queues before
// it stops reading from the server.
const downLimit = 1 << 20

// upChunk is the most a connection writes to the server at once.
const upChunk = 64 << 10

// A linkConn is the client's side of a connection through a Link. Two
// goroutines move its bytes: pumpUp writes what the client wrote to up,
// the connection to the server, and pumpDown reads up into what the
// client reads.
type linkConn struct {
	l  *Link
	up net.Conn

	readDeadline, writeDeadline deadline

	// Guarded by l.mu.
	wake      chan struct{} // closed and replaced on every change
	out       []byte        // written by the client, not yet to up
	written   int64         // bytes the client has written in all
	forwarded int64         // bytes written to up in all
	outErr    error         // writing to up failed: the client's writes fail
	in        []byte        // read from up, not yet by the client
	inErr     error         // reading up ended (io.EOF or an error), after in
	closed    bool          // the client closed it
	reset     bool          // the link reset it
}

// notify wakes whoever waits on c. l.mu is held.
func (c *linkConn) notify() {
	close(c.wake)
	c.wake = make(chan struct{})
}

// dead reports whether c was closed or reset. l.mu is held.
func (c *linkConn) dead() bool { return c.closed || c.reset }

// deadErr is the error of an operation on a closed or reset c, or nil.
// l.mu is held.
func (c *linkConn) deadErr(op string) error {
	switch {
	case c.closed:
		return c.opError(op, net.ErrClosed)
	case c.reset:
		return c.opError(op, os.NewSyscallError(op, syscall.ECONNRESET))
	}
	return nil
}

func (c *linkConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.up.LocalAddr(), Addr: c.up.RemoteAddr(), Err: err}
}

// resetLocked resets c: drops what it queues, resets the server's
// connection and wakes its waiters. l.mu is held.
func (c *linkConn) resetLocked() {
	if c.dead() {
		return
	}
	c.reset = true
	c.drop()
}

// drop ends c: what it queues is dropped, up is closed abortively, and c
// leaves the link's open connections. l.mu is held.
func (c *linkConn) drop() {
	c.out, c.in = nil, nil
	delete(c.l.conns, c)
	abort(c.up)
	c.notify()
}

// Read reads what the server sent, once the link forwards it; at the end
// of what the server sent, it returns the server's close (io.EOF) or the
// error reading from it.
func (c *linkConn) Read(b []byte) (int, error) {
	l := c.l
	for {
		expired := c.readDeadline.wait()
		l.mu.Lock()
		if err := c.deadErr("read"); err != nil {
			l.mu.Unlock()
			return 0, err
		}
		if isClosed(expired) {
			l.mu.Unlock()
			return 0, c.opError("read", os.ErrDeadlineExceeded)
		}
		if !l.held {
			if len(c.in) > 0 {
				n := copy(b, c.in)
				c.in = c.in[n:]
				if len(c.in) == 0 {
					c.in = nil
				}
				c.notify()
				l.mu.Unlock()
				return n, nil
			}
			if c.inErr != nil {
				err := c.inErr
				l.mu.Unlock()
				return 0, err
			}
		}
		wake := c.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-expired:
		}
	}
}

// Write queues b for the server. While the link is held it returns at
// once; otherwise it returns once b is written to the server's
// connection, or, if the write deadline passes first, leaves b queued
// and returns as a write into a socket's buffer does.
func (c *linkConn) Write(b []byte) (int, error) {
	l := c.l
	expired := c.writeDeadline.wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := c.deadErr("write"); err != nil {
		return 0, err
	}
	if c.outErr != nil {
		return 0, c.outErr
	}
	if isClosed(expired) {
		return 0, c.opError("write", os.ErrDeadlineExceeded)
	}
	if len(b) == 0 {
		return 0, nil
	}
	start := c.written
	c.out = append(c.out, b...)
	c.written += int64(len(b))
	end := c.written
	c.notify()
	for !l.held && c.forwarded < end && !c.dead() && c.outErr == nil {
		wake := c.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-expired:
			l.mu.Lock()
			return len(b), nil
		}
		l.mu.Lock()
	}
	if c.forwarded >= end || l.held && !c.dead() && c.outErr == nil {
		return len(b), nil
	}
	n := int(max(0, min(c.forwarded-start, int64(len(b)))))
	if err := c.deadErr("write"); err != nil {
		return n, err
	}
	return n, c.outErr
}

// pumpUp writes what the client wrote to the server while the link
// forwards, until c is closed or reset, or writing fails.
func (c *linkConn) pumpUp() {
	l := c.l
	defer l.pumps.Done()
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for !c.dead() && (l.held || len(c.out) == 0) {
			wake := c.wake
			l.mu.Unlock()
			<-wake
			l.mu.Lock()
		}
		if c.dead() {
			return
		}
		// Write only appends to out, past chunk; drop replaces out.
		chunk := c.out[:min(len(c.out), upChunk)]
		l.mu.Unlock()
		n, err := c.up.Write(chunk)
		l.mu.Lock()
		if c.dead() {
			return
		}
		c.out = c.out[n:]
		if len(c.out) == 0 {
			c.out = nil
		}
		c.forwarded += int64(n)
		c.notify()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			// Hold interrupts with a deadline; anything else ends the
			// connection's writes.
			c.outErr = err
			c.out = nil
			return
		}
	}
}

// pumpDown reads what the server sends into what the client reads,
// holding at most downLimit bytes, until reading ends or c is closed or
// reset.
func (c *linkConn) pumpDown() {
	l := c.l
	defer l.pumps.Done()
	buf := make([]byte, 32<<10)
	for {
		l.mu.Lock()
		for !c.dead() && len(c.in) >= downLimit {
			wake := c.wake
			l.mu.Unlock()
			<-wake
			l.mu.Lock()
		}
		dead := c.dead()
		l.mu.Unlock()
		if dead {
			return
		}
		n, err := c.up.Read(buf)
		l.mu.Lock()
		if c.dead() {
			l.mu.Unlock()
			return
		}
		c.in = append(c.in, buf[:n]...)
		if err != nil {
			c.inErr = err
		}
		c.notify()
		l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Close closes the connection abortively: what the link still queues of
// it is dropped and the server's connection is reset.
func (c *linkConn) Close() error {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed {
		return c.opError("close", net.ErrClosed)
	}
	wasReset := c.reset
	c.closed = true
	if !wasReset {
		c.drop()
	}
	return nil
}

// SetLinger accepts 0, what a client that aborts its connections sets, as
// *net.TCPConn does: Close resets the connection anyway. Any other value
// is refused, since Close never lingers.
func (c *linkConn) SetLinger(sec int) error {
	if sec != 0 {
		return c.opError("setlinger", errors.New("clustertest: a link's connection always closes abortively"))
	}
	return nil
}

// LocalAddr is the address of the link's connection to the server.
func (c *linkConn) LocalAddr() net.Addr { return c.up.LocalAddr() }

// RemoteAddr is the server's address.
func (c *linkConn) RemoteAddr() net.Addr { return c.up.RemoteAddr() }

func (c *linkConn) SetDeadline(t time.Time) error {
	c.readDeadline.set(t)
	c.writeDeadline.set(t)
	return nil
}

func (c *linkConn) SetReadDeadline(t time.Time) error {
	c.readDeadline.set(t)
	return nil
}

func (c *linkConn) SetWriteDeadline(t time.Time) error {
	c.writeDeadline.set(t)
	return nil
}

// abort closes conn abortively: with SO_LINGER 0, a TCP connection sends
// a reset and discards what it hasn't sent.
func abort(conn net.Conn) {
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// A deadline is a channel closed when the deadline passes, as net.Pipe's
// connections have. The zero deadline is none.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{} // closed once the deadline passed
}

// set sets the deadline to t; the zero t means none.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		d.cancel = make(chan struct{})
	}
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait until it has closed cancel
	}
	d.timer = nil
	expired := isClosed(d.cancel)
	if t.IsZero() {
		if expired {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if expired {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !expired {
		close(d.cancel)
	}
}

// wait is a channel closed once the deadline passes.
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		d.cancel = make(chan struct{})
	}
	return d.cancel
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// loopbackTCP refuses an address that isn't TCP on loopback. A name other
// than localhost is refused too: resolving it would reach the network.
func loopbackTCP(network, addr string) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return fmt.Errorf("clustertest: a Link dials TCP only, not %q", network)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("clustertest: a Link dials loopback addresses only, not %q", host)
	}
	return nil
}

// A linkAddr is an address a dial was given.
type linkAddr struct{ network, addr string }

func (a linkAddr) Network() string { return a.network }
func (a linkAddr) String() string  { return a.addr }

var _ net.Conn = (*linkConn)(nil)
