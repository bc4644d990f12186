package app_test

import (
	"os"
	"testing"

	"github.com/z5labs/humus/kube/clustertest"
)

// TestMain starts a control plane only when a TestCluster test first asks
// for one, so the unit tests run without it.
func TestMain(m *testing.M) { os.Exit(clustertest.Run(m)) }
