package clustertest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// What a failed test is told of the control plane's logs.
const (
	// keptPrefix names the folders a failed test binary keeps the logs
	// in, which outlive it: removeOrphans sweeps only tempPrefix's.
	keptPrefix = "humus-controlplane-logs-"
	// mattersLines is how many of the lines that matter a failure shows,
	// the last ones; the files have them all.
	mattersLines = 20
	// mattersWindow is how much of each log, from its end, a failure
	// reads for them.
	mattersWindow = 4 << 20
)

// keptLogs are the logs of the test binary's control plane that a failed
// test named: linked, at the first failure, into a folder that Run
// doesn't remove.
type keptLogs struct {
	mu       sync.Mutex
	dir      string            // "" until a test failed
	unlinked map[string]string // the logs that couldn't be linked, by where they go: copied at Run's end
	shown    map[string]int64  // each log's offset up to which a failure has shown its lines
}

// watch makes a failure of t, which uses c, say where c's logs are kept
// and what matters in what they wrote while t ran, on w: before the test's
// own output, which go test prints when the test ends, so that the
// failure's own line is the last thing it reads. It does so once for t,
// however often t calls Get.
func (k *keptLogs) watch(t testing.TB, c *Cluster, w io.Writer) {
	logs := c.logFiles()
	if len(logs) == 0 {
		return // an existing cluster: no log of its is this package's
	}
	start := make(map[string]int64, len(logs))
	for _, p := range logs {
		if info, err := os.Stat(p); err == nil {
			start[p] = info.Size()
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			k.report(w, t.Name(), logs, start)
		}
	})
}

// logFiles are the control plane's logs: each component's, and the audit
// log; none for an existing cluster.
func (c *Cluster) logFiles() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range []*process{c.etcd, c.apiserver, c.controllerManager} {
		if p != nil {
			out = append(out, p.log)
		}
	}
	if len(out) > 0 {
		out = append(out, filepath.Join(c.dir, auditLogFile))
	}
	return out
}

// report writes what a failure of test says of logs: the folder they are
// kept in, and the lines that matter that they gained since start.
func (k *keptLogs) report(w io.Writer, test string, logs []string, start map[string]int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	dir, err := k.keep(logs)
	if err != nil {
		_, _ = fmt.Fprintf(w, "clustertest: %s failed; keeping the control plane's logs: %v\n", test, err)
		return
	}
	var names []string
	var lines []string
	for _, p := range logs {
		name := filepath.Base(p)
		names = append(names, name)
		from := max(start[p], k.shown[p])
		data, end := readFrom(p, from)
		k.shown[p] = max(k.shown[p], end)
		for _, line := range matters(name, data) {
			lines = append(lines, name+": "+line)
		}
	}
	_, _ = fmt.Fprintf(w, "clustertest: %s failed. The control plane's logs are in %s (%s). ", test, dir, strings.Join(names, ", "))
	switch n := len(lines); {
	case n == 0:
		_, _ = fmt.Fprintf(w, "While it ran they wrote no errors and no failed requests.\n")
	case n > mattersLines:
		_, _ = fmt.Fprintf(w, "While it ran they wrote %d errors and failed requests; the last %d:\n", n, mattersLines)
		lines = lines[n-mattersLines:]
	default:
		_, _ = fmt.Fprintf(w, "While it ran they wrote these errors and failed requests:\n")
	}
	for _, line := range lines {
		_, _ = fmt.Fprintf(w, "    %s\n", line)
	}
}

// keep returns the folder the logs are kept in, making it and linking the
// logs into it the first time. A log that can't be linked is copied at
// Run's end.
func (k *keptLogs) keep(logs []string) (string, error) {
	if k.dir != "" {
		return k.dir, nil
	}
	dir, err := os.MkdirTemp("", keptPrefix)
	if err != nil {
		return "", err
	}
	k.dir, k.unlinked, k.shown = dir, map[string]string{}, map[string]int64{}
	for _, p := range logs {
		to := filepath.Join(dir, filepath.Base(p))
		if err := os.Link(p, to); err != nil {
			k.unlinked[to] = p
		}
	}
	return dir, nil
}

// finish copies the logs that couldn't be linked into the folder they are
// kept in, before Run removes the control plane's folder.
func (k *keptLogs) finish() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []string
	for to, from := range k.unlinked {
		data, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, data, 0o644)
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("clustertest: keeping the control plane's logs in %s: %s", k.dir, strings.Join(errs, "; "))
	}
	return nil
}

// readFrom returns the file at path from offset from, or its last
// mattersWindow bytes when it has more, from a line's start, and the
// offset it ends at.
func readFrom(path string, from int64) ([]byte, int64) {
	f, err := os.Open(path)
	if err != nil {
		return nil, from
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil || info.Size() <= from {
		return nil, from
	}
	end := info.Size()
	skip := false
	if end-from > mattersWindow {
		from, skip = end-mattersWindow, true
	}
	data := make([]byte, end-from)
	n, _ := f.ReadAt(data, from)
	data = data[:n]
	if skip { // from a line's start
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, from + int64(n)
}

// klogError matches a klog line of severity error or fatal, such as
// "E1206 02:31:12.123456   1234 file.go:12] ...".
var klogError = regexp.MustCompile(`^[EF]\d{4} `)

// matters returns the lines of the log named name that a failure shows:
// errors (klog's E and F lines, etcd's levels error and above, a Go
// panic), the restarts of a component (the line start writes), and, of
// the audit log, the requests it records (every write, and
// ServiceAccounts' reads) that the API server failed (5xx) or refused for
// want of rights (401, 403).
func matters(name string, data []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "==== "):
			out = append(out, line)
		case name == auditLogFile:
			if s, ok := failedRequest(line); ok {
				out = append(out, s)
			}
		case strings.HasPrefix(line, "{"):
			if etcdError(line) {
				out = append(out, line)
			}
		case klogError.MatchString(line), strings.HasPrefix(line, "panic: "), strings.HasPrefix(line, "fatal error: "):
			out = append(out, line)
		}
	}
	return out
}

// etcdError reports whether line, one of etcd's JSON records, is of level
// error or above.
func etcdError(line string) bool {
	var rec struct {
		Level string `json:"level"`
	}
	if json.Unmarshal([]byte(line), &rec) != nil {
		return false
	}
	switch rec.Level {
	case "error", "dpanic", "panic", "fatal":
		return true
	}
	return false
}

// failedRequest says the request of an audit log's line when the API
// server failed it or refused it for want of rights.
func failedRequest(line string) (string, bool) {
	var ev struct {
		Verb string `json:"verb"`
		URI  string `json:"requestURI"`
		User struct {
			Username string `json:"username"`
		} `json:"user"`
		Status *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"responseStatus"`
	}
	if json.Unmarshal([]byte(line), &ev) != nil || ev.Status == nil {
		return "", false
	}
	if c := ev.Status.Code; c < 500 && c != 401 && c != 403 {
		return "", false
	}
	s := fmt.Sprintf("%d %s %s by %s", ev.Status.Code, ev.Verb, ev.URI, ev.User.Username)
	if ev.Status.Message != "" {
		s += ": " + ev.Status.Message
	}
	return s, true
}
