package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLinksOnlyWhatAControllerNeeds checks the packages the binary links
// leave out what a controller doesn't need (kube/BENCHMARKS.md, "Binary
// size"): client-go's whole clientset, which links the typed client of
// every API group (14 MB of the 79 it had); CEL, which kube/crdtest keeps
// apart; controller-runtime.
func TestLinksOnlyWhatAControllerNeeds(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages with:", err)
	}
	out, err := exec.CommandContext(t.Context(), goCmd, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "k8s.io/client-go/kubernetes/typed/apps/v1") {
		t.Fatalf("go list -deps doesn't list the apps/v1 client the Reconciler uses: %v", deps)
	}
	for _, p := range deps {
		switch {
		case p == "k8s.io/client-go/kubernetes":
			t.Errorf("the binary links client-go's whole clientset, %s: take the group's client, such as apps/v1's", p)
		case strings.HasPrefix(p, "github.com/google/cel-go/"):
			t.Errorf("the binary links CEL, %s: only kube/crdtest may", p)
		case strings.HasPrefix(p, "sigs.k8s.io/controller-runtime"):
			t.Errorf("the binary links controller-runtime, %s", p)
		}
	}
}
