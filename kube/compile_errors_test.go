package kube_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileErrors builds the proposal's snippets in a module of their own
// that uses kube through a workspace, and checks that the mistakes it
// quotes are the compiler's own errors: a misspelled constraint, and a
// value of the wrong type, on a field and on a slice's items.
func TestCompileErrors(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the snippets: %v", err)
	}
	kubeDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	rootDir := filepath.Dir(kubeDir)

	tests := []struct {
		snippet string
		want    string // "" when it compiles
	}{
		{"compiles", ""},
		{"minimun", "kube.FieldOf[int32] has no field or method Minimun"},
		{"minimum_one", `cannot use "one" (untyped string constant) as int32 value`},
		{"default_3", "cannot use 3 (untyped int constant) as string value"},
		{"each_compiles", ""},
		{"each_maxlenght", "kube.FieldOf[string] has no field or method MaxLenght"},
		{"each_maximum_string", `cannot use "65535" (untyped string constant) as int32 value`},
		{"each_not_a_slice", "in call to kube.Each, S (type string) does not satisfy ~[]E"},
	}
	for _, tt := range tests {
		t.Run(tt.snippet, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join("testdata", "compileerrors", tt.snippet+".go.txt"))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			files := map[string]string{
				"go.mod":     "module example.com/snippet\n\ngo 1.26.0\n",
				"go.work":    fmt.Sprintf("go 1.26.0\n\nuse (\n\t.\n\t%q\n\t%q\n)\n", kubeDir, rootDir),
				"snippet.go": string(src),
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.CommandContext(t.Context(), gobin, "build", "./...")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=", "GOPROXY=off", "GOTOOLCHAIN=local")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err = cmd.Run()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("the snippet doesn't compile: %v\n%s", err, out.String())
			case tt.want != "" && err == nil:
				t.Fatalf("the snippet compiles; want the compiler's error %q", tt.want)
			case tt.want != "" && !strings.Contains(out.String(), tt.want):
				t.Errorf("the compiler says:\n%s\nwant it to say %q", out.String(), tt.want)
			}
		})
	}
}
