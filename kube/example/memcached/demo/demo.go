package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/memcached/app"
	"github.com/z5labs/humus/kube/internal/procutil"
)

// The files the demo applies, from the repository root.
const (
	crdFile    = "kube/example/memcached/deploy/crds/memcacheds.cache.example.com.yaml"
	sampleFile = "kube/example/memcached/deploy/samples/memcached.yaml"
	controller = "github.com/z5labs/humus/kube/example/memcached"
)

// manager is the field manager of what the demo applies, as kubectl's is
// kubectl.
const manager = "humus-demo"

// podName is the controller's POD_NAME: its identity in the Lease.
const podName = "memcached-controller-demo"

// How long each step may take. The garbage collector's is long: it finds
// a new CRD's resources at its next discovery, every 30s.
const (
	buildTimeout   = 5 * time.Minute
	crdTimeout     = time.Minute
	readyTimeout   = time.Minute
	stepTimeout    = 30 * time.Second
	undoTimeout    = 15 * time.Second
	gcTimeout      = 2 * time.Minute
	exitTimeout    = 40 * time.Second
	eventsTimeout  = 10 * time.Second
	remindInterval = 10 * time.Second
)

// options are what a run may differ in; the zero value is make demo's.
type options struct {
	out io.Writer // where the narration and the controller's lines go
	dir string    // the control plane's folder, as clustertest.Start takes it; "" is a temporary one, removed at the end
	bin string    // the folder the controller is built into; "" is .bin at the repository root
	// verbose passes every line of the controller's through; otherwise
	// its DEBUG and TRACE lines are left out.
	verbose bool
}

// memcachedObject is a Memcached as the API server holds it.
type memcachedObject = kube.Object[app.MemcachedSpec, app.MemcachedStatus]

// run is the demo: see the package doc. Its error names the step that
// didn't happen; whatever it started is stopped either way.
func run(ctx context.Context, o options) (err error) {
	begin := time.Now()
	term := &terminal{w: o.out, begin: begin}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "humus-demo-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
	}
	bin := o.bin
	if bin == "" {
		bin = filepath.Join(root, ".bin")
	}

	term.step("Starting a control plane of its own: etcd, kube-apiserver and kube-controller-manager, " +
		"built from Kubernetes' source if they are missing, into the folder HUMUS_CONTROLPLANE names (make sets .bin/controlplane) or your user cache folder (a cold build takes 13 to 18 minutes on two cores).")
	c, err := clustertest.Launch(ctx, dir, term.prefixed("    "))
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		term.step("Stopping the control plane.")
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the control plane: %w", stopErr))
			return
		}
		term.say("Stopped.")
	}()
	term.say("kube-apiserver is ready at https://%s. It has no scheduler and no kubelet, so no pod ever runs: "+
		"what you see is what the controller writes, and what the API server and the garbage collector do with it.", c.Server())
	kc, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		return err
	}
	const ns = "default"

	// The CRD.
	term.step("Applying the Memcached CRD, %s.", crdFile)
	crd, err := readYAML(filepath.Join(root, crdFile))
	if err != nil {
		return err
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crdGVR).Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: manager, Force: true}); err != nil {
		return fmt.Errorf("applying the CRD: %w", err)
	}
	memcacheds := dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	err = await(ctx, term, crdTimeout, "the CRD to be established and memcacheds served", func(ctx context.Context) error {
		_, err := memcacheds.List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	if err != nil {
		return err
	}
	term.say("The API server serves %s now.", app.Memcached.GVR())

	// The controller.
	term.step("Building the controller, go build %s.", controller)
	exe := filepath.Join(bin, "memcached")
	buildCtx, cancelBuild := context.WithTimeout(ctx, buildTimeout)
	defer cancelBuild()
	build := exec.CommandContext(buildCtx, "go", "build", "-o", exe, controller)
	build.Dir = root
	build.Stdout, build.Stderr = term.prefixed("    "), term.prefixed("    ")
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the controller: %w", err)
	}

	// The probes' address, where /metrics is served too.
	probes, err := freeAddr()
	if err != nil {
		return err
	}
	hidden := " (but for its DEBUG and TRACE lines, which -v shows)"
	if o.verbose {
		hidden = ""
	}
	term.step("Starting the controller as its pod would run: POD_NAMESPACE=%s POD_NAME=%s, KUBECONFIG the control plane's "+
		"(with the admin's credentials), every namespace watched. Its own lines follow, marked \"memcached |\"%s.", ns, podName, hidden)
	ctrl := exec.Command(exe)
	// The demo isn't an App: it runs one, as a process, in the environment
	// it was given, but for the variables it sets.
	env := os.Environ() //nolint:forbidigo // the demo isn't an App
	ctrl.Env = append(withoutVars(env, "KUBECONFIG", "POD_NAMESPACE", "POD_NAME", "WATCH_NAMESPACE", "PROBES_ADDR"),
		"KUBECONFIG="+c.KubeconfigPath(),
		"POD_NAMESPACE="+ns,
		"POD_NAME="+podName,
		"PROBES_ADDR="+probes,
	)
	ctrlOut := term.prefixed("    memcached | ")
	if !o.verbose {
		ctrlOut.skip = belowInfo
	}
	ctrl.Stdout, ctrl.Stderr = ctrlOut, ctrlOut
	if err := procutil.Spawn(ctrl); err != nil {
		return fmt.Errorf("starting the controller: %w", err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		exitErr = ctrl.Wait()
		close(exited)
	}()
	defer func() {
		select {
		case <-exited:
		default: // a step failed before SIGTERM's: no need to wait
			_ = ctrl.Process.Kill()
			<-exited
			term.say("The controller was killed.")
		}
	}()
	running := func() error {
		select {
		case <-exited:
			return fmt.Errorf("the controller exited: %w", exitErr)
		default:
			return nil
		}
	}
	err = await(ctx, term, readyTimeout, "the controller's /readyz to answer ok", func(ctx context.Context) error {
		if err := running(); err != nil {
			return permanent{err}
		}
		return get(ctx, "http://"+probes+"/readyz")
	})
	if err != nil {
		return err
	}
	leases := kc.CoordinationV1().Leases(ns)
	err = await(ctx, term, stepTimeout, "the controller to hold its Lease", func(ctx context.Context) error {
		l, err := leases.Get(ctx, app.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := l.Spec.HolderIdentity; h == nil || *h != podName {
			return fmt.Errorf("the Lease's holder is %q", deref(h))
		}
		return nil
	})
	if err != nil {
		return err
	}
	term.say("Its caches have synced (/readyz says ok), and it leads: it holds the Lease %s/%s.", ns, app.Name)

	// The Memcached.
	term.step("Applying the sample Memcached, %s: size 2, and no image, which the CRD's default fills in.", sampleFile)
	sample, err := readYAML(filepath.Join(root, sampleFile))
	if err != nil {
		return err
	}
	name := sample.GetName()
	applied, err := memcacheds.Apply(ctx, name, sample, metav1.ApplyOptions{FieldManager: manager, Force: true})
	if err != nil {
		return fmt.Errorf("applying the sample: %w", err)
	}
	uid := applied.GetUID()
	deployments := kc.AppsV1().Deployments(ns)
	err = await(ctx, term, stepTimeout, "a Deployment the Memcached controls", func(ctx context.Context) error {
		d, err := deployments.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		owner := metav1.GetControllerOf(d)
		if owner == nil || owner.UID != uid || owner.Kind != "Memcached" {
			return fmt.Errorf("the Deployment's controller owner reference is %+v, want the Memcached %s", owner, uid)
		}
		if r := d.Spec.Replicas; r == nil || *r != 2 {
			return fmt.Errorf("the Deployment has %v replicas, want 2", r)
		}
		term.say("The controller applied Deployment %s/%s: %d replicas of %s. Its controller owner reference is the Memcached "+
			"(%s %s, uid %s), so a change to it reconciles the Memcached, and the garbage collector deletes it with the Memcached. "+
			"It stays at 0 of 2 ready: no pod runs here.",
			ns, name, *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image, owner.Kind, owner.Name, owner.UID)
		return nil
	})
	if err != nil {
		return err
	}
	err = await(ctx, term, stepTimeout, "the Memcached's status to say Available", func(ctx context.Context) error {
		m, err := getMemcached(ctx, memcacheds, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, "Available")
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != m.Generation {
			return fmt.Errorf("the conditions are %+v, want Available True for generation %d", m.Status.Conditions, m.Generation)
		}
		term.say("The Memcached's status says Available %s, reason %s, for its generation %d: the controller applied the status its "+
			"Reconciler returned. It also put its finalizer, %s, on the Memcached.", c.Status, c.Reason, m.Generation, strings.Join(m.Finalizers, ", "))
		return nil
	})
	if err != nil {
		return err
	}

	// A hand-made scale.
	term.step("Scaling the Deployment to 3 by hand, through its scale subresource, as kubectl scale does. The Memcached says 2.")
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := deployments.GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = 3
		_, err = deployments.UpdateScale(ctx, name, scale, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("scaling the Deployment: %w", err)
	}
	scaled := time.Now()
	err = await(ctx, term, undoTimeout, "the controller to put the Deployment back to 2 replicas", func(ctx context.Context) error {
		d, err := deployments.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r := d.Spec.Replicas; r == nil || *r != 2 {
			return fmt.Errorf("the Deployment has %d replicas", deref(r))
		}
		return nil
	})
	if err != nil {
		return err
	}
	term.say("Undone in %s: the change to a Deployment it owns woke the controller, which applied the Memcached's 2 again.",
		time.Since(scaled).Round(time.Millisecond))

	// The deletion.
	term.step("Deleting the Memcached. Its finalizer keeps it until the controller has run Finalize and removed it.")
	if err := memcacheds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the Memcached: %w", err)
	}
	err = await(ctx, term, stepTimeout, "the Memcached to be finalized and gone", func(ctx context.Context) error {
		_, err := memcacheds.Get(ctx, name, metav1.GetOptions{})
		return clustertest.Gone("the Memcached", err)
	})
	if err != nil {
		return err
	}
	term.say("The Memcached is gone: the controller ran Finalize and removed its finalizer, and only then could the API server delete it.")
	// The Events are written in the background, so one may come a moment
	// later, or, if the controller can't write it, not at all: it is told
	// of, not awaited.
	err = await(ctx, nil, eventsTimeout, "", func(ctx context.Context) error {
		events, err := kc.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.UID == uid && e.Reason == "Finalized" {
				term.say("The controller recorded an Event about it: %s %s, %q.", e.Type, e.Reason, e.Note)
				return nil
			}
		}
		return errors.New("no Event yet")
	})
	if err != nil {
		term.say("No Finalized Event about it within %s: the controller records its Events in the background, and may drop one it can't write.", eventsTimeout)
	}

	term.step("Waiting for the garbage collector to delete the Deployment, which the Memcached owned. It learns of a new CRD's " +
		"resources at its next discovery, every 30s, so this can take 30 to 60 seconds.")
	err = awaitReminding(ctx, term, gcTimeout, "the garbage collector to delete the Deployment", func(ctx context.Context) error {
		_, err := deployments.Get(ctx, name, metav1.GetOptions{})
		return clustertest.Gone("the Deployment", err)
	})
	if err != nil {
		return err
	}
	term.say("The Deployment is gone.")

	// SIGTERM.
	term.step("Sending SIGTERM to the controller, as the kubelet does to stop a pod.")
	if err := ctrl.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signalling the controller: %w", err)
	}
	select {
	case <-exited:
	case <-time.After(exitTimeout):
		return fmt.Errorf("the controller hadn't exited %s after SIGTERM", exitTimeout)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if exitErr != nil {
		return fmt.Errorf("the controller's exit: %w, want exit status 0", exitErr)
	}
	l, err := leases.Get(ctx, app.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the Lease: %w", err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		return fmt.Errorf("the Lease is still held by %q after the controller exited, want no holder", *h)
	}
	term.say("The controller exited with status 0, and left its Lease without a holder: a next leader would take over at once.")

	term.step("Every step happened, in %s.", time.Since(begin).Round(time.Second))
	return nil
}

// await calls check every 200ms until it returns nil, and returns an
// error saying what didn't happen, with check's last error, if that
// hasn't happened within timeout. A check that must give up at once
// returns a permanent error.
func await(ctx context.Context, term *terminal, timeout time.Duration, what string, check func(context.Context) error) error {
	return poll(ctx, term, timeout, 0, what, check)
}

// awaitReminding is await that says every 10s that it still waits.
func awaitReminding(ctx context.Context, term *terminal, timeout time.Duration, what string, check func(context.Context) error) error {
	return poll(ctx, term, timeout, remindInterval, what, check)
}

func poll(ctx context.Context, term *terminal, timeout, remind time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	begin := time.Now()
	next := begin.Add(remind)
	var last error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
		err := check(callCtx)
		callCancel()
		if err == nil {
			return nil
		}
		var stop permanent
		if errors.As(err, &stop) {
			return fmt.Errorf("waiting for %s: %w", what, stop.err)
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		if remind > 0 && time.Now().After(next) && term != nil {
			term.say("... still waiting for %s, %s so far.", what, time.Since(begin).Round(time.Second))
			next = next.Add(remind)
		}
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return context.Cause(ctx)
			}
			return fmt.Errorf("%s didn't happen within %s: %w", what, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// permanent is a check's error that ends the wait at once.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }

func getMemcached(ctx context.Context, memcacheds dynamic.ResourceInterface, name string) (memcachedObject, error) {
	var m memcachedObject
	u, err := memcacheds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return m, err
	}
	return m, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m)
}

// readYAML reads the one object in the YAML file at path.
func readYAML(path string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
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

// repoRoot is the nearest folder at or above the working directory that
// holds go.work: the repository's root.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("no go.work in %s or any folder above it: run the demo from the repository", wd)
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// A terminal is where the demo writes: its narration, and the lines of the
// processes it runs, each prefixed, one whole line at a time.
type terminal struct {
	mu    sync.Mutex
	w     io.Writer
	begin time.Time
}

// step writes a step's heading, with the time since the demo began.
func (t *terminal) step(format string, args ...any) {
	t.line(fmt.Sprintf("\n[%3ds] ", int(time.Since(t.begin).Seconds())) + fmt.Sprintf(format, args...))
}

// say writes a line telling what happened.
func (t *terminal) say(format string, args ...any) {
	t.line("       " + fmt.Sprintf(format, args...))
}

func (t *terminal) line(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = io.WriteString(t.w, s+"\n")
}

// prefixed is a writer that writes each whole line written to it to t,
// after prefix.
func (t *terminal) prefixed(prefix string) *prefixWriter {
	return &prefixWriter{t: t, prefix: prefix}
}

type prefixWriter struct {
	mu      sync.Mutex
	t       *terminal
	prefix  string
	skip    func(line string) bool // the lines left out, if not nil
	partial []byte
}

// belowInfo reports whether line is a log line of the controller's, a
// time and a level first, at DEBUG or TRACE.
func belowInfo(line string) bool {
	fields := strings.SplitN(line, " ", 3)
	if len(fields) < 3 {
		return false
	}
	if _, err := time.Parse(time.RFC3339Nano, fields[0]); err != nil {
		return false
	}
	return fields[1] == "DEBUG" || fields[1] == "TRACE"
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		if line := string(p.partial[:i]); p.skip == nil || !p.skip(line) {
			p.t.line(p.prefix + line)
		}
		p.partial = p.partial[i+1:]
	}
}
