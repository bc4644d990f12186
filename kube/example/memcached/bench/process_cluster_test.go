package bench_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/example/memcached/app"
	"github.com/z5labs/humus/kube/internal/procutil"
)

// Each App runs in a process of its own, this test binary started again
// to run TestApp, so what the process holds and spends is the App's
// alone: its heap, CPU and peak resident set aren't mixed with the
// benchmark's watches, its clients and its reading of the audit log.

// appConfigEnv names the file of the child's appConfig; TestApp skips
// without it.
const appConfigEnv = "HUMUS_BENCH_APP_CONFIG"

// controlPrefix begins the line the child writes on stdout, with the
// address of its control server, once it is ready to start the App.
const controlPrefix = "bench app: control at "

// appConfig is the pod the child's App runs in: its Host's environment
// and files, as the parent's ClusterPodHost set them up, and where it
// writes its profiles, if anywhere.
type appConfig struct {
	Env     map[string]string `json:"env"`
	Files   map[string][]byte `json:"files"`
	Profile string            `json:"profile"`
	// MemProfileRate is the heap profile's sampling rate, when profiled.
	MemProfileRate int `json:"memProfileRate"`
	// App names the App the child runs: "" for the Memcached example's,
	// otherwise one of benchApps.
	App string `json:"app"`
}

// profile, given, is where each App's process writes its CPU profile,
// from its start to when its figures are first read (once it is idle),
// and its heap profile then: <profile>-<n>.cpu.pprof and .heap.pprof,
// n counting the Apps of the benchmark run.
var profile = flag.String("profile", "", "writes each App's CPU and heap profiles to files named from this prefix")

// memProfileRate is the profiled App's heap sampling rate: a byte in 512
// by default, fine enough to break the heap an object down, but its
// stack walks take a third of a profiled run's CPU; 524288 is the
// runtime's own, for a profile of the CPU as an App spends it unprofiled.
var memProfileRate = flag.Int("app-memprofilerate", 512, "the profiled App's heap sampling rate (runtime.MemProfileRate)")

// usageReport is what the child's /usage answers: the App's figures
// since /start, its heap read after a collection.
type usageReport struct {
	HeapBytes float64 `json:"heapBytes"` // heap in use, less before the App started
	CPU       float64 `json:"cpuSeconds"`
	PeakRSS   float64 `json:"peakRSSBytes"` // the process's, so the App's
	Received  int64   `json:"receivedBytes"`
}

// histogramReport is what the child's /histogram answers: the data
// points of one instrument, merged, and their counts by an attribute. A
// histogram's counts are of its recordings, a counter's of what was added
// to it; a counter has no Bounds or Buckets.
type histogramReport struct {
	Count   uint64            `json:"count"`
	Bounds  []float64         `json:"bounds"`
	Buckets []uint64          `json:"buckets"`
	Counts  map[string]uint64 `json:"counts"`
}

// TestApp is the child: the Memcached App on the pod appConfigEnv names,
// started on POST /start and reporting on GET /usage and /histogram, at
// the address it writes on stdout. SIGTERM signals the App; the test
// fails if it exits other than 0.
func TestApp(t *testing.T) {
	path := os.Getenv(appConfigEnv)
	if path == "" {
		t.Skip("the benchmarks' App process, which they start")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := &childApp{t: t, started: make(chan *humustest.Process, 1), reader: sdkmetric.NewManualReader()}
	if err := json.Unmarshal(data, &a.cfg); err != nil {
		t.Fatal(err)
	}
	if a.cfg.Profile != "" {
		runtime.MemProfileRate = a.cfg.MemProfileRate
	}
	a.init = app.Init
	if a.cfg.App != "" {
		if a.init = benchApps[a.cfg.App]; a.init == nil {
			t.Fatalf("no App named %q", a.cfg.App)
		}
	}
	a.host, a.received = a.cfg.host()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)
	// What the process holds and has spent before the App starts: nothing
	// runs from here to /start but the control server, idle.
	a.heapBefore, a.cpuBefore = float64(heapInUse()), usage()
	srv := &http.Server{Handler: a.mux(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()
	fmt.Println(controlPrefix + l.Addr().String())

	var p *humustest.Process
	select {
	case p = <-a.started:
	case <-term:
		return // signalled before it started
	}
	select {
	case <-term:
		p.Signal()
	case <-p.Done():
	}
	a.stopProfile()
	if code := p.Wait(); code != 0 {
		t.Fatalf("the App exited %d", code)
	}
}

// childApp is the child's state: its App, once started, and what it
// reports.
type childApp struct {
	t        *testing.T
	cfg      appConfig
	init     humus.Init // the App the child runs
	host     humus.Host
	received *atomic.Int64 // bytes read from the App's connections
	reader   *sdkmetric.ManualReader

	heapBefore float64
	cpuBefore  time.Duration

	once, profiled sync.Once
	started        chan *humustest.Process
}

// mux serves POST /start, GET /usage and GET /histogram.
func (a *childApp) mux() *http.ServeMux {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(a.reader))
	tel := humus.WithTelemetry(func(context.Context, humus.Host) (humus.Telemetry, error) {
		return humus.Telemetry{MeterProvider: mp}, nil
	})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /start", func(w http.ResponseWriter, r *http.Request) {
		a.once.Do(func() {
			if a.cfg.Profile != "" {
				startProfile(a.t, a.cfg.Profile)
			}
			a.started <- humustest.Start(a.t, a.host, a.init, tel)
		})
	})
	mux.HandleFunc("GET /usage", func(w http.ResponseWriter, r *http.Request) {
		a.stopProfile()
		answer(w, usageReport{
			HeapBytes: float64(heapInUse()) - a.heapBefore,
			CPU:       (usage() - a.cpuBefore).Seconds(),
			PeakRSS:   peakRSS(),
			Received:  a.received.Load(),
		})
	})
	mux.HandleFunc("GET /histogram", func(w http.ResponseWriter, r *http.Request) {
		var rm metricdata.ResourceMetrics
		if err := a.reader.Collect(r.Context(), &rm); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		answer(w, histogramOf(rm, r.URL.Query().Get("name"), attribute.Key(r.URL.Query().Get("by"))))
	})
	return mux
}

// stopProfile ends the profiles, once: at the first /usage, or when the
// App ends.
func (a *childApp) stopProfile() {
	if a.cfg.Profile != "" {
		a.profiled.Do(func() { stopProfile(a.t, a.cfg.Profile) })
	}
}

// startProfile starts the process's CPU profile, to prefix.cpu.pprof.
func startProfile(t *testing.T, prefix string) {
	f, err := os.Create(prefix + ".cpu.pprof")
	if err != nil {
		t.Error(err)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Error(err)
	}
}

// stopProfile stops the CPU profile, and writes the heap's to
// prefix.heap.pprof.
func stopProfile(t *testing.T, prefix string) {
	pprof.StopCPUProfile()
	f, err := os.Create(prefix + ".heap.pprof")
	if err != nil {
		t.Error(err)
		return
	}
	defer func() { _ = f.Close() }()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Error(err)
	}
}

// host is the Host of cfg's pod, and the count of the bytes read from
// the connections dialled through it.
func (cfg appConfig) host() (humus.Host, *atomic.Int64) {
	h := humustest.NewHost()
	maps.Copy(h.Env, cfg.Env)
	for name, data := range cfg.Files {
		h.Files[name] = &fstest.MapFile{Data: data}
	}
	host := h.Host()
	// Its records go where the child's go, not into memory.
	host.Stdout, host.Stderr = os.Stderr, os.Stderr
	received := new(atomic.Int64)
	dial := host.Dial
	host.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: conn, n: received}, nil
	}
	return host, received
}

func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// histogramOf merges the data points of rm's histogram, or integer
// counter, named name, and counts them by the value of the attribute by.
func histogramOf(rm metricdata.ResourceMetrics, name string, by attribute.Key) histogramReport {
	h := histogramReport{Counts: map[string]uint64{}}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					v, _ := dp.Attributes.Value(by)
					h.Count += uint64(dp.Value)
					h.Counts[v.AsString()] += uint64(dp.Value)
				}
				continue
			}
			data, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			for _, dp := range data.DataPoints {
				h.Count += dp.Count
				v, _ := dp.Attributes.Value(by)
				h.Counts[v.AsString()] += dp.Count
				if h.Bounds == nil {
					h.Bounds, h.Buckets = dp.Bounds, make([]uint64, len(dp.BucketCounts))
				}
				for i, n := range dp.BucketCounts {
					h.Buckets[i] += n
				}
			}
		}
	}
	return h
}

// countingConn counts the bytes read from a connection into n.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// usage is the process's user and system CPU time.
func usage() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapInUse is the Go heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// peakRSS is the process's peak resident set, in bytes.
func peakRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			_, _ = fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb * 1024
		}
	}
	return 0
}

// appProcess is an App's process, as the parent sees it.
type appProcess struct {
	cmd     *exec.Cmd
	control string // the child's control server's address
	out     *procutil.SyncBuffer
	done    chan struct{} // closed once it has exited
	err     error         // cmd.Wait's, once done is closed
}

// profiles counts the Apps that wrote profiles.
var profiles atomic.Int64

// spawn starts the child on host's pod, and returns once it is ready to
// start the App. It is killed when b ends, if it still runs, and its
// output logged if b failed.
func spawn(b *testing.B, h *humustest.Host) *appProcess {
	b.Helper()
	return spawnApp(b, h, "")
}

// spawnApp is spawn for the App named name: "" for the Memcached
// example's, otherwise one of benchApps.
func spawnApp(b *testing.B, h *humustest.Host, name string) *appProcess {
	b.Helper()
	cfg := appConfig{Env: h.Env, Files: map[string][]byte{}, App: name}
	if *profile != "" {
		cfg.Profile = fmt.Sprintf("%s-%d", *profile, profiles.Add(1))
		cfg.MemProfileRate = *memProfileRate
	}
	for name, f := range h.Files {
		cfg.Files[name] = f.Data
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "app.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestApp$", "-test.count=1")
	cmd.Env = append(os.Environ(), appConfigEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	p := &appProcess{cmd: cmd, out: &procutil.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	control := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if addr, ok := strings.CutPrefix(line, controlPrefix); ok {
				control <- addr
			}
			_, _ = fmt.Fprintln(p.out, line)
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.err = cmd.Wait()
		close(p.done)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if b.Failed() {
			b.Logf("the App's output:\n%s", p.out.String())
		}
	})
	select {
	case p.control = <-control:
	case <-p.done:
		b.Fatalf("the App's process exited before it was ready: %v\n%s", p.err, p.out.String())
	case <-time.After(time.Minute):
		b.Fatal("the App's process wasn't ready within a minute")
	}
	return p
}

// start starts the App.
func (p *appProcess) start(b *testing.B) {
	b.Helper()
	res, err := http.Post("http://"+p.control+"/start", "", nil)
	if err != nil {
		b.Fatalf("starting the App: %v", err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("starting the App: %s", res.Status)
	}
}

// get decodes the child's answer to GET path into v.
func (p *appProcess) get(b *testing.B, path string, v any) {
	b.Helper()
	res, err := http.Get("http://" + p.control + path)
	if err != nil {
		b.Fatalf("asking the App's process for %s: %v", path, err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		b.Fatalf("asking the App's process for %s: %s: %s", path, res.Status, body)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		b.Fatalf("asking the App's process for %s: %v", path, err)
	}
}

func (p *appProcess) usage(b *testing.B) usageReport {
	b.Helper()
	var u usageReport
	p.get(b, "/usage", &u)
	return u
}

func (p *appProcess) histogram(b *testing.B, name string, by attribute.Key) histogramReport {
	b.Helper()
	var h histogramReport
	p.get(b, "/histogram?"+url.Values{"name": {name}, "by": {string(by)}}.Encode(), &h)
	return h
}

// signal sends the App its shutdown signal, SIGTERM.
func (p *appProcess) signal(b *testing.B) {
	b.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		b.Fatal(err)
	}
}

// exited reports whether the process has exited.
func (p *appProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to a minute for the process to exit, and fails b unless
// the App exited 0.
func (p *appProcess) wait(b *testing.B) {
	b.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		b.Fatal("the App's process didn't exit within a minute of its signal")
	}
	if p.err != nil {
		b.Fatalf("the App's process: %v\n%s", p.err, p.out.String())
	}
}
