package deploytest_test

import (
	"os"
	"testing"

	"github.com/z5labs/humus/kube/clustertest"
)

// TestMain starts a control plane only when a TestCluster test first asks
// for one, so the other tests run without it.
// The repository's tests build the control plane, never download it: its
// machines reach no download location.
func TestMain(m *testing.M) { os.Exit(clustertest.Run(m, clustertest.Fetch(clustertest.BuildOnly))) }
