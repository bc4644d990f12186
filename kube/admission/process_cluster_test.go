package admission_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/internal/procutil"
	"github.com/z5labs/humus/webhook"
)

// What the webhook's process is given, in its environment.
const (
	procEnv    = "HUMUS_ADMISSION_PROCESS" // "1" in the child
	procName   = "HUMUS_ADMISSION_NAME"    // the configuration's name
	procPolicy = "HUMUS_ADMISSION_POLICY"  // Fail or Ignore
	procAddr   = "HUMUS_ADMISSION_ADDR"    // where it listens
	procCerts  = "HUMUS_ADMISSION_CERTS"   // the folder of its tls.crt and tls.key
)

// What it writes on its stdout.
const (
	procServing = "admission process: serving"
	procReview  = "admission process: review" // and the name of the object
)

// TestAdmissionProcessHelper is the webhook's process in the fault tests,
// and does nothing in any other process: faultHooks' Handler on a
// webhook.Service, through humus.Run on the real Host, saying on stdout
// when it serves and each object it is handed.
func TestAdmissionProcessHelper(t *testing.T) {
	if os.Getenv(procEnv) != "1" {
		t.Skip("the webhook's process of the admission fault tests")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	os.Exit(humus.Run(ctx, humus.OSHost(), func(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
		hooks := faultHooks(os.Getenv(procName), admissionregistrationv1.FailurePolicyType(os.Getenv(procPolicy)),
			func(name string) { fmt.Println(procReview, name) }, nil)
		h, err := hooks.Handler(s.Telemetry)
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("POST /admission/", h)
		svc, err := webhook.NewService(s, webhook.Settings{Addr: os.Getenv(procAddr), CertDir: os.Getenv(procCerts)}, mux)
		if err != nil {
			return nil, err
		}
		go func() {
			if _, err := svc.Addr(ctx); err == nil {
				fmt.Println(procServing)
			}
		}()
		return []humus.Service{svc}, nil
	}))
}

// procServer is the webhook in a process of its own, which a fault test
// kills and starts again on the same address.
type procServer struct {
	t     *testing.T
	name  string
	fp    admissionregistrationv1.FailurePolicyType
	addr  string
	certs string
	hooks admission.Webhooks // its Endpoint the process's URL and CA
	outs  []*procutil.SyncBuffer
	cmd   *exec.Cmd
	done  chan struct{}
}

// newProcServer starts the webhook's process, of a certificate of a CA of
// its own, on a free port of 127.0.0.1.
func newProcServer(t *testing.T, name string, fp admissionregistrationv1.FailurePolicyType) *procServer {
	t.Helper()
	authority, err := clustertest.NewCA("admission webhook CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := authority.Serving("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	s := &procServer{t: t, name: name, fp: fp, certs: t.TempDir()}
	for file, b := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(s.certs, file), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	_ = l.Close()
	s.hooks = faultHooks(name, fp, nil, nil)
	s.hooks.Endpoint = admission.Endpoint{URL: "https://" + s.addr + "/admission", CABundle: authority.PEM()}
	s.start()
	return s
}

// start starts the process, and returns once it serves.
func (s *procServer) start() {
	t := s.t
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAdmissionProcessHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), procEnv+"=1", procName+"="+s.name, procPolicy+"="+string(s.fp),
		procAddr+"="+s.addr, procCerts+"="+s.certs, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out := &procutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := procutil.Spawn(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	s.outs = append(s.outs, out)
	t.Cleanup(func() {
		procutil.KillGroup(cmd.Process.Pid)
		<-done
	})
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		select {
		case <-done:
			t.Fatalf("the webhook's process exited before it served: %s\n%s", cmd.ProcessState, out.String())
		default:
		}
		if !strings.Contains(out.String(), procServing) {
			return fmt.Errorf("the webhook's process doesn't serve yet")
		}
		return nil
	})
}

// kill kills the process with SIGKILL, and returns when, once it has
// exited.
func (s *procServer) kill() time.Time {
	s.t.Helper()
	at := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Fatal("the webhook's process hadn't exited 10s after SIGKILL")
	}
	return at
}

// seen is the names of the objects the processes were handed.
func (s *procServer) seen() map[string]bool {
	out := map[string]bool{}
	for _, o := range s.outs {
		for line := range strings.Lines(o.String()) {
			if name, ok := strings.CutPrefix(strings.TrimSpace(line), procReview+" "); ok {
				out[name] = true
			}
		}
	}
	return out
}
