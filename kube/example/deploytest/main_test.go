package deploytest_test

import (
	"os"
	"testing"

	"github.com/z5labs/humus/kube/clustertest"
)

// TestMain starts a control plane only when a TestCluster test first asks
// for one, so the other tests run without it.
func TestMain(m *testing.M) { os.Exit(clustertest.Run(m)) }
