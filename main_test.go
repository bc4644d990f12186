package humus_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/z5labs/humus"
)

// childEnv makes the test binary run humus.Main as a child process, with
// the App it names, in place of its tests.
const childEnv = "HUMUS_TEST_MAIN_APP"

func TestMain(m *testing.M) {
	if app, ok := os.LookupEnv(childEnv); ok {
		runChild(app)
	}
	os.Exit(m.Run())
}

// runChild runs humus.Main with one Service, which says "serving" on stdout
// once it serves. Its Shutdown returns nil for the App "serve"; for "hang"
// it says "shutting down" and never returns in time; for "fail", Serve
// returns an error at once.
func runChild(app string) {
	humus.Main(func(_ context.Context, s *humus.Setup) ([]humus.Service, error) {
		return []humus.Service{&childService{app: app, out: s.Host.Stdout}}, nil
	})
}

type childService struct {
	app string
	out io.Writer
}

func (c *childService) Serve(ctx context.Context) error {
	if c.app == "fail" {
		return errors.New("app: the broker refused the connection")
	}
	_, _ = fmt.Fprintln(c.out, "serving")
	<-ctx.Done()
	return nil
}

func (c *childService) Shutdown(ctx context.Context) error {
	if c.app == "hang" {
		_, _ = fmt.Fprintln(c.out, "shutting down")
		time.Sleep(time.Hour)
	}
	return nil
}

// child is the test binary running humus.Main as a process.
type child struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr *bytes.Buffer
}

func startChild(t *testing.T, app string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+app)
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &child{cmd: cmd, stdout: bufio.NewReader(out), stderr: stderr}
}

// await reads the child's stdout until the line want, and fails t if the
// child says something else first, or nothing within a minute.
func (c *child) await(t *testing.T, want string) {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := c.stdout.ReadString('\n')
		got <- strings.TrimSuffix(line, "\n")
	}()
	select {
	case line := <-got:
		if line != want {
			t.Fatalf("the child said %q on stdout, want %q; stderr:\n%s", line, want, c.stderr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the child didn't say %q within a minute", want)
	}
}

// exit waits for the child to exit, within d, and returns its exit code.
func (c *child) exit(t *testing.T, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &exit):
			return exit.ExitCode()
		default:
			t.Fatalf("waiting for the child: %v", err)
		}
	case <-time.After(d):
		t.Fatalf("the child didn't exit within %s; stderr:\n%s", d, c.stderr)
	}
	return -1
}

func TestMainExitsZeroOnASignal(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			c := startChild(t, "serve")
			c.await(t, "serving")
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := c.exit(t, time.Minute); code != 0 {
				t.Errorf("exit code = %d, want 0; stderr:\n%s", code, c.stderr)
			}
			if c.stderr.Len() != 0 {
				t.Errorf("stderr = %q, want nothing", c.stderr)
			}
		})
	}
}

func TestMainExitsOneOnAFailingService(t *testing.T) {
	c := startChild(t, "fail")
	if code := c.exit(t, time.Minute); code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if got, want := c.stderr.String(), "app: the broker refused the connection\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

func TestMainExitsOneAtOnceOnASecondSignal(t *testing.T) {
	c := startChild(t, "hang")
	c.await(t, "serving")
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.await(t, "shutting down")
	sent := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// Well within the default grace period of 20s, which the hanging
	// Shutdown would otherwise use up.
	code := c.exit(t, 10*time.Second)

	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if got := time.Since(sent); got >= humus.DefaultGracePeriod {
		t.Errorf("the child exited %s after the second signal, want at once", got)
	}
	if got, want := c.stderr.String(), "humus: a second signal (terminated) during the shutdown: exiting at once\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}
