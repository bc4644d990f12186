package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus/kube/example/memcached/app"
	"github.com/z5labs/humus/kube/internal/procutil"
)

// buildController builds the controller into the demo's bin folder.
func (d *demo) buildController(ctx context.Context) error {
	d.term.step("Building the controller, go build %s.", controller)
	d.exe = filepath.Join(d.bin, "memcached")
	buildCtx, cancelBuild := context.WithTimeout(ctx, buildTimeout)
	defer cancelBuild()
	build := exec.CommandContext(buildCtx, "go", "build", "-o", d.exe, controller)
	build.Dir = d.root
	build.Stdout, build.Stderr = d.term.prefixed("    "), d.term.prefixed("    ")
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the controller: %w", err)
	}
	return nil
}

// startController runs the controller as a process of its own, as its
// pod would, with its lines on the terminal.
func (d *demo) startController(context.Context) error {
	probes, err := freeAddr()
	if err != nil {
		return err
	}
	d.probes = probes
	hidden := " (but for its DEBUG and TRACE lines, which -v shows)"
	if d.o.verbose {
		hidden = ""
	}
	d.term.step("Starting the controller as its pod would run: POD_NAMESPACE=%s POD_NAME=%s, KUBECONFIG the control plane's "+
		"(with the admin's credentials), every namespace watched. Its own lines follow, marked \"memcached |\"%s.", ns, podName, hidden)
	cmd := exec.Command(d.exe)
	// The demo isn't an App: it runs one, as a process, in the environment
	// it was given, but for the variables it sets.
	env := os.Environ() //nolint:forbidigo // the demo isn't an App
	cmd.Env = append(withoutVars(env, "KUBECONFIG", "POD_NAMESPACE", "POD_NAME", "WATCH_NAMESPACE", "PROBES_ADDR"),
		"KUBECONFIG="+d.c.KubeconfigPath(),
		"POD_NAMESPACE="+ns,
		"POD_NAME="+podName,
		"PROBES_ADDR="+probes,
	)
	out := d.term.prefixed("    memcached | ")
	if !d.o.verbose {
		out.skip = belowInfo
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := procutil.Spawn(cmd); err != nil {
		return fmt.Errorf("starting the controller: %w", err)
	}
	d.ctrl = watchProcess(cmd)
	return nil
}

// stopController sends SIGTERM to the controller and checks that it
// exits with status 0 and leaves its Lease without a holder.
func (d *demo) stopController(ctx context.Context) error {
	d.term.step("Sending SIGTERM to the controller, as the kubelet does to stop a pod.")
	if err := d.ctrl.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signalling the controller: %w", err)
	}
	select {
	case <-d.ctrl.exited:
	case <-time.After(exitTimeout):
		return fmt.Errorf("the controller hadn't exited %s after SIGTERM", exitTimeout)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if d.ctrl.exitErr != nil {
		return fmt.Errorf("the controller's exit: %w, want exit status 0", d.ctrl.exitErr)
	}
	l, err := d.leases.Get(ctx, app.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the Lease: %w", err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		return fmt.Errorf("the Lease is still held by %q after the controller exited, want no holder", *h)
	}
	d.term.say("The controller exited with status 0, and left its Lease without a holder: a next leader would take over at once.")
	return nil
}

// A controllerProcess is the controller's process, started, and whether
// it has exited.
type controllerProcess struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	exitErr error         // Wait's, set before exited is closed
}

// watchProcess waits for cmd, started, in the background.
func watchProcess(cmd *exec.Cmd) *controllerProcess {
	p := &controllerProcess{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// running reports an error if the process has exited.
func (p *controllerProcess) running() error {
	select {
	case <-p.exited:
		return fmt.Errorf("the controller exited: %w", p.exitErr)
	default:
		return nil
	}
}

// killUnlessExited kills the process unless it has exited, waits for it
// to end, and reports whether it killed it.
func (p *controllerProcess) killUnlessExited() bool {
	select {
	case <-p.exited:
		return false
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return true
	}
}

// get GETs url, and reports an error unless the answer is 200 OK.
func get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// freeAddr picks a free address on 127.0.0.1.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0") //nolint:forbidigo // the demo isn't an App: the port is its controller's
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// withoutVars is env without the variables named.
func withoutVars(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			if name == n {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
