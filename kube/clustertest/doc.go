// Package clustertest starts a real Kubernetes control plane for Go tests:
// etcd, kube-apiserver and kube-controller-manager of Kubernetes v1.37.2
// and etcd v3.7.0, fetched as their publishers released them (or built
// from their own source where they can't be), and run as processes on
// 127.0.0.1, so that
// admission, validation, defaulting, server-side apply, RBAC, garbage
// collection and namespace deletion in a test are Kubernetes' own. It is
// not a package of fakes: a test talks to a kube-apiserver over HTTPS,
// with client-go or anything else, as a controller in a cluster does.
// Nothing runs pods: there is no scheduler, kubelet or deployment
// controller, so a Deployment is stored and never rolled out.
//
// A test binary that uses it calls Run from TestMain, and each test that
// needs the control plane calls Get. A controller's whole App, in its own
// module, is tested as its pod would run it (see the package example):
//
//	func TestMain(m *testing.M) { os.Exit(clustertest.Run(m)) }
//
//	func TestClusterWebsite(t *testing.T) {
//		c := clustertest.Get(t)
//		c.Install(t, app.Website) // a kube.Resource, or anything with a CRD method
//		ns := c.Namespace(t)
//		h := c.PodHost(t, ns, "website-controller-0", "website-controller",
//			clustertest.RBACGrants(t, "../deploy/rbac.yaml", ns)...)
//		p := humustest.Start(t, h.Host(), app.Init)
//		...
//	}
//
// # Where the control plane comes from
//
// Options to Run (and Start) choose one of three sources:
//
//   - By default, Kubernetes' and etcd's releases: the first Get on a
//     machine fetches the released kube-apiserver, kube-controller-manager
//     and etcd (see "The released binaries" below), or, where they can't
//     be fetched, builds them with the go command from a module embedded in
//     this package (Kubernetes v1.37.2 and etcd v3.7.0), into a folder
//     shared by every test binary of every module on the machine: the
//     folder the environment variable HUMUS_CONTROLPLANE names, or else
//     humus/controlplane-v1.37.2 in the user's cache folder
//     (os.UserCacheDir: ~/.cache on Linux, ~/Library/Caches on macOS).
//     BuildDir says which. A line on stderr says which it did and why. A
//     fetch takes seconds on a fast network; a cold build takes 13 to 18
//     minutes on two cores, longer than go test's default 10m timeout:
//     build first (Build, or the cluster command's -build), or pass
//     -timeout 30m. With Go's build cache warm, a build into another
//     folder takes a minute or two; with the folder filled, neither runs.
//     The build uses the go command on PATH, with the environment's
//     GOPROXY, GOCACHE and GOMODCACHE, GOWORK=off and GOFLAGS=-mod=mod
//     -buildvcs=false; its modules come through the module proxy.
//   - FromAssets(dir): the etcd and kube-apiserver of a folder laid out as
//     envtest's setup-envtest installs them (its KUBEBUILDER_ASSETS). It
//     has no kube-controller-manager: nothing collects garbage, and a
//     deleted namespace never finishes deleting. RequireControllers fails
//     a test that needs either, saying so.
//   - FromKubeconfig(path): an existing cluster, such as kind's, through
//     the kubeconfig's current context. Nothing is started; the faults,
//     the audit log, FeatureGates and ClientCert fail the test naming why;
//     Namespace, ServiceAccount, PodHost, InstallCRD and Install work.
//
// # The released binaries
//
// Kubernetes publishes each server binary of a release at
// https://dl.k8s.io/release/VERSION/bin/linux/ARCH/NAME, with its SHA-256
// in hex, alone, in the file of the same name ending in .sha256, as its
// kubectl install guide's sha256sum --check reads it; its server binaries
// are for Linux only (a release's server archives are
// kubernetes-server-linux-ARCH.tar.gz). etcd publishes each
// release on GitHub at
// https://github.com/etcd-io/etcd/releases/download/VERSION/etcd-VERSION-linux-ARCH.tar.gz,
// whose one folder holds the server, etcd (its release notes unpack it
// with --strip-components=1), beside a SHA256SUMS
// file in sha256sum's format (a sum, two spaces, a file's name: a line
// each) listing every archive of the release; its release notes give
// https://storage.googleapis.com/etcd as a second location, laid out
// alike. The fetch, for the machine's architecture:
//
//   - downloads kube-apiserver and kube-controller-manager v1.37.2 and
//     etcd v3.7.0's archive over HTTPS (redirects only to https), each
//     with the sum its publisher lists beside it, and refuses a download
//     whose SHA-256 differs, naming the file and both sums: nothing is
//     built in its place, since a download that isn't what was released
//     may have been tampered with. PinSHA256 adds a sum of one's own.
//   - falls back to the build, saying why in its one line, off Linux, or
//     when a download fails: no network, a 404 (no such release, or no
//     such architecture), or a server that sends nothing, headers or body,
//     for 30s.
//   - writes the binaries into BuildDir as the build does, executable,
//     with the same stamp, so a folder fetched once serves every test
//     binary on the machine, and a warm start checks nothing again.
//
// Fetch chooses: FetchOrBuild (the default), FetchOnly or BuildOnly, and
// FetchFrom names mirrors (a repository manager inside a company's
// network, laid out as the location it mirrors). On a machine, the
// environment overrides both: HUMUS_CONTROLPLANE_FETCH=auto, only or off,
// HUMUS_CONTROLPLANE_KUBERNETES_URL and HUMUS_CONTROLPLANE_ETCD_URL. A CI
// runner without network sets HUMUS_CONTROLPLANE_FETCH=off, and builds;
// this repository's Makefile and tests do.
//
// What a fetch costs: against a server on loopback, 0.20 to 0.23s for two
// binaries and an archive of 32 MiB each, about 460 MB/s for TLS, the
// SHA-256, the writes and gunzip on one of two cores (BenchmarkFetch), so
// a real fetch is its download. The programs built here from the same
// source, with their symbols, are kube-apiserver 170 MB,
// kube-controller-manager 150 MB and etcd 36 MB; Kubernetes' released
// ones are smaller (kube-apiserver 117 MB and kube-controller-manager
// 78 MB, as published in 2017), and etcd's archive is compressed. So a
// fetch downloads 200 to 360 MB: 2 to 3s at 1 Gbit/s, 16 to 29s at
// 100 Mbit/s, against a cold build's 13 to 18 minutes. These sizes are
// estimates: the publishers list sums, not sizes, for v1.37.2 and v3.7.0.
//
// # What it guarantees
//
//   - One control plane per test binary, started by the first Get and
//     stopped when Run's tests end; tests isolate themselves by namespace
//     (Namespace).
//   - Under go test -short, Get skips the test, so -short runs only the
//     tests that need no control plane and builds nothing; a test that
//     starts one another way calls SkipShort first.
//   - A fetch or build holds a lock on the file beside the build folder
//     (FOLDER.lock), so test binaries starting at once, of one module or
//     several, fetch or build once, and the one that waits says so. A
//     stamp, a hash of the embedded source and the build's flags, written
//     once the binaries are fetched or built, means a warm start runs no
//     go command and downloads nothing.
//     A build says on stderr which program it builds, when each begins and
//     ends, and at least every 30s how many packages it has compiled.
//   - Every component listens on 127.0.0.1 only, on ports picked free
//     below the ephemeral range, and kept across stops and starts.
//   - etcd keeps its data in the control plane's temporary folder;
//     kube-apiserver has a CA and serving certificate (127.0.0.1 and
//     localhost) made at start, RBAC authorization, the CA as its client
//     CA, a service-account issuer and signing key, and a static admin
//     token in system:masters; kube-controller-manager runs exactly the
//     garbage collector and namespace controllers, without leader
//     election.
//   - Get returns once each component is ready: etcd's /health,
//     kube-apiserver's /readyz and both controllers in
//     kube-controller-manager's /healthz.
//   - Every component's output goes to a log file. A test that failed
//     says, before its own output, so that its failure is the last thing
//     go test prints, where the logs are kept (a folder that outlives the
//     test binary) and the errors and failed requests they wrote while it
//     ran (see Run).
//   - On Linux, every process dies with the test binary, even on panic,
//     timeout or SIGKILL: each runs in its own process group with a
//     parent-death signal of SIGKILL. A component that hasn't exited 10s after SIGTERM
//     is killed (kube-apiserver doesn't exit on SIGTERM once etcd is gone).
//     The temporary folder of a test binary that died is removed by the
//     next one.
//   - Client configs from AdminConfig, Kubeconfig and ServiceAccount
//     keep working across StopAPIServer/StartAPIServer and
//     StopEtcd/StartEtcd.
//
// # Helpers for a test
//
// Each takes the test's testing.TB, calls t.Helper, fails the test with a
// message saying what went wrong, and registers its cleanups with
// t.Cleanup.
//
//   - Namespace creates a namespace named after the test, and deletes it
//     at the test's cleanup.
//   - Install installs the CRDs of Resources (such as kube.Resource, whose
//     CRD method builds one from Go types), bringing one that is there
//     already to the spec given, and returns once each is served, so an
//     informer or a create finds its resource; InstallCRD does it for one
//     CRD, and AwaitCRD waits for one.
//   - ServiceAccount creates a ServiceAccount bound to exactly the Grants
//     given, and returns its token once its rights are in effect;
//     RBACGrants reads the Grants of a controller's RBAC manifest (its
//     ClusterRoles and Roles, cluster-wide or in the test's namespace as
//     its bindings grant them).
//   - PodHost is a humustest Host as the kubelet sets up the controller's
//     pod: the API server's address in KUBERNETES_SERVICE_HOST and
//     KUBERNETES_SERVICE_PORT, the service account's ca.crt, token and
//     namespace files, POD_NAMESPACE, POD_NAME, and a free PROBES_ADDR.
//     OfflinePodHost is the same with no API server behind it, for tests
//     of an App's settings.
//   - Eventually is the tests' one wait: it polls a check until it
//     returns nil, and fails the test with the check's last error. Ready
//     and Metrics are checks of an App's probes; Gone is one for a
//     deletion.
//   - AwaitExit waits for an App started by humustest.Start to exit, and
//     returns its exit code; ManagedBy says who applied an object's fields.
//   - kube-apiserver records every write (create, update, patch, delete,
//     deletecollection), by anyone, at Metadata level once its response
//     is complete, in an audit log that outlives its restarts; Audit reads
//     it, and AwaitAudit waits for an event. It records the reads (get,
//     list, watch) of ServiceAccounts outside kube-system too, for
//     CheckRights: called before a whole-App test starts its App, it
//     fails the test at its end on each request of the App's
//     ServiceAccount refused with a 403, naming the verb, the resource and
//     the namespace, and reports each right of its grants no request used
//     (a failure with FailUnusedRights); RightsUsed returns the same as a
//     value.
//   - CPU says how much CPU time each component has used (on Linux, from
//     /proc), for a benchmark that weighs what its client costs the
//     control plane.
//   - Fault tests, which mustn't run in parallel, can kill
//     (KillAPIServer, KillEtcd), pause (PauseAPIServer, PauseEtcd), stop
//     (StopAPIServer, StopEtcd) and compact (CompactEtcd) the control
//     plane; whatever a test leaves killed, stopped or paused runs again at
//     its cleanup. FeatureGates restarts kube-apiserver with feature gates,
//     alpha ones too, for one test.
//   - A Link stands between one client and the servers it dials, as a
//     humus.Host's or a rest.Config's Dial, to hold, release or refuse
//     its traffic; a connection the client closes while held never
//     delivers what it queued.
//   - A CA (NewCA) makes the certificates a test's own server needs,
//     valid from 1990 to 2100, so a synctest bubble accepts them too.
//
// # For a person
//
// The cluster command (cmd/cluster) runs the same control plane in the
// foreground: it writes its files into a folder (.cluster unless -dir
// says otherwise): kubeconfig, the admin's, with its token and CA
// embedded; the CA, certificates, keys and static tokens; etcd's data
// (etcd/); each component's log (etcd.log, kube-apiserver.log,
// kube-controller-manager.log) and process id (etcd.pid and so on); and
// the audit log (audit.log). It says so
// at start, with the export KUBECONFIG=... line on stdout, and keeps the
// folder after stop. It creates a missing folder, and writes a
// .clustertest file into it; a folder that holds anything is emptied at
// start only when that file says an earlier start made it, and any other
// is refused with an error naming it, so -dir . never loses a file.
// Ctrl-C, or SIGTERM to its process, stops the components and ends it.
// Run it as a built binary, not through go run, whose process doesn't
// pass a signal on. Programs of one's own call Start (or Launch, Start
// with its progress on a writer of one's choosing) and Stop.
//
// # Where it runs
//
// The control plane runs on Unix, and this repository tests it on Linux.
// On macOS and the BSDs a component has no parent-death signal: Run's
// end stops it, but it outlives a test binary that never gets there (a
// panic, a timeout, SIGKILL), and keeps running, with its ports, its
// memory and its temporary folder. The next test binary's start, which
// removes the folders of test binaries that died, leaves such a folder
// in place while a component of it runs, and says on stderr which
// processes (by name and pid) to kill; it kills none itself, since a
// pid may have been reused. Elsewhere (Windows, and AIX and Solaris,
// which lack flock) the package builds, so a module that imports it
// builds and runs its other tests there, but Get skips a test saying the
// control plane runs on Unix only, and Start and Build return an error
// saying so; FromKubeconfig's existing cluster, which starts nothing,
// works anywhere.
package clustertest
