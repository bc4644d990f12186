package clustertest

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/z5labs/humus/kube/internal/procutil"
)

// Bounds on the control plane's steps.
const (
	// stopGrace is how long a component has to exit after SIGTERM before
	// it is killed. kube-apiserver doesn't exit on SIGTERM within 30s once
	// etcd is gone.
	stopGrace = 10 * time.Second
	// readyTimeout is how long a component has to become ready after it
	// is started, on a machine busy with other builds.
	readyTimeout = 3 * time.Minute
	// logLines is how many of a log's last lines a component's failure to
	// start shows.
	logLines = 40
)

// A Cluster is a running control plane. Started by this package (from
// source, or from envtest's assets) it is etcd, kube-apiserver and, from
// source, kube-controller-manager (the garbage collector and namespace
// controllers only), each listening on 127.0.0.1 only; given by
// FromKubeconfig it is an existing cluster, which this package only
// talks to. Its methods are safe for concurrent use; stopping and
// starting components are serialised.
type Cluster struct {
	from           from
	dir            string
	ca             *CA // nil for an existing cluster
	caPEM          []byte
	caPool         *x509.CertPool
	adminToken     string
	server         string
	config         *rest.Config // the admin's
	kubeconfig     []byte
	kubeconfigPath string
	admin          kubernetes.Interface
	http           *http.Client // trusts the CA, keeps no idle connections
	audit          auditReader

	mu                sync.Mutex // guards the processes
	etcd              *process   // nil for an existing cluster
	apiserver         *process   // nil for an existing cluster
	controllerManager *process   // nil unless built from source

	crdMu   sync.Mutex
	created []string // the CRDs Install created on an existing cluster
}

// shared is the test binary's one control plane, started by the first Get.
var shared struct {
	mu      sync.Mutex
	running bool // Run is running the tests
	opts    []Option
	started bool // Get tried to start c
	c       *Cluster
	dir     string
	err     error
	watched map[testing.TB]bool // the tests whose failure kept watches for
	kept    keptLogs
}

// Run is a test binary's TestMain body:
//
//	func TestMain(m *testing.M) { os.Exit(clustertest.Run(m)) }
//
// It runs m's tests; a control plane is started only when a test first
// calls Get, from where opts say (fetched or built, as Build does, unless
// FromAssets or FromKubeconfig says otherwise), and stopped when they end.
//
// A test that called Get and failed says, on stderr, before go test
// prints the test's own output, so that the test's failure comes last:
// the folder the control plane's logs are kept in (each component's and
// the audit log, which outlive the test binary there), and the last of
// the lines that matter that they wrote while the test ran: errors
// (klog's E and F lines, etcd's of level error and above, panics), the
// components' restarts, and the writes the API server failed (5xx) or
// refused for want of rights (401, 403). With go test -v, which prints
// a test's failure as it happens, they come after it.
func Run(m *testing.M, opts ...Option) int {
	shared.mu.Lock()
	shared.running = true
	shared.opts = opts
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	defer shared.mu.Unlock()
	if c := shared.c; c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if err := shared.kept.finish(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if shared.dir != "" {
		if err := os.RemoveAll(shared.dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}

// Get returns the test binary's one control plane, building missing
// binaries and starting it on first use; it fails t if it can't. The test
// binary's TestMain must call Run. Under go test -short it skips t
// instead: -short runs only the tests that need no control plane. Off
// Unix (on Windows, say) it skips t too, saying the control plane runs
// on Unix only, unless Run was given FromKubeconfig, which starts
// nothing.
func Get(t testing.TB) *Cluster {
	t.Helper()
	SkipShort(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.running {
		t.Fatal("clustertest: Get needs the test binary's TestMain to call clustertest.Run")
	}
	if f, err := resolve(shared.opts); err == nil && f.kind != fromKubeconfig && !procutil.Supported {
		t.Skip(errUnixOnly)
	}
	if !shared.started {
		shared.started = true
		shared.c, shared.dir, shared.err = startShared(shared.opts)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	if !shared.watched[t] {
		if shared.watched == nil {
			shared.watched = map[testing.TB]bool{}
		}
		shared.watched[t] = true
		shared.kept.watch(t, shared.c, os.Stderr)
		t.Cleanup(func() { // before watch's, which needn't hold shared.mu
			shared.mu.Lock()
			delete(shared.watched, t)
			shared.mu.Unlock()
		})
	}
	return shared.c
}

// SkipShort skips t under go test -short, saying it needs the control
// plane. Get calls it; a test that builds or starts a control plane
// another way calls it first.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("clustertest: needs the control plane; -short runs only the tests that don't")
	}
}

// startShared starts a control plane in a fresh temporary folder, first
// removing the folders of test binaries that died without removing
// theirs; or, given FromKubeconfig, connects to that cluster.
func startShared(opts []Option) (*Cluster, string, error) {
	o, err := resolve(opts)
	if err != nil {
		return nil, "", err
	}
	settings := collect(opts)
	w := settings.writer()
	if o.kind == fromKubeconfig {
		c, err := o.start(context.Background(), "", settings)
		return c, "", err
	}
	removeOrphans(w)
	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return nil, "", fmt.Errorf("clustertest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, dir, fmt.Errorf("clustertest: %w", err)
	}
	c, err := o.start(context.Background(), dir, settings)
	return c, dir, err
}

// tempPrefix names the temporary folders of test binaries' control planes.
const tempPrefix = "humus-controlplane-"

// removeOrphans removes the temporary folders whose test binary is gone,
// and whose components are gone too. Off Linux a component has no
// parent-death signal, so etcd and kube-apiserver outlive a test binary
// that died without stopping them, and run on in their folder: that
// folder is left in place, and w told which processes hold it, for a
// person to kill (removeOrphans kills nothing, since a pid in a file may
// since have been reused).
func removeOrphans(w io.Writer) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range dirs {
		pid, ok := readPid(filepath.Join(dir, "pid"))
		if !ok || procutil.Alive(pid) {
			continue
		}
		var running []string
		files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, f := range files {
			if p, ok := readPid(f); ok && procutil.Alive(p) {
				running = append(running, fmt.Sprintf("%s (pid %d)", strings.TrimSuffix(filepath.Base(f), ".pid"), p))
			}
		}
		if len(running) > 0 {
			verb, them := "is", "it"
			if len(running) > 1 {
				verb, them = "are", "them"
			}
			_, _ = fmt.Fprintf(w, "clustertest: %s: its test binary (pid %d) is gone, but %s %s still running in it, so it is left in place: kill %s to have it removed\n",
				dir, pid, strings.Join(running, " and "), verb, them)
			continue
		}
		_ = os.RemoveAll(dir) // best effort: the next test binary tries again
	}
}

// readPid reads the process id in the file at path.
func readPid(path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid, err == nil && pid > 0
}

// Start starts a control plane that keeps its certificates, tokens, etcd
// data, logs and kubeconfig in dir, from where opts say: fetched or
// built (see Build) unless FromAssets or FromKubeconfig says otherwise
// (FromKubeconfig starts nothing, and ignores dir). Its build's progress,
// and a line saying the components start, go to os.Stderr unless Progress
// says otherwise. It returns once every component is ready; the caller
// stops it with Stop, which leaves dir in place. Tests call Get instead.
//
// dir is made absolute, and created when missing. A folder that holds
// anything is emptied only when an earlier Start wrote its marker file,
// .clustertest, there; any other is refused with an error naming it and
// what it holds, and nothing in it is touched, so a mistaken folder (".",
// a home folder) never loses a file. Start writes the marker into dir.
//
// Off Unix (on Windows, say) it returns an error saying the control plane
// runs on Unix only, unless FromKubeconfig is given.
func Start(ctx context.Context, dir string, opts ...Option) (*Cluster, error) {
	f, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	o := collect(opts)
	if f.kind == fromKubeconfig {
		return f.start(ctx, "", o)
	}
	if !procutil.Supported {
		return nil, errUnixOnly
	}
	dir, err = prepareDir(dir)
	if err != nil {
		return nil, err
	}
	return f.start(ctx, dir, o)
}

// Launch is Start(ctx, dir, Progress(w)) for a person at a terminal, as
// the cluster command and the Memcached demo call it: it builds missing
// binaries with their progress on w, starts the control plane in dir
// (with Start's care for what dir holds) with a line on w, and returns it
// once every component is ready. Its kubeconfig, with the admin's
// credentials embedded, is KubeconfigPath, in dir.
func Launch(ctx context.Context, dir string, w io.Writer) (*Cluster, error) {
	return Start(ctx, dir, Progress(w))
}

// errUnixOnly says the control plane's processes can't run here.
var errUnixOnly = fmt.Errorf("clustertest: the control plane runs on Unix only, and this is %s", runtime.GOOS)

// markerFile, in a folder of Start's, says Start made the folder its own:
// Start empties a folder only when it is missing, empty, or holds it.
const (
	markerFile = ".clustertest"
	markerText = "This folder holds the files of a control plane that github.com/z5labs/humus/kube/clustertest started.\n" +
		"The next start in this folder empties it.\n"
)

// prepareDir makes dir absolute, creates it or empties it (see Start),
// and writes the marker into it.
func prepareDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("clustertest: no folder given for the control plane's files")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("clustertest: the folder %s: %w", dir, err)
	}
	entries, err := os.ReadDir(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = os.MkdirAll(abs, 0o755)
	case err != nil:
	case len(entries) == 0:
	case marked(abs):
		for _, e := range entries {
			if err = os.RemoveAll(filepath.Join(abs, e.Name())); err != nil {
				break
			}
		}
	default:
		return "", fmt.Errorf("clustertest: refusing to use the folder %s for the control plane's files: it holds %s, and no %s file"+
			" of an earlier start says it is the control plane's to empty; name a folder that is missing or empty", abs, list(entries), markerFile)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(abs, markerFile), []byte(markerText), 0o644)
	}
	if err != nil {
		return "", fmt.Errorf("clustertest: the folder %s: %w", abs, err)
	}
	return abs, nil
}

// marked reports whether dir holds the marker file an earlier start wrote.
func marked(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, markerFile))
	return err == nil && string(data) == markerText
}

// list names the first three of entries, and says how many more there are.
func list(entries []os.DirEntry) string {
	var names []string
	for _, e := range entries[:min(3, len(entries))] {
		names = append(names, strconv.Quote(e.Name()))
	}
	s := strings.Join(names, ", ")
	if more := len(entries) - len(names); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// startBuilt starts a control plane of the binaries in bin: etcd,
// kube-apiserver and, unless from is envtest's assets,
// kube-controller-manager; see Start.
func startBuilt(ctx context.Context, dir, bin string, from from) (*Cluster, error) {
	c, err := newCluster(dir, bin, from)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err = c.startEtcd(ctx)
	if err == nil {
		err = c.startAPIServer(ctx)
	}
	if err == nil && c.controllerManager != nil {
		err = c.startControllerManager(ctx)
	}
	if err != nil {
		_ = c.stopAll() // err says which component failed
		return nil, err
	}
	return c, nil
}

// newCluster writes the control plane's files into dir and sets up its
// components' command lines, on free loopback ports, from the binaries
// in bin.
func newCluster(dir, bin string, from from) (*Cluster, error) {
	ca, err := NewCA("humus test control plane CA")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		from:           from,
		dir:            dir,
		ca:             ca,
		caPEM:          ca.pem,
		caPool:         ca.Pool(),
		adminToken:     newToken(),
		server:         "127.0.0.1:" + strconv.Itoa(ports[2]),
		kubeconfigPath: filepath.Join(dir, "kubeconfig"),
	}
	c.config = &rest.Config{
		Host:            "https://" + c.server,
		BearerToken:     c.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.pem},
		QPS:             -1, // no client-side rate limit
	}
	c.http = &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConfig(c.caPool), DisableKeepAlives: true},
	}
	c.admin, err = kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	if err := c.writeFiles(); err != nil {
		return nil, err
	}
	c.commandLines(bin, ports)
	return c, nil
}

// writeFiles writes into c's folder the certificates, keys, tokens,
// kubeconfigs and audit policy its components read.
func (c *Cluster) writeFiles() error {
	servingCert, servingKey, err := c.ca.Serving("localhost", "127.0.0.1")
	if err != nil {
		return err
	}
	saKey, saPub, err := signingKey()
	if err != nil {
		return err
	}
	kcmToken := newToken()
	c.kubeconfig, err = kubeconfig(c.server, c.ca.pem, "admin", c.adminToken)
	if err != nil {
		return err
	}
	kcmKubeconfig, err := kubeconfig(c.server, c.ca.pem, "kube-controller-manager", kcmToken)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"ca.crt":                             c.ca.pem,
		"serving.crt":                        servingCert,
		"serving.key":                        servingKey,
		"service-account.key":                saKey,
		"service-account.pub":                saPub,
		"kubeconfig":                         c.kubeconfig,
		"kube-controller-manager.kubeconfig": kcmKubeconfig,
		// token,user,uid,"group,..."
		"tokens.csv": []byte(c.adminToken + `,admin,admin,"system:masters"` + "\n" +
			kcmToken + `,system:kube-controller-manager,kube-controller-manager,"system:masters"` + "\n"),
		auditPolicyFile: []byte(auditPolicy),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(c.dir, name), data, 0o600); err != nil {
			return fmt.Errorf("clustertest: %w", err)
		}
	}
	return nil
}

// commandLines sets up etcd's, kube-apiserver's and, unless c runs
// envtest's assets, kube-controller-manager's command lines, from the
// binaries in bin, on ports: etcd's client and peer ports,
// kube-apiserver's and kube-controller-manager's.
func (c *Cluster) commandLines(bin string, ports []int) {
	etcdClient, etcdPeer, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	path := func(name string) string { return filepath.Join(c.dir, name) }
	loopback := func(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
	c.etcd = &process{
		name:    "etcd",
		path:    filepath.Join(bin, "etcd"),
		log:     path("etcd.log"),
		pidFile: path("etcd.pid"),
		args: []string{
			"--name=default",
			"--data-dir=" + path("etcd"),
			"--listen-client-urls=" + loopback(etcdClient),
			"--advertise-client-urls=" + loopback(etcdClient),
			"--listen-peer-urls=" + loopback(etcdPeer),
			"--initial-advertise-peer-urls=" + loopback(etcdPeer),
			"--initial-cluster=default=" + loopback(etcdPeer),
			// The data outlives a stop and a start; only a crash of the
			// machine could lose it, and then the control plane is gone too.
			"--unsafe-no-fsync",
			// 8 GiB, not the default 2: a benchmark of 100,000 objects holds
			// two sets of them, each a Memcached, a Deployment and an Event,
			// and their history until kube-apiserver compacts it.
			"--quota-backend-bytes=8589934592",
		},
	}
	c.apiserver = &process{
		name:    "kube-apiserver",
		path:    filepath.Join(bin, "kube-apiserver"),
		log:     path("kube-apiserver.log"),
		pidFile: path("kube-apiserver.pid"),
		args: []string{
			"--etcd-servers=" + loopback(etcdClient),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(apiPort),
			// The default reconciler refuses to advertise 127.0.0.1.
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + path("kube-apiserver"),
			"--tls-cert-file=" + path("serving.crt"),
			"--tls-private-key-file=" + path("serving.key"),
			"--client-ca-file=" + path("ca.crt"),
			"--token-auth-file=" + path("tokens.csv"),
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + path("service-account.pub"),
			"--service-account-signing-key-file=" + path("service-account.key"),
			"--service-cluster-ip-range=10.0.0.0/24",
			// Without it, SIGTERM waits up to a minute for open watches.
			"--shutdown-watch-termination-grace-period=2s",
			// A namespace's deletion deletes each kind's objects with one
			// deletecollection, which deletes them one after another
			// unless more workers share them: 20,000 took 25 s with one.
			"--delete-collection-workers=4",
			// Every write, at Metadata level, once complete (see Audit),
			// appended to one file that outlives restarts: no rotation, and
			// each event written before its request's handler returns.
			"--audit-policy-file=" + path(auditPolicyFile),
			"--audit-log-path=" + path(auditLogFile),
			"--audit-log-format=json",
			"--audit-log-mode=blocking",
			"--audit-log-maxsize=0",
		},
	}
	if c.from.kind != fromAssets {
		c.controllerManager = c.controllerManagerCommand(bin, kcmPort)
	}
}

// controllerManagerCommand is kube-controller-manager's command line,
// running exactly the garbage collector and namespace controllers, its
// health checks served on port.
func (c *Cluster) controllerManagerCommand(bin string, port int) *process {
	path := func(name string) string { return filepath.Join(c.dir, name) }
	return &process{
		name:    "kube-controller-manager",
		path:    filepath.Join(bin, "kube-controller-manager"),
		log:     path("kube-controller-manager.log"),
		pidFile: path("kube-controller-manager.pid"),
		args: []string{
			"--kubeconfig=" + path("kube-controller-manager.kubeconfig"),
			"--controllers=garbagecollector,namespace",
			"--leader-elect=false",
			"--use-service-account-credentials=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--tls-cert-file=" + path("serving.crt"),
			"--tls-private-key-file=" + path("serving.key"),
		},
	}
}

// kubeconfig is a kubeconfig for server with the CA and a bearer token
// embedded.
func kubeconfig(server string, caPEM []byte, user, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["controlplane"] = &clientcmdapi.Cluster{Server: "https://" + server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "controlplane", AuthInfo: user}
	cfg.CurrentContext = user
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("clustertest: writing a kubeconfig: %w", err)
	}
	return data, nil
}

// Stop stops kube-controller-manager, kube-apiserver and etcd, in that
// order; a component that hasn't exited 10s after SIGTERM is killed. It
// leaves the folder given to Start in place, and reports any component
// that had already exited on its own. On an existing cluster
// (FromKubeconfig) it stops nothing, and deletes the CRDs that Install
// created there. Tests don't call it: Run does.
func (c *Cluster) Stop() error {
	if c.from.kind == fromKubeconfig {
		return c.deleteCreatedCRDs()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopAll()
}

func (c *Cluster) stopAll() error {
	return errors.Join(
		c.controllerManager.stop(stopGrace),
		c.apiserver.stop(stopGrace),
		c.etcd.stop(stopGrace),
	)
}

// Server is kube-apiserver's address, "127.0.0.1:PORT" for a control
// plane this package started; it serves HTTPS with a certificate signed
// by CA. For an existing cluster it is the host and port of the
// kubeconfig's server URL, 443 when the URL names none.
func (c *Cluster) Server() string { return c.server }

// CA is a pool holding the CA that signed kube-apiserver's serving
// certificate and the client certificates of ClientCert. For an existing
// cluster it holds the kubeconfig's CA, or is the system's roots when the
// kubeconfig names none.
func (c *Cluster) CA() *x509.CertPool { return c.caPool.Clone() }

// CAPEM is the CA of CA, PEM-encoded; for an existing cluster whose
// kubeconfig names no CA, it is empty.
func (c *Cluster) CAPEM() []byte { return bytes.Clone(c.caPEM) }

// AdminToken is a bearer token for user "admin" in group system:masters.
// For an existing cluster it is the kubeconfig's token, or "" when the
// kubeconfig authenticates otherwise (a client certificate, an exec
// plugin): use AdminConfig.
func (c *Cluster) AdminToken() string { return c.adminToken }

// AdminConfig is a fresh client-go config for the admin: Server, the CA
// and AdminToken, with client-side rate limiting off. It keeps working
// across restarts of kube-apiserver and etcd. For an existing cluster it
// is the kubeconfig's current context, with client-side rate limiting
// off too.
func (c *Cluster) AdminConfig() *rest.Config {
	cfg := rest.CopyConfig(c.config)
	cfg.CAData = bytes.Clone(cfg.CAData)
	cfg.CertData = bytes.Clone(cfg.CertData)
	cfg.KeyData = bytes.Clone(cfg.KeyData)
	return cfg
}

// Kubeconfig is a kubeconfig with Server, the CA and AdminToken embedded,
// for clientcmd.Load and kubectl. For an existing cluster it is the
// kubeconfig given, cut to its current context, with the files it names
// embedded.
func (c *Cluster) Kubeconfig() []byte { return bytes.Clone(c.kubeconfig) }

// KubeconfigPath is the file holding Kubeconfig, which lives as long as
// the control plane. For an existing cluster it is the kubeconfig given
// to FromKubeconfig, as it is on disk.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfigPath }

// StopAPIServer, StartAPIServer, StopEtcd and StartEtcd fail the test on
// an existing cluster (FromKubeconfig), which this package didn't start.

// StopAPIServer stops kube-apiserver, killing it if it hasn't exited 10s
// after SIGTERM. Unless the test starts it again, it is started at the
// test's cleanup, so later tests find it running. The control plane is
// shared: call it only from tests that don't run in parallel.
func (c *Cluster) StopAPIServer(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "StopAPIServer")
	c.stopComponent(t, c.apiserver, c.startAPIServer)
}

// StartAPIServer starts kube-apiserver again, on the same port and with
// the same certificates, tokens and data, and returns once it is ready.
func (c *Cluster) StartAPIServer(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "StartAPIServer")
	c.startComponent(t, c.apiserver, c.startAPIServer)
}

// StopEtcd stops etcd, killing it if it hasn't exited 10s after SIGTERM.
// kube-apiserver keeps running and fails requests that need storage.
// Unless the test starts it again, it is started at the test's cleanup.
// The control plane is shared: call it only from tests that don't run in
// parallel.
func (c *Cluster) StopEtcd(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "StopEtcd")
	c.stopComponent(t, c.etcd, c.startEtcd)
}

// StartEtcd starts etcd again, on the same ports and with the same data,
// and returns once it is healthy and, when kube-apiserver is running,
// kube-apiserver is ready again.
func (c *Cluster) StartEtcd(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "StartEtcd")
	c.startComponent(t, c.etcd, c.startEtcd)
}

func (c *Cluster) stopComponent(t testing.TB, p *process, start func(context.Context) error) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := p.stop(stopGrace); err != nil {
		t.Fatal(err)
	}
	c.restoreAtCleanup(t, p, start)
}

// restoreAtCleanup resumes p at t's cleanup if it is paused then, and
// starts it if it isn't running then, so later tests find it running.
func (c *Cluster) restoreAtCleanup(t testing.TB, p *process, start func(context.Context) error) {
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if p.paused {
			if err := c.resumeReady(context.Background(), p); err != nil {
				t.Error(err)
			}
		}
		if !p.running() {
			if err := start(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
}

func (c *Cluster) startComponent(t testing.TB, p *process, start func(context.Context) error) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.running() {
		t.Fatalf("clustertest: %s is already running", p.name)
	}
	if err := start(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// startEtcd starts etcd and waits until it reports itself healthy, and
// then until kube-apiserver, when it runs, is ready again.
func (c *Cluster) startEtcd(ctx context.Context) error {
	if err := c.etcd.start(); err != nil {
		return err
	}
	return c.waitEtcd(ctx)
}

// waitEtcd waits until etcd reports itself healthy, and then until
// kube-apiserver, when it runs unpaused, is ready again.
func (c *Cluster) waitEtcd(ctx context.Context) error {
	url := c.etcd.flag("--advertise-client-urls") + "/health"
	err := c.waitReady(ctx, c.etcd, func(ctx context.Context) error {
		return c.get(ctx, url, "", `"health":"true"`)
	})
	if err != nil || !c.apiserver.running() || c.apiserver.paused {
		return err
	}
	return c.waitAPIServer(ctx)
}

// startAPIServer starts kube-apiserver and waits until /readyz says ok.
func (c *Cluster) startAPIServer(ctx context.Context) error {
	if err := c.apiserver.start(); err != nil {
		return err
	}
	return c.waitAPIServer(ctx)
}

func (c *Cluster) waitAPIServer(ctx context.Context) error {
	return c.waitReady(ctx, c.apiserver, func(ctx context.Context) error {
		return c.get(ctx, "https://"+c.server+"/readyz", c.adminToken, "ok")
	})
}

// startControllerManager starts kube-controller-manager and waits until
// its health check lists both controllers as ok.
func (c *Cluster) startControllerManager(ctx context.Context) error {
	if err := c.controllerManager.start(); err != nil {
		return err
	}
	url := "https://127.0.0.1:" + c.controllerManager.flag("--secure-port") + "/healthz?verbose"
	return c.waitReady(ctx, c.controllerManager, func(ctx context.Context) error {
		return c.get(ctx, url, "", "]garbage-collector-controller ok", "]namespace-controller ok")
	})
}

// waitReady polls ready until it succeeds, p exits, or readyTimeout
// passes.
func (c *Cluster) waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("clustertest: %s exited before it was ready: %w\n%s", p.name, p.exitError(), tail(p.log, logLines))
		case <-ctx.Done():
			return fmt.Errorf("clustertest: %s not ready: %w (%w)\n%s", p.name, err, context.Cause(ctx), tail(p.log, logLines))
		case <-tick.C:
		}
	}
}

// get GETs url, with token as bearer when it isn't empty, and reports an
// error unless the answer is 200 OK with a body holding every one of want.
func (c *Cluster) get(ctx context.Context, url, token string, want ...string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, lastLines(body, 10))
	}
	for _, w := range want {
		if !strings.Contains(string(body), w) {
			return fmt.Errorf("GET %s: %q lacks %q", url, lastLines(body, 10), w)
		}
	}
	return nil
}

// freePorts picks n distinct ports that are free on 127.0.0.1, below the
// usual ephemeral range (32768 and up), so no outgoing connection takes
// one of them between a stop and a start.
func freePorts(n int) ([]int, error) {
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("clustertest: found only %d of %d free ports on 127.0.0.1", len(ports), n)
		}
		port := 20000 + rand.IntN(12000)
		if slices.Contains(ports, port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports = append(ports, port)
	}
	return ports, nil
}

// callTimeout bounds each call a helper makes to kube-apiserver.
const callTimeout = 30 * time.Second
