package humustest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"testing/fstest"

	"github.com/z5labs/humus"
)

// Host is a humus.Host for tests: an environment of its own, files in
// memory, dialling and listening on loopback only, and stdout and stderr
// captured. Set Env and Files before calling Host; it is safe for
// concurrent use after that.
type Host struct {
	// Env is the environment LookupEnv answers from.
	Env map[string]string

	// Files is the file system FS serves, such as
	// Files["var/run/secrets/kubernetes.io/serviceaccount/token"].
	Files fstest.MapFS

	// Dir is the working directory, "/" unless set.
	Dir string

	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	dials  []string
}

// NewHost returns a Host with an empty environment and no files.
func NewHost() *Host {
	return &Host{Env: map[string]string{}, Files: fstest.MapFS{}}
}

// Host returns the humus.Host that h stands for. Dial and Listen refuse any
// address but a loopback one, so a test can't reach the network by mistake;
// Listen on an address without a host, such as ":0", listens on
// 127.0.0.1.
func (h *Host) Host() humus.Host {
	env := maps.Clone(h.Env)
	return humus.Host{
		Dial:   h.dial,
		Listen: h.listen,
		FS:     h.Files,
		LookupEnv: func(key string) (string, bool) {
			v, ok := env[key]
			return v, ok
		},
		Dir:    cmp.Or(h.Dir, "/"),
		Stdout: lockedWriter{mu: &h.mu, w: &h.stdout},
		Stderr: lockedWriter{mu: &h.mu, w: &h.stderr},
	}
}

// Stdout returns what has been written to the Host's stdout.
func (h *Host) Stdout() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stdout.String()
}

// Stderr returns what has been written to the Host's stderr.
func (h *Host) Stderr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stderr.String()
}

// Dials returns the addresses dialled through the Host, in order,
// including those it refused.
func (h *Host) Dials() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.dials)
}

func (h *Host) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	h.mu.Lock()
	h.dials = append(h.dials, addr)
	h.mu.Unlock()
	if err := loopbackOnly(addr, false); err != nil {
		return nil, fmt.Errorf("humustest: dialling %s: %w", addr, err)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (h *Host) listen(ctx context.Context, network, addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("humustest: listening on %s: %w", addr, err)
	}
	if host == "" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	if err := loopbackOnly(addr, true); err != nil {
		return nil, fmt.Errorf("humustest: listening on %s: %w", addr, err)
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, network, addr)
}

// loopbackOnly refuses an address that isn't on loopback. A name other than
// localhost is refused too: resolving it would reach the network.
func loopbackOnly(addr string, listening bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		verb := "dial"
		if listening {
			verb = "listen on"
		}
		return fmt.Errorf("a test Host doesn't %s %q: only loopback addresses", verb, host)
	}
	return nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
