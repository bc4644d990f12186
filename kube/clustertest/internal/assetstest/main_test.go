// Package assetstest tests clustertest.FromAssets: its TestMain builds the
// control plane from source, as Run would, and runs its tests on the
// control plane of the built folder's etcd and kube-apiserver, as it would
// run envtest's assets.
package assetstest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/z5labs/humus/kube/clustertest"
)

// assets is the folder the control plane runs from.
var assets string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() { // every test here needs the control plane, and skips
		os.Exit(clustertest.Run(m))
	}
	var err error
	assets, err = clustertest.Build(context.Background(), clustertest.Fetch(clustertest.BuildOnly)) // these tests fetch nothing
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(clustertest.Run(m, clustertest.FromAssets(assets)))
}
