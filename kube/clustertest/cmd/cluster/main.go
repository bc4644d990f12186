// Command cluster runs the tests' control plane in the foreground for a
// person: etcd, kube-apiserver and kube-controller-manager, built from
// Kubernetes' source when missing, on 127.0.0.1. It writes a kubeconfig
// with the admin's credentials embedded, prints the line that points
// kubectl at it, and stops the control plane on SIGINT or SIGTERM.
//
// Usage, from the repository root:
//
//	go run ./kube/clustertest/cmd/cluster [-dir .cluster] [-build]
//
// -dir is the folder for the certificates, etcd's data, the logs and the
// kubeconfig; it is emptied at start and kept after stop. -build only
// builds the binaries and exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/z5labs/humus/kube/clustertest"
)

func main() {
	dir := flag.String("dir", ".cluster", "the folder for the control plane's files, emptied at start")
	buildOnly := flag.Bool("build", false, "build missing or stale binaries and exit")
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
		return clustertest.Build(ctx)
	}
	c, err := clustertest.Launch(ctx, dir, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "clustertest: kube-apiserver at https://%s, logs in %s; Ctrl-C stops it\n", c.Server(), filepath.Dir(c.KubeconfigPath()))
	fmt.Printf("export KUBECONFIG=%s\n", c.KubeconfigPath())

	<-ctx.Done()
	stopSignals() // a second Ctrl-C ends this process at once; the control plane dies with it
	fmt.Fprintln(os.Stderr, "clustertest: stopping")
	return c.Stop()
}
