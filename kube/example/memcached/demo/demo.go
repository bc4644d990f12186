package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/memcached/app"
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

// ns is the namespace the controller runs in (its POD_NAMESPACE, where
// its Lease is) and the sample Memcached is applied to.
const ns = "default"

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
	d, err := newDemo(o)
	if err != nil {
		return err
	}
	defer d.removeFolder()
	defer func() { err = d.stop(err) }()
	for _, step := range []func(context.Context) error{
		d.startControlPlane,
		d.applyCRD,
		d.buildController,
		d.startController,
		d.awaitLeading,
		d.applySample,
		d.awaitAvailable,
		d.scaleByHand,
		d.deleteMemcached,
		d.tellFinalizedEvent,
		d.awaitGarbageCollection,
		d.stopController,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	d.term.step("Every step happened, in %s.", time.Since(d.begin).Round(time.Second))
	return nil
}

// A demo is one run's state: what each step leaves for the steps after
// it. The steps are its methods, in steps.go, in the order run calls them.
type demo struct {
	o     options
	begin time.Time
	term  *terminal
	root  string // the repository's root
	dir   string // the control plane's folder
	bin   string // the folder the controller is built into
	// removeFolder removes dir if the demo made it.
	removeFolder func()

	c           *clustertest.Cluster // nil until the control plane has started
	kc          kubernetes.Interface
	dyn         dynamic.Interface
	memcacheds  dynamic.ResourceInterface
	deployments appsv1client.DeploymentInterface
	leases      coordinationv1client.LeaseInterface

	exe    string             // the controller's executable
	probes string             // the controller's probes' address, where /metrics is served too
	ctrl   *controllerProcess // nil until the controller has started

	name string    // the sample Memcached's
	uid  types.UID // the sample Memcached's, as applied
}

// newDemo finds the repository's root and the folders o names, making a
// temporary one for the control plane if o names none.
func newDemo(o options) (*demo, error) {
	d := &demo{o: o, begin: time.Now(), dir: o.dir, bin: o.bin, removeFolder: func() {}}
	d.term = &terminal{w: o.out, begin: d.begin}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	d.root = root
	if d.dir == "" {
		if d.dir, err = os.MkdirTemp("", "humus-demo-"); err != nil {
			return nil, err
		}
		d.removeFolder = func() { _ = os.RemoveAll(d.dir) }
	}
	if d.bin == "" {
		d.bin = filepath.Join(root, ".bin")
	}
	return d, nil
}

// stop kills the controller if it is still running (a step failed
// before SIGTERM's), then stops the control plane if it started, and
// returns err with what went wrong in stopping it.
func (d *demo) stop(err error) error {
	if d.ctrl != nil && d.ctrl.killUnlessExited() {
		d.term.say("The controller was killed.")
	}
	if d.c == nil {
		return err
	}
	d.term.step("Stopping the control plane.")
	if stopErr := d.c.Stop(); stopErr != nil {
		return errors.Join(err, fmt.Errorf("stopping the control plane: %w", stopErr))
	}
	d.term.say("Stopped.")
	return err
}
