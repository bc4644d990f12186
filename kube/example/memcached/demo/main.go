// Command demo shows the Memcached controller at work, on a control plane
// of its own, in about a minute: `make demo`, or from the repository root
//
//	go run ./kube/example/memcached/demo [-v]
//
// It needs only Go. It builds the control plane if it is missing (the
// tests' control plane, see kube/clustertest), starts it in a
// temporary folder, applies the Memcached CRD, builds the controller from
// ./kube/example/memcached and runs it as a process of its own with its
// lines on the terminal (but for DEBUG and TRACE, which -v adds), then applies deploy/samples/memcached.yaml and
// says what happens as it happens, each step checked against the API
// server within a time limit: the Deployment the Memcached gets and its
// owner reference, the Memcached's status, a hand-made scale undone, the
// finalizer on deletion and the garbage collection of the Deployment,
// and, on SIGTERM, the controller's exit 0 with its Lease released. It
// then stops everything and removes its folder; it exits 1 if any step
// didn't happen.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	verbose := flag.Bool("v", false, "show the controller's DEBUG and TRACE lines too")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, options{out: os.Stdout, verbose: *verbose}); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "demo: interrupted; everything it started is stopped")
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		stop()
		os.Exit(1)
	}
}
