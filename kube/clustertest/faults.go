package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Faults on the control plane's processes. The control plane is shared by
// the tests of one binary: call these only from tests that don't run in
// parallel. Each restores a running control plane at the test's cleanup
// if the test didn't: a paused component is resumed, and a killed one is
// started again. On an existing cluster (FromKubeconfig), which this
// package didn't start, each fails the test saying so.

// KillAPIServer kills kube-apiserver's process group with SIGKILL and
// returns once it has exited: no graceful shutdown, and every connection
// to it is reset by the kernel. The test starts it again with
// StartAPIServer; otherwise it is started at the test's cleanup. Audit
// events already written stay in the audit log, and the restarted
// kube-apiserver appends to it.
func (c *Cluster) KillAPIServer(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "KillAPIServer")
	c.fault(t, c.apiserver, c.startAPIServer, c.apiserver.kill)
}

// KillEtcd kills etcd with SIGKILL and returns once it has exited; its
// data, written without fsync, survives in the page cache. kube-apiserver
// keeps running and fails requests that need storage. The test starts it
// again with StartEtcd; otherwise it is started at the test's cleanup.
func (c *Cluster) KillEtcd(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "KillEtcd")
	c.fault(t, c.etcd, c.startEtcd, c.etcd.kill)
}

// PauseAPIServer stops kube-apiserver's process group with SIGSTOP: its
// port still accepts TCP connections (the kernel completes handshakes up
// to the listen backlog) but nothing answers, and open connections and
// watches go silent, as with a hung server. ResumeAPIServer continues it;
// otherwise it is continued at the test's cleanup.
func (c *Cluster) PauseAPIServer(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "PauseAPIServer")
	c.fault(t, c.apiserver, c.startAPIServer, c.apiserver.pause)
}

// ResumeAPIServer continues a kube-apiserver that PauseAPIServer stopped,
// and returns once it is ready again, when etcd runs and isn't paused.
func (c *Cluster) ResumeAPIServer(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "ResumeAPIServer")
	c.resume(t, c.apiserver)
}

// PauseEtcd stops etcd with SIGSTOP: kube-apiserver's requests that need
// storage hang until their own timeouts, and its watches on etcd go
// silent. ResumeEtcd continues it; otherwise it is continued at the test's
// cleanup.
func (c *Cluster) PauseEtcd(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "PauseEtcd")
	c.fault(t, c.etcd, c.startEtcd, c.etcd.pause)
}

// ResumeEtcd continues an etcd that PauseEtcd stopped, and returns once it
// is healthy and, when kube-apiserver runs and isn't paused, kube-apiserver
// is ready.
func (c *Cluster) ResumeEtcd(t testing.TB) {
	t.Helper()
	c.ownsProcesses(t, "ResumeEtcd")
	c.resume(t, c.etcd)
}

// fault applies act to p and has p restored at t's cleanup.
func (c *Cluster) fault(t testing.TB, p *process, start func(context.Context) error, act func() error) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := act(); err != nil {
		t.Fatal(err)
	}
	c.restoreAtCleanup(t, p, start)
}

// resume continues p and waits until it is ready again.
func (c *Cluster) resume(t testing.TB, p *process) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.resumeReady(t.Context(), p); err != nil {
		t.Fatal(err)
	}
}

// resumeReady continues p and waits until it is ready again: etcd
// healthy, and kube-apiserver ready when it and etcd run unpaused.
func (c *Cluster) resumeReady(ctx context.Context, p *process) error {
	if err := p.resume(); err != nil {
		return err
	}
	switch {
	case p == c.etcd:
		return c.waitEtcd(ctx)
	case p == c.apiserver && c.etcd.running() && !c.etcd.paused:
		return c.waitAPIServer(ctx)
	}
	return nil
}

// CompactEtcd compacts etcd's history up to its current revision, and
// returns that revision; it returns once the compaction is physically
// done. It talks to etcd's JSON gateway over plain HTTP on loopback.
// Compacting again with no write in between is no error.
//
// A read of an older revision straight from etcd then fails: a watch or
// a list with an older resourceVersion that kube-apiserver passes to etcd
// gets 410 Gone ("too old"). kube-apiserver serves watches of every
// resource but Events from its watch cache, whose history compaction
// doesn't shorten, so a ConfigMap watch from an older resourceVersion
// still in that history keeps working; Events have no watch cache, so
// their watches reach etcd and show the compaction.
func (c *Cluster) CompactEtcd(t testing.TB) int64 {
	t.Helper()
	c.ownsProcesses(t, "CompactEtcd")
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	base := c.etcd.flag("--advertise-client-urls")

	var rangeResp struct {
		Header struct {
			Revision json.Number `json:"revision"`
		} `json:"header"`
	}
	// Any key does: the header carries the store's revision.
	if err := c.etcdPost(ctx, base+"/v3/kv/range", `{"key":"AA==","count_only":true}`, &rangeResp); err != nil {
		t.Fatalf("clustertest: reading etcd's revision: %v", err)
	}
	rev, err := rangeResp.Header.Revision.Int64()
	if err != nil {
		t.Fatalf("clustertest: etcd's revision %q: %v", rangeResp.Header.Revision, err)
	}
	body := `{"revision":"` + strconv.FormatInt(rev, 10) + `","physical":true}`
	// A physical compaction answers once done, which takes longer than a
	// call with a large store: a minute's for each million revisions.
	compacting, cancelCompacting := context.WithTimeout(t.Context(), callTimeout+time.Duration(rev/1000)*60*time.Millisecond)
	defer cancelCompacting()
	err = c.etcdPost(compacting, base+"/v3/kv/compaction", body, nil)
	if err != nil && !strings.Contains(err.Error(), "required revision has been compacted") {
		t.Fatalf("clustertest: compacting etcd to revision %d: %v", rev, err)
	}
	return rev
}

// etcdPost POSTs body to one of etcd's gateway's URLs and decodes the
// answer into out, when out isn't nil.
func (c *Cluster) etcdPost(ctx context.Context, url, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	// The context bounds the call: the client's own 5 s would cut a
	// compaction short.
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(data))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("POST %s: %w: %s", url, err, bytes.TrimSpace(data))
	}
	return nil
}
