package policytest_test

import (
	"os"
	"testing"

	"github.com/z5labs/humus/kube/clustertest"
)

// TestMain starts the real control plane only when a TestCluster test asks
// for it, and stops it when the tests end.
func TestMain(m *testing.M) { os.Exit(clustertest.Run(m, clustertest.Fetch(clustertest.BuildOnly))) }
