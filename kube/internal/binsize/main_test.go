package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestPackageOf(t *testing.T) {
	for sym, want := range map[string]string{
		"k8s.io/api/core/v1.(*Pod).Marshal":                                      "k8s.io/api/core/v1",
		"type:*k8s.io/api/core/v1.Pod":                                           "k8s.io/api/core/v1",
		"type:.eq.k8s.io/api/apps/v1.DeploymentSpec":                             "k8s.io/api/apps/v1",
		"go:itab.*k8s.io/api/core/v1.Pod,k8s.io/apimachinery/pkg/runtime.Object": "k8s.io/api/core/v1",
		"k8s.io/client-go/gentype.(*Client[go.shape.*uint8]).Get":                "k8s.io/client-go/gentype",
		"github.com/z5labs/humus/kube.decode[go.shape.struct { A int }].func1":   "github.com/z5labs/humus/kube",
		"runtime.mallocgc":                      "runtime",
		"go:func.*":                             "runtime",
		"crypto/internal/fips140/drbg.memory":   "crypto/internal/fips140/drbg",
		"type:map[string]int":                   "(types)",
		"type:struct { A int; B string }":       "(types)",
		"gopkg.in/inf%2ev0.(*Dec).Add":          "gopkg.in/inf.v0", // the linker escapes the last element's dots
		"go.opentelemetry.io/otel/sdk/log.init": "go.opentelemetry.io/otel/sdk/log",
		"$f64.3ff0000000000000":                 "(constants)",
		"main.main":                             "main",
	} {
		if got := packageOf(sym); got != want {
			t.Errorf("packageOf(%q) = %q, want %q", sym, got, want)
		}
	}
}

func TestModuleOf(t *testing.T) {
	modules := []string{"github.com/z5labs/humus", "github.com/z5labs/humus/kube", "k8s.io/api", "go.opentelemetry.io/otel", "go.opentelemetry.io/otel/sdk/log"}
	for pkg, want := range map[string]string{
		"github.com/z5labs/humus/kube/internal/crd": "github.com/z5labs/humus/kube", // the longest
		"github.com/z5labs/humus/telemetry":         "github.com/z5labs/humus",
		"github.com/z5labs/humusx":                  "github.com/z5labs/humusx", // a prefix of a path, not of a module
		"go.opentelemetry.io/otel/sdk/log":          "go.opentelemetry.io/otel/sdk/log",
		"go.opentelemetry.io/otel/attribute":        "go.opentelemetry.io/otel",
		"k8s.io/api/core/v1":                        "k8s.io/api",
		"net/http":                                  "std",
		"runtime":                                   "std",
		"(types)":                                   "std",
	} {
		if got := moduleOf(pkg, modules); got != want {
			t.Errorf("moduleOf(%q) = %q, want %q", pkg, got, want)
		}
	}
}

// TestReport reads binsize's own binary: its sections, then its modules
// with the standard library first, the largest, and percentages that sum
// to 100; then its packages; then the stripped binary, which it can't
// break down.
func TestReport(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build a binary with:", err)
	}
	exe := filepath.Join(t.TempDir(), "binsize")
	build := func(args ...string) {
		t.Helper()
		args = append(append([]string{"build", "-o", exe}, args...), ".")
		if out, err := exec.CommandContext(t.Context(), goCmd, args...).CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	build()

	var out bytes.Buffer
	if err := report(&out, exe, true, 1); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ +\d+\.\d\d MB  \.text$`),
		regexp.MustCompile(`(?m)^ +\d+\.\d\d MB  \.gopclntab$`),
		regexp.MustCompile(`(?m)^ +\d+\.\d\d MB  symbols \(code, read-only data, data\), by module:\n +\d+\.\d\d MB +\d+\.\d%  std\n`),
		regexp.MustCompile(`(?m)^ +\d+\.\d\d MB +\d+\.\d%  the other \d+$`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("the report has no line matching %s", want)
		}
	}
	var sum float64
	for _, m := range regexp.MustCompile(`(\d+\.\d)%`).FindAllStringSubmatch(out.String(), -1) {
		var p float64
		if _, err := fmt.Sscan(m[1], &p); err != nil {
			t.Fatal(err)
		}
		sum += p
	}
	if sum < 99.7 || sum > 100.3 {
		t.Errorf("the percentages sum to %.1f, want 100", sum)
	}

	out.Reset()
	if err := report(&out, exe, false, 1000); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"runtime", "debug/elf", "github.com/z5labs/humus/kube/internal/binsize"} {
		if !regexp.MustCompile(`(?m)%  ` + regexp.QuoteMeta(pkg) + `$`).MatchString(out.String()) {
			t.Errorf("the report by package has no line for %s:\n%s", pkg, out.String())
		}
	}

	build("-ldflags=-s -w")
	if err := report(&out, exe, true, 3); err == nil || !strings.Contains(err.Error(), "no symbol table") {
		t.Errorf("report of a stripped binary: %v, want an error saying it has no symbol table", err)
	}
}

func TestReportNotELF(t *testing.T) {
	err := report(&bytes.Buffer{}, "main.go", true, 3)
	if err == nil {
		t.Fatal("report of a Go source file: no error")
	}
}
