// Command cluster runs package clustertest's control plane in the
// foreground for a person: etcd, kube-apiserver and
// kube-controller-manager, fetched or built from source when missing (see
// clustertest.Build; HUMUS_CONTROLPLANE names the folder, and
// HUMUS_CONTROLPLANE_FETCH=off builds without fetching), on
// 127.0.0.1. It writes its files into a folder, .cluster unless -dir says
// otherwise, says what the folder holds and how to stop it, and prints the
// line that points kubectl at its kubeconfig.
//
// Usage:
//
//	go build -o .bin/cluster ./kube/clustertest/cmd/cluster
//	.bin/cluster [-dir .cluster] [-build]
//
// -dir is the folder for the certificates, etcd's data, the logs and the
// kubeconfig, kept after stop. It is created when missing; a folder that
// holds anything is emptied at start only when an earlier start wrote its
// .clustertest file there, and any other is refused, so -dir . or
// -dir ~/k8s never loses a file (see clustertest.Start). -build only
// fetches or builds the binaries and exits.
//
// SIGINT (Ctrl-C) or SIGTERM to this process stops every process it
// started, and it exits 0 once they are gone; a second signal ends it at
// once, and its components die with it (on Linux, by their parent-death
// signal). Run it as this binary, not through go run: a signal to go run's
// process doesn't reach this one.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/z5labs/humus/kube/clustertest"
)

func main() {
	dir := flag.String("dir", ".cluster", "the folder for the control plane's files: created when missing, "+
		"emptied at start when an earlier start made it, and refused when it holds anything else")
	buildOnly := flag.Bool("build", false, "fetch or build missing or stale binaries and exit")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, stop, *dir, *buildOnly); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stopSignals func(), dir string, buildOnly bool) error {
	if buildOnly {
		bin, err := clustertest.Build(ctx)
		if err == nil {
			fmt.Fprintf(os.Stderr, "clustertest: the control plane is built in %s\n", bin)
		}
		return err
	}
	c, err := clustertest.Launch(ctx, dir, os.Stderr)
	if err != nil {
		return err
	}
	describe(os.Stderr, c, os.Getpid())
	fmt.Printf("export KUBECONFIG=%s\n", c.KubeconfigPath())

	<-ctx.Done()
	stopSignals() // a second signal ends this process at once; the control plane dies with it
	fmt.Fprintln(os.Stderr, "clustertest: stopping etcd, kube-apiserver and kube-controller-manager")
	if err := c.Stop(); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "clustertest: stopped")
	return nil
}

// describe says where the control plane listens, what its folder holds,
// and how to stop it, this process being pid.
func describe(w io.Writer, c *clustertest.Cluster, pid int) {
	_, _ = fmt.Fprintf(w, `clustertest: the control plane is running: kube-apiserver at https://%s
clustertest: %s holds its files, kept after stop and emptied at its next start:
    kubeconfig                          the admin's (system:masters), its token and the CA embedded
    ca.crt, serving.crt, serving.key    the CA, and the serving certificate of kube-apiserver and kube-controller-manager
    service-account.key, .pub           the key pair that signs service account tokens
    tokens.csv                          the static tokens of the admin and kube-controller-manager
    kube-controller-manager.kubeconfig  kube-controller-manager's kubeconfig
    etcd/                               etcd's data
    etcd.log, kube-apiserver.log, kube-controller-manager.log
                                        each component's output
    audit.log, audit-policy.yaml        every write to the API, one JSON event a line, and the policy that says so
    .clustertest                        says the folder is the control plane's, for the next start to empty
clustertest: stop it with Ctrl-C, or kill -TERM %d (this process): it stops the three components and exits
`, c.Server(), filepath.Dir(c.KubeconfigPath()), pid)
}
