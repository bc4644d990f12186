// Package clustertest is the tests' real control plane: etcd, kube-apiserver
// and kube-controller-manager built from Kubernetes v1.37.2's own source
// (the tools/controlplane module) and started on loopback, so admission,
// validation, defaulting, server-side apply, RBAC, garbage collection and
// namespace deletion in tests are Kubernetes' own.
//
// A test binary that uses it calls Run from TestMain, and each test that
// needs the control plane calls Get:
//
//	func TestMain(m *testing.M) { os.Exit(clustertest.Run(m)) }
//
//	func TestClusterSomething(t *testing.T) {
//		c := clustertest.Get(t)
//		ns := c.Namespace(t)
//		client, err := kubernetes.NewForConfig(c.AdminConfig())
//		...
//	}
//
// What it guarantees:
//
//   - One control plane per test binary, started by the first Get and
//     stopped when Run's tests end; tests isolate themselves by namespace
//     (Namespace).
//   - Binaries are built on demand into .bin/controlplane at the
//     repository root, under a file lock, so two test binaries starting at
//     once build once, and the one that waits says so; a stamp of
//     tools/controlplane's source means a warm start runs no go command. A
//     cold build takes 13 to 18 minutes on two cores, longer than go
//     test's default 10m timeout: build first with `make controlplane`
//     (`go run ./kube/clustertest/cmd/cluster -build`), or pass
//     -timeout 30m. It says on stderr which program it builds, when each
//     begins and ends, and at least every 30s how many packages it has
//     compiled.
//   - Under go test -short, Get skips the test, so -short runs only the
//     tests that need no control plane; a test that starts one another way
//     calls SkipShort first.
//   - Every component listens on 127.0.0.1 only, on ports picked free
//     below the ephemeral range, and kept across stops and starts.
//   - etcd keeps its data in the control plane's temporary folder;
//     kube-apiserver has a CA and serving certificate (127.0.0.1 and
//     localhost) made at start, RBAC authorization, the CA as its client
//     CA, a service-account issuer and signing key, and a static admin
//     token in system:masters; kube-controller-manager runs exactly the
//     garbage collector and namespace controllers, without leader
//     election. Nothing runs pods or writes a Deployment's status.
//   - Get returns once each component is ready: etcd's /health,
//     kube-apiserver's /readyz and both controllers in
//     kube-controller-manager's /healthz.
//   - Every component's output goes to a log file; when a test failed, Run
//     prints the last lines of each to stderr.
//   - Every process dies with the test binary, even on panic, timeout or
//     SIGKILL: each runs in its own process group with a parent-death
//     signal of SIGKILL. A component that hasn't exited 10s after SIGTERM
//     is killed (kube-apiserver doesn't exit on SIGTERM once etcd is gone).
//     The temporary folder of a test binary that died is removed by the
//     next one.
//   - Client configs from AdminConfig, Kubeconfig and ServiceAccount
//     keep working across StopAPIServer/StartAPIServer and
//     StopEtcd/StartEtcd.
//   - kube-apiserver records every write (create, update, patch, delete,
//     deletecollection), by anyone, at Metadata level once its response
//     is complete, in an audit log that outlives its restarts; Audit reads
//     it, and AwaitAudit waits for an event.
//   - Fault tests, which mustn't run in parallel, can kill
//     (KillAPIServer, KillEtcd), pause (PauseAPIServer, PauseEtcd) and
//     compact (CompactEtcd) the control plane; whatever a test leaves
//     killed, stopped or paused runs again at its cleanup.
//   - FeatureGates restarts kube-apiserver with feature gates, alpha ones
//     too, for one test, and with its own flags again at its cleanup.
//   - InstallCRD installs a CRD and AwaitCRD waits for one: each returns
//     once the CRD is Established and every version it serves answers a
//     list, so an informer or a create finds its resource served.
//   - Eventually is the tests' one wait: it polls a check until it
//     returns nil, and fails the test with the check's last error.
//   - A CA (NewCA) makes the certificates a test's own server needs,
//     valid from 1990 to 2100, so a synctest bubble accepts them too.
//   - A Link stands between one client and the servers it dials, as a
//     humus.Host's or a rest.Config's Dial, to hold, release or refuse
//     its traffic; a connection the client closes while held never
//     delivers what it queued.
//   - The control plane runs on Linux. Elsewhere, macOS say, the package
//     and its unit tests build, but a child process has no parent-death
//     signal (process_linux.go, process_other.go).
//
// The cluster command (cmd/cluster, `make cluster`) and the Memcached demo
// (kube/example/memcached/demo, `make demo`) run the same control plane
// for a person, with Launch and Stop.
package clustertest
