package humustest_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/z5labs/humus/humustest"
)

func TestHostServesItsEnvironmentAndFiles(t *testing.T) {
	h := humustest.NewHost()
	h.Env["POD_NAME"] = "memcached-0"
	h.Files["var/run/secrets/token"] = &fstest.MapFile{Data: []byte("abc")}
	host := h.Host()

	// The environment is the Host's as it was when Host was called.
	h.Env["POD_NAME"] = "changed"
	if v, ok := host.LookupEnv("POD_NAME"); !ok || v != "memcached-0" {
		t.Errorf("LookupEnv(POD_NAME) = %q, %v; want memcached-0, true", v, ok)
	}
	if v, ok := host.LookupEnv("HOME"); ok {
		t.Errorf("LookupEnv(HOME) = %q, true; want the process's environment out of reach", v)
	}
	b, err := fs.ReadFile(host.FS, "var/run/secrets/token")
	if err != nil || string(b) != "abc" {
		t.Errorf("reading var/run/secrets/token = %q, %v; want abc", b, err)
	}
	if _, err := fs.ReadFile(host.FS, "etc/passwd"); err == nil {
		t.Error("read etc/passwd through a test Host, want the real disk out of reach")
	}
}

func TestHostCapturesStdoutAndStderr(t *testing.T) {
	h := humustest.NewHost()
	host := h.Host()
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			_, _ = fmt.Fprintf(host.Stdout, "out %d\n", i)
			_, _ = fmt.Fprintf(host.Stderr, "err %d\n", i)
		})
	}
	wg.Wait()
	for name, got := range map[string]string{"out": h.Stdout(), "err": h.Stderr()} {
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		slices.Sort(lines)
		var want []string
		for i := range 10 {
			want = append(want, fmt.Sprintf("%s %d", name, i))
		}
		slices.Sort(want)
		if !slices.Equal(lines, want) {
			t.Errorf("std%s's lines = %q, want %q, each whole", name, lines, want)
		}
	}
}

func TestHostRefusesAnythingButLoopback(t *testing.T) {
	h := humustest.NewHost()
	host := h.Host()
	ctx := context.Background()

	dials := []struct{ addr, want string }{
		{"10.0.0.1:443", `humustest: dialling 10.0.0.1:443: a test Host doesn't dial "10.0.0.1": only loopback addresses`},
		{"kubernetes.default.svc:443", `humustest: dialling kubernetes.default.svc:443: a test Host doesn't dial "kubernetes.default.svc": only loopback addresses`},
		{"[2001:db8::1]:443", `humustest: dialling [2001:db8::1]:443: a test Host doesn't dial "2001:db8::1": only loopback addresses`},
	}
	for _, d := range dials {
		conn, err := host.Dial(ctx, "tcp", d.addr)
		if conn != nil {
			_ = conn.Close()
		}
		if err == nil || err.Error() != d.want {
			t.Errorf("Dial(%s) = %v, want %s", d.addr, err, d.want)
		}
	}
	listens := []struct{ addr, want string }{
		{"0.0.0.0:0", `humustest: listening on 0.0.0.0:0: a test Host doesn't listen on "0.0.0.0": only loopback addresses`},
		{"192.168.1.10:8081", `humustest: listening on 192.168.1.10:8081: a test Host doesn't listen on "192.168.1.10": only loopback addresses`},
	}
	for _, l := range listens {
		ln, err := host.Listen(ctx, "tcp", l.addr)
		if ln != nil {
			_ = ln.Close()
		}
		if err == nil || err.Error() != l.want {
			t.Errorf("Listen(%s) = %v, want %s", l.addr, err, l.want)
		}
	}

	want := []string{"10.0.0.1:443", "kubernetes.default.svc:443", "[2001:db8::1]:443"}
	if got := h.Dials(); !slices.Equal(got, want) {
		t.Errorf("Dials() = %q, want every address dialled, refused too: %q", got, want)
	}
}

func TestHostDialsAndListensOnLoopback(t *testing.T) {
	h := humustest.NewHost()
	host := h.Host()
	ctx := context.Background()

	// An address without a host listens on 127.0.0.1.
	ln, err := host.Listen(ctx, "tcp", ":0")
	if err != nil {
		t.Fatalf("Listen(:0): %v", err)
	}
	defer func() { _ = ln.Close() }()
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("Listen(:0) listens on %s, want 127.0.0.1", addr)
	}

	accepted := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			accepted <- err.Error()
			return
		}
		defer func() { _ = conn.Close() }()
		b, _ := io.ReadAll(conn)
		accepted <- string(b)
	}()
	conn, err := host.Dial(ctx, "tcp", addr.String())
	if err != nil {
		t.Fatalf("Dial(%s): %v", addr, err)
	}
	if _, err := io.WriteString(conn, "hello"); err != nil {
		t.Fatalf("writing: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("closing: %v", err)
	}
	if got := <-accepted; got != "hello" {
		t.Errorf("the listener read %q, want hello", got)
	}
	if got := h.Dials(); !slices.Equal(got, []string{addr.String()}) {
		t.Errorf("Dials() = %q, want [%s]", got, addr)
	}
}
