package clustertest

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// An Option says where Run and Start get the control plane from, and
// where they say how far they got. Without one, Kubernetes' and etcd's
// released binaries are fetched, or built from source where they can't be
// (see Build), and started with kube-controller-manager, and the progress
// goes to os.Stderr.
type Option func(*options)

// options are what Options set: the sources they name, of which there may
// be one at most, and where progress goes (nil: os.Stderr).
type options struct {
	sources  []from
	progress io.Writer

	fetch         Fetching          // "": FetchOrBuild
	kubernetesURL string            // "": DefaultKubernetesURL
	etcdURL       string            // "": DefaultEtcdURL
	pins          map[string]string // a released file's path → its SHA-256
}

// Progress sends what Run's first Get, Start and Launch say as they work
// to w instead of os.Stderr: a build's progress (see Build) and a line
// saying the components start. io.Discard silences them; nil is
// os.Stderr.
func Progress(w io.Writer) Option {
	return func(o *options) { o.progress = w }
}

// collect is what opts set.
func collect(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// writer is where progress goes.
func (o options) writer() io.Writer {
	if o.progress == nil {
		return os.Stderr
	}
	return o.progress
}

// FromAssets runs the etcd and kube-apiserver binaries in dir, a folder
// laid out as envtest's setup-envtest installs them (the folder it prints,
// which envtest's users keep in KUBEBUILDER_ASSETS), instead of building
// them; nothing is built. They are started as the built ones are, with the
// same flags, CA, tokens and audit log, and Get returns once
// kube-apiserver is ready.
//
// Warning: envtest's assets hold no kube-controller-manager, so nothing
// collects garbage (an object whose owner is deleted stays) and a deleted
// namespace never finishes deleting (it stays Terminating). A test that
// relies on either calls RequireControllers, which fails it saying why.
// The faults, the audit log and FeatureGates work, on whatever release of
// kube-apiserver the folder holds.
func FromAssets(dir string) Option {
	return func(o *options) { o.sources = append(o.sources, from{kind: fromAssets, path: dir}) }
}

// FromKubeconfig uses the existing cluster that the kubeconfig file at
// path points at, with its current context, instead of starting one:
// nothing is built or started, and Stop stops nothing. Namespace,
// ServiceAccount, PodHost, InstallCRD, AwaitCRD and Install work there as
// they do on a control plane of this package's (the CRDs that Install
// created are deleted when Run's tests end). What needs a control plane's
// processes or its CA fails the test saying why: the faults (Kill, Pause,
// Stop, Start, CompactEtcd), Audit and AwaitAudit, FeatureGates and
// ClientCert.
//
// Warning: the tests write to that cluster as its admin, the kubeconfig's
// user, and leave behind what they don't clean up. humustest's Host dials
// loopback only, so a PodHost reaches only a cluster whose server is on
// loopback, as kind's and k3d's are.
func FromKubeconfig(path string) Option {
	return func(o *options) { o.sources = append(o.sources, from{kind: fromKubeconfig, path: path}) }
}

// fromKind is where a control plane comes from.
type fromKind int

const (
	fromSource     fromKind = iota // built from source
	fromAssets                     // envtest's assets
	fromKubeconfig                 // an existing cluster
)

// from is where a control plane comes from: its kind, and the assets'
// folder or the kubeconfig's path.
type from struct {
	kind fromKind
	path string
}

func (f from) String() string {
	switch f.kind {
	case fromAssets:
		return "the control plane of envtest's assets in " + f.path
	case fromKubeconfig:
		return "the existing cluster of the kubeconfig " + f.path
	}
	return "the control plane built from source"
}

// resolve is where opts say the control plane comes from, or an error
// naming every mistake in them.
func resolve(opts []Option) (from, error) {
	froms := collect(opts).sources
	var errs []error
	if len(froms) > 1 {
		errs = append(errs, fmt.Errorf("clustertest: %d sources of a control plane given (%v): give FromAssets or FromKubeconfig once, or neither", len(froms), froms))
	}
	for _, f := range froms {
		if f.path != "" {
			continue
		}
		switch f.kind {
		case fromAssets:
			errs = append(errs, errors.New("clustertest: FromAssets: the folder is empty; it is the folder setup-envtest prints, which envtest's users keep in KUBEBUILDER_ASSETS"))
		case fromKubeconfig:
			errs = append(errs, errors.New("clustertest: FromKubeconfig: the kubeconfig's path is empty"))
		}
	}
	if len(errs) > 0 || len(froms) == 0 {
		return from{}, errors.Join(errs...)
	}
	return froms[0], nil
}

// start starts the control plane f says, in dir, with its binaries fetched
// or built as o says and their progress on o's writer; an existing
// cluster is connected to instead.
func (f from) start(ctx context.Context, dir string, o options) (*Cluster, error) {
	w := o.writer()
	switch f.kind {
	case fromKubeconfig:
		return connect(ctx, f)
	case fromAssets:
		bin, err := assets(f.path)
		if err != nil {
			return nil, err
		}
		f.path = bin
		_, _ = fmt.Fprintf(w, "clustertest: starting etcd and kube-apiserver of %s in %s\n", bin, dir)
		return startBuilt(ctx, dir, bin, f)
	}
	bin, err := build(ctx, o)
	if err != nil {
		return nil, err
	}
	_, _ = fmt.Fprintf(w, "clustertest: starting etcd, kube-apiserver and kube-controller-manager in %s\n", dir)
	return startBuilt(ctx, dir, bin, f)
}

// assets is dir, made absolute, once it holds an etcd and a
// kube-apiserver that are executable files.
func assets(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("clustertest: FromAssets(%q): %w", dir, err)
	}
	var errs []error
	for _, name := range []string{"etcd", "kube-apiserver"} {
		info, err := os.Stat(filepath.Join(abs, name))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("clustertest: FromAssets(%q): %w", dir, err))
		case info.IsDir() || info.Mode().Perm()&0o111 == 0:
			errs = append(errs, fmt.Errorf("clustertest: FromAssets(%q): %s is not an executable file", dir, name))
		}
	}
	return abs, errors.Join(errs...)
}

// connect is the existing cluster of the kubeconfig at f.path, once its
// kube-apiserver answers /readyz.
func connect(ctx context.Context, f from) (*Cluster, error) {
	c, err := loadKubeconfig(f)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := c.admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("clustertest: FromKubeconfig(%q): kube-apiserver at %s isn't ready: %w", f.path, c.config.Host, err)
	}
	return c, nil
}

// loadKubeconfig is the existing cluster of the kubeconfig at f.path,
// its current context, with the files it names read in.
func loadKubeconfig(f from) (*Cluster, error) {
	fail := func(err error) (*Cluster, error) {
		return nil, fmt.Errorf("clustertest: FromKubeconfig(%q): %w", f.path, err)
	}
	path, err := filepath.Abs(f.path)
	if err != nil {
		return fail(err)
	}
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return fail(err)
	}
	if err := clientcmdapi.MinifyConfig(raw); err != nil {
		return fail(err)
	}
	if err := clientcmdapi.FlattenConfig(raw); err != nil {
		return fail(err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
	if err != nil {
		return fail(err)
	}
	cfg.QPS = -1 // no client-side rate limit
	c := &Cluster{from: f, config: cfg, caPEM: cfg.CAData, adminToken: cfg.BearerToken, kubeconfigPath: path}
	if c.kubeconfig, err = clientcmd.Write(*raw); err != nil {
		return fail(err)
	}
	if c.server, err = hostPort(cfg.Host); err != nil {
		return fail(err)
	}
	if c.caPool, err = caPool(c.caPEM); err != nil {
		return fail(err)
	}
	if c.admin, err = kubernetes.NewForConfig(c.AdminConfig()); err != nil {
		return fail(err)
	}
	return c, nil
}

// hostPort is the host and port of a kubeconfig's server URL, with
// HTTPS's port 443 when it names none.
func hostPort(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", fmt.Errorf("the server %q names no host", server)
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "443"), nil
	}
	return u.Host, nil
}

// caPool is a pool of the certificates in caPEM, or the system's roots
// when caPEM is empty.
func caPool(caPEM []byte) (*x509.CertPool, error) {
	if len(caPEM) == 0 {
		return x509.SystemCertPool()
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("its CA holds no PEM certificate")
	}
	return pool, nil
}

// ownsProcesses fails t, saying what (the caller) needs the control
// plane's processes, unless this package started them.
func (c *Cluster) ownsProcesses(t testing.TB, what string) {
	t.Helper()
	if c.from.kind == fromKubeconfig {
		t.Fatalf("clustertest: %s needs a control plane this package starts, and this is %s", what, c.from)
	}
}

// RequireControllers fails t unless the cluster runs kube-controller-manager's
// garbage collector and namespace controller: a control plane built from
// source does, and an existing cluster is taken to; one of envtest's assets
// (FromAssets) doesn't, so there an object whose owner is deleted stays, and
// a deleted namespace never finishes deleting. A test that waits for
// either calls it first, so it fails saying so rather than timing out.
func (c *Cluster) RequireControllers(t testing.TB) {
	t.Helper()
	if c.from.kind == fromAssets {
		t.Fatalf("clustertest: %s needs kube-controller-manager's garbage collector and namespace controller, and %s runs no kube-controller-manager:"+
			" an object whose owner is deleted stays, and a deleted namespace never finishes deleting", t.Name(), c.from)
	}
}

// deleteCreatedCRDs deletes the CRDs Install created, without waiting for
// them to be gone.
func (c *Cluster) deleteCreatedCRDs() error {
	c.crdMu.Lock()
	names := c.created
	c.created = nil
	c.crdMu.Unlock()
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	client, err := c.crdClient()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("clustertest: deleting the CRD %s that Install created: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
