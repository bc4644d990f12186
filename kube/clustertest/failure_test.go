package clustertest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB is a test whose failure and cleanups the test decides.
type fakeTB struct {
	testing.TB
	name     string
	failed   bool
	cleanups []func()
}

func (f *fakeTB) Name() string      { return f.name }
func (f *fakeTB) Failed() bool      { return f.failed }
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// end runs the cleanups, last first, as the testing package does.
func (f *fakeTB) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// appendTo appends lines to the file at path.
func appendTo(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAFailedTestNamesTheKeptLogsAndWhatMatters checks what a failed test
// is told of the control plane's logs: the folder they are kept in, which
// outlives the control plane's, and of the lines written while it ran only
// the errors, the restarts and the failed writes; a test that passed is
// told nothing, and a second failure shows only the lines since the
// first's.
func TestAFailedTestNamesTheKeptLogsAndWhatMatters(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c := fakeCluster(t, filepath.Join(tmp, tempPrefix+"1"))
	dir, apiLog := c.dir, c.apiserver.log

	var k keptLogs
	var out bytes.Buffer
	passed := &fakeTB{name: "TestPassed"}
	failed := &fakeTB{name: "TestFailed", failed: true}
	k.watch(passed, c, &out)
	k.watch(failed, c, &out)
	writeWhileTheTestRuns(t, c)

	passed.end()
	if out.Len() != 0 {
		t.Fatalf("a test that passed was told:\n%s", out.String())
	}
	failed.end()
	kept, _ := filepath.Glob(filepath.Join(tmp, keptPrefix+"*"))
	if len(kept) != 1 {
		t.Fatalf("kept folders %q, want one", kept)
	}
	want := "clustertest: TestFailed failed. The control plane's logs are in " + kept[0] +
		" (etcd.log, kube-apiserver.log, kube-controller-manager.log, audit.log). While it ran they wrote these errors and failed requests:\n" +
		`    etcd.log: {"level":"error","msg":"lost leader"}` + "\n" +
		`    kube-apiserver.log: E1206 02:00:01.000000       1 status.go:71] "Unhandled Error" err="etcdserver: request timed out"` + "\n" +
		"    kube-apiserver.log: ==== kube-apiserver starting at 2026-12-06T02:00:02Z\n" +
		`    audit.log: 403 patch /apis/apps/v1/namespaces/a/deployments/d by system:serviceaccount:a:ctl: deployments.apps "d" is forbidden` + "\n" +
		"    audit.log: 504 update /api/v1/namespaces/a/configmaps/x by carol: timeout\n"
	if out.String() != want {
		t.Errorf("a failed test was told:\n%s\nwant:\n%s", out.String(), want)
	}

	// The kept logs outlive the control plane's folder.
	appendTo(t, apiLog, "E1206 03:00:00.000000       1 later.go:1] after the failure")
	if err := k.finish(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(kept[0], "kube-apiserver.log"))
	if err != nil || !strings.Contains(string(data), "after the failure") || !strings.Contains(string(data), "before the test") {
		t.Errorf("the kept kube-apiserver.log: %q, %v; want the whole log", data, err)
	}

	// A second failure shows only what was written since the first
	// showed its lines.
	out.Reset()
	second := &fakeTB{name: "TestSecond", failed: true}
	k.watch(second, &Cluster{dir: dir, apiserver: c.apiserver}, &out)
	second.end()
	if !strings.HasSuffix(out.String(), "While it ran they wrote no errors and no failed requests.\n") {
		t.Errorf("a second failure with nothing new was told:\n%s", out.String())
	}
}

// TestAFailureShowsTheLastLinesThatMatter checks that a failure shows at
// most mattersLines of the lines that matter, the last ones, and says how
// many there were.
func TestAFailureShowsTheLastLinesThatMatter(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c := &Cluster{dir: tmp, apiserver: &process{name: "kube-apiserver", log: filepath.Join(tmp, "kube-apiserver.log")}}
	appendTo(t, c.apiserver.log)
	var k keptLogs
	var out bytes.Buffer
	failed := &fakeTB{name: "TestFailed", failed: true}
	k.watch(failed, c, &out)
	for i := range 50 {
		appendTo(t, c.apiserver.log, "E1206 02:00:00.000000       1 e.go:1] error "+strings.Repeat("x", i))
	}
	failed.end()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1+mattersLines || !strings.HasSuffix(lines[0], "While it ran they wrote 50 errors and failed requests; the last 20:") ||
		!strings.HasSuffix(lines[len(lines)-1], "error "+strings.Repeat("x", 49)) {
		t.Errorf("a failure with 50 errors was told:\n%s", out.String())
	}
}

// fakeCluster is a Cluster of no processes, whose logs are in dir, each
// with a line written before a test began.
func fakeCluster(t *testing.T, dir string) *Cluster {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{
		dir:               dir,
		etcd:              &process{name: "etcd", log: filepath.Join(dir, "etcd.log")},
		apiserver:         &process{name: "kube-apiserver", log: filepath.Join(dir, "kube-apiserver.log")},
		controllerManager: &process{name: "kube-controller-manager", log: filepath.Join(dir, "kube-controller-manager.log")},
	}
	appendTo(t, c.apiserver.log, "E1206 01:00:00.000000       1 before.go:1] an error before the test")
	appendTo(t, c.etcd.log, `{"level":"info","msg":"ready"}`)
	appendTo(t, c.controllerManager.log, "I1206 01:00:00.000000       1 start.go:1] started")
	appendTo(t, filepath.Join(dir, auditLogFile))
	return c
}

// writeWhileTheTestRuns writes c's logs' lines of a test's run: those that
// matter and those that don't.
func writeWhileTheTestRuns(t *testing.T, c *Cluster) {
	t.Helper()
	appendTo(t, c.etcd.log,
		`{"level":"warn","msg":"apply request took too long"}`,
		`{"level":"error","msg":"lost leader"}`)
	appendTo(t, c.apiserver.log,
		"I1206 02:00:00.000000       1 info.go:1] fine",
		"W1206 02:00:00.000000       1 warn.go:1] a warning",
		"E1206 02:00:01.000000       1 status.go:71] \"Unhandled Error\" err=\"etcdserver: request timed out\"",
		"==== kube-apiserver starting at 2026-12-06T02:00:02Z")
	appendTo(t, filepath.Join(c.dir, auditLogFile),
		`{"kind":"Event","verb":"create","requestURI":"/api/v1/namespaces/a/configmaps","user":{"username":"alice"},"responseStatus":{"metadata":{},"code":201}}`,
		`{"kind":"Event","verb":"create","requestURI":"/api/v1/namespaces/a/configmaps","user":{"username":"bob"},"responseStatus":{"metadata":{},"code":409,"reason":"AlreadyExists"}}`,
		`{"kind":"Event","verb":"patch","requestURI":"/apis/apps/v1/namespaces/a/deployments/d","user":{"username":"system:serviceaccount:a:ctl"},"responseStatus":{"metadata":{},"status":"Failure","message":"deployments.apps \"d\" is forbidden","reason":"Forbidden","code":403}}`,
		`{"kind":"Event","verb":"update","requestURI":"/api/v1/namespaces/a/configmaps/x","user":{"username":"carol"},"responseStatus":{"metadata":{},"code":504,"message":"timeout"}}`)
}
