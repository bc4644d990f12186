package clustertest

import (
	"slices"
	"testing"
)

func TestWithFlag(t *testing.T) {
	args := []string{"--a=1", "--feature-gates=X=true", "--b=2"}
	got := withFlag(args, "--feature-gates", "Y=true,Z=false")
	want := []string{"--a=1", "--b=2", "--feature-gates=Y=true,Z=false"}
	if !slices.Equal(got, want) {
		t.Errorf("withFlag = %q, want %q", got, want)
	}
	if args[1] != "--feature-gates=X=true" {
		t.Errorf("withFlag changed its args: %q", args)
	}
}
