package clustertest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/procutil"
)

// A fakeRelease is what the publishers serve for one architecture: the
// two Kubernetes binaries, each with its .sha256 file as dl.k8s.io lays
// them out, and etcd's archive with the release's SHA256SUMS, as etcd's
// GitHub releases do. Its executables are fakes, made by the test.
type fakeRelease struct {
	arch  string
	files map[string][]byte // a path under the server's root → its body
}

// newFakeRelease makes a release for arch whose binaries are size bytes
// of random data each (etcd's archive holds one of that size, and
// etcdctl).
func newFakeRelease(t testing.TB, arch string, size int) *fakeRelease {
	t.Helper()
	r := &fakeRelease{arch: arch, files: map[string][]byte{}}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager"} {
		body := fakeExecutable(t, name, size)
		rel := "/k8s/" + kubernetesVersion + "/bin/linux/" + arch + "/" + name
		r.files[rel] = body
		r.files[rel+".sha256"] = []byte(sum(body)) // the sum alone, no newline, as dl.k8s.io's
	}
	dir := "etcd-" + etcdVersion + "-linux-" + arch
	archive := tarGz(t, map[string][]byte{
		dir + "/etcd":      fakeExecutable(t, "etcd", size),
		dir + "/etcdctl":   fakeExecutable(t, "etcdctl", 64),
		dir + "/README.md": []byte("etcd\n"),
	})
	r.files["/etcd/"+etcdVersion+"/"+dir+".tar.gz"] = archive
	r.files["/etcd/"+etcdVersion+"/SHA256SUMS"] = fmt.Appendf(nil, "%s  etcd-%s-darwin-arm64.zip\n%s  %s.tar.gz\n%s  etcd-%s-linux-s390x.tar.gz\n",
		sum([]byte("zip")), etcdVersion, sum(archive), dir, sum([]byte("s390x")), etcdVersion)
	return r
}

// etcd is the etcd executable inside the release's archive.
func (r *fakeRelease) etcd(t testing.TB) []byte {
	t.Helper()
	dir := "etcd-" + etcdVersion + "-linux-" + r.arch
	zr, err := gzip.NewReader(bytes.NewReader(r.files["/etcd/"+etcdVersion+"/"+dir+".tar.gz"]))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("the archive holds no etcd: %v", err)
		}
		if hdr.Name == dir+"/etcd" {
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return body
		}
	}
}

// fakeExecutable is a shell script naming name, padded with random bytes
// to size.
func fakeExecutable(t testing.TB, name string, size int) []byte {
	t.Helper()
	head := []byte("#!/bin/sh\necho fake " + name + "\nexit 0\n")
	if size <= len(head) {
		return head
	}
	pad := make([]byte, size-len(head))
	if _, err := rand.Read(pad); err != nil {
		t.Fatal(err)
	}
	return append(head, pad...)
}

// tarGz is a tar.gz archive of files, with their folder, as etcd's.
func tarGz(t testing.TB, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	dir, _, _ := strings.Cut(func() string {
		for name := range files {
			return name
		}
		return ""
	}(), "/")
	if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{dir + "/README.md", dir + "/etcdctl", dir + "/etcd"} {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sum is body's SHA-256 in hex.
func sum(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// A fakePublisher serves a fakeRelease over HTTPS on loopback, counting
// the requests it answers; handle, when set, answers in its place.
type fakePublisher struct {
	*httptest.Server
	release  *fakeRelease
	requests atomic.Int64
	handle   func(w http.ResponseWriter, r *http.Request) bool // true: answered
}

func newFakePublisher(t testing.TB, r *fakeRelease) *fakePublisher {
	t.Helper()
	p := &fakePublisher{release: r}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p.requests.Add(1)
		if p.handle != nil && p.handle(w, req) {
			return
		}
		body, ok := p.release.files[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(p.Close)
	return p
}

// A fakeBuild stands in for the build from source: it writes each program
// into the folder, and counts its calls.
type fakeBuild struct {
	mu    sync.Mutex
	calls int
}

func (b *fakeBuild) build(_ context.Context, bin string, w io.Writer) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	for _, p := range programs {
		if err := os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\necho built "+p+"\n"), 0o755); err != nil {
			return err
		}
	}
	_, _ = fmt.Fprintln(w, "fake build: built")
	return nil
}

func (b *fakeBuild) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// testSupply is a supply that fetches from p for linux/arch, as mode
// says, bounded by a second, and builds with a fake.
func testSupply(p *fakePublisher, mode Fetching) (supply, *fakeBuild) {
	roots := x509.NewCertPool()
	roots.AddCert(p.Certificate())
	b := &fakeBuild{}
	return supply{
		mode:       mode,
		modeFrom:   fmt.Sprintf("Fetch(%q)", mode),
		kubernetes: p.URL + "/k8s",
		etcd:       p.URL + "/etcd",
		goos:       "linux",
		goarch:     p.release.arch,
		bound:      time.Second,
		roots:      roots,
		build:      b.build,
	}, b
}

// needsFetch skips t where the build folder's lock can't be taken.
func needsFetch(t testing.TB) {
	t.Helper()
	if !procutil.Supported {
		t.Skip("the control plane runs on Unix only")
	}
}

// TestFetchVerified fetches a release from a publisher on loopback: the
// binaries land in the build folder, executable, byte for byte what was
// released (etcd out of its archive), with a stamp that makes the next
// start warm, and one line says so; nothing is built, and the warm start
// asks the server for nothing.
func TestFetchVerified(t *testing.T) {
	needsFetch(t)
	p := newFakePublisher(t, newFakeRelease(t, "amd64", 4<<10))
	s, b := testSupply(p, FetchOrBuild)
	bin := filepath.Join(t.TempDir(), "controlplane")
	var out bytes.Buffer
	begin := time.Now()
	got, err := provide(t.Context(), bin, &out, s)
	took := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fetched and verified 2 binaries and an archive of 4 KiB each from a loopback HTTPS server in %s", took)
	if got != bin {
		t.Errorf("provide = %q, want %q", got, bin)
	}
	want := map[string][]byte{
		"kube-apiserver":          p.release.files["/k8s/"+kubernetesVersion+"/bin/linux/amd64/kube-apiserver"],
		"kube-controller-manager": p.release.files["/k8s/"+kubernetesVersion+"/bin/linux/amd64/kube-controller-manager"],
		"etcd":                    p.release.etcd(t),
	}
	for name, body := range want {
		path := filepath.Join(bin, name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, body) {
			t.Errorf("%s holds %d bytes other than the %d released", name, len(data), len(body))
		}
		if info, err := os.Stat(path); err != nil || info.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s isn't executable (%v, %v)", name, info.Mode(), err)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(bin, ".*")); len(entries) > 0 {
		t.Errorf("downloads left behind: %q", entries)
	}
	stamp, err := sourceStamp()
	if err != nil {
		t.Fatal(err)
	}
	if !upToDate(bin, stamp) {
		t.Errorf("the fetched folder isn't up to date for the embedded source")
	}
	line := regexp.MustCompile(`^clustertest: fetched the control plane's released binaries \(kube-apiserver and kube-controller-manager v1\.37\.2 from ` +
		regexp.QuoteMeta(p.URL) + `/k8s, etcd v3\.7\.0 from ` + regexp.QuoteMeta(p.URL) + `/etcd, for linux/amd64\) into ` + regexp.QuoteMeta(bin) +
		` in [0-9.]+m?s, each matching the SHA-256 its publisher lists\n$`)
	if !line.MatchString(out.String()) {
		t.Errorf("provide wrote %q, want one line matching %s", out.String(), line)
	}
	if b.count() != 0 {
		t.Errorf("the build ran %d times, want none", b.count())
	}

	asked := p.requests.Load()
	out.Reset()
	if _, err := provide(t.Context(), bin, &out, s); err != nil {
		t.Fatal(err)
	}
	if p.requests.Load() != asked || out.Len() != 0 || b.count() != 0 {
		t.Errorf("the warm start made %d requests, built %d times and wrote %q; want none of them",
			p.requests.Load()-asked, b.count(), out.String())
	}
}

// TestFetchRefusesAWrongByte serves each file with one byte other than
// what its publisher's sum says: the download is refused, naming the
// file and both sums, nothing is built in its place, even when building
// is allowed, and nothing of it is left in the folder.
func TestFetchRefusesAWrongByte(t *testing.T) {
	needsFetch(t)
	for _, path := range []string{
		"/k8s/" + kubernetesVersion + "/bin/linux/amd64/kube-apiserver",
		"/k8s/" + kubernetesVersion + "/bin/linux/amd64/kube-controller-manager",
		"/etcd/" + etcdVersion + "/etcd-" + etcdVersion + "-linux-amd64.tar.gz",
	} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			r := newFakeRelease(t, "amd64", 4<<10)
			listed := sum(r.files[path])
			r.files[path][len(r.files[path])/2] ^= 1
			p := newFakePublisher(t, r)
			s, b := testSupply(p, FetchOrBuild)
			bin := filepath.Join(t.TempDir(), "controlplane")
			var out bytes.Buffer
			_, err := provide(t.Context(), bin, &out, s)
			want := fmt.Sprintf("clustertest: %s (%s%s) is refused: its SHA-256 is %s, and its publisher lists %s;"+
				" nothing is built in its place: a download that isn't what its publisher released may have been tampered with"+
				" (HUMUS_CONTROLPLANE_FETCH=off builds from source instead)",
				filepath.Base(path), p.URL, path, sum(r.files[path]), listed)
			if err == nil || err.Error() != want {
				t.Errorf("err = %v\nwant %s", err, want)
			}
			if b.count() != 0 {
				t.Errorf("the build ran %d times, want none", b.count())
			}
			entries, _ := os.ReadDir(bin)
			for _, e := range entries {
				if e.Name() == filepath.Base(path) || strings.HasPrefix(e.Name(), ".") || e.Name() == "stamp" {
					t.Errorf("the folder holds %s after a refused download", e.Name())
				}
			}
		})
	}
}

// TestFetchPinnedSum pins a sum of one's own: a download that matches its
// publisher's sum but not the pin is refused, naming PinSHA256 and both
// sums; one that matches both is fetched, and the line says the pins
// were checked.
func TestFetchPinnedSum(t *testing.T) {
	needsFetch(t)
	r := newFakeRelease(t, "arm64", 4<<10)
	p := newFakePublisher(t, r)
	rel := kubernetesVersion + "/bin/linux/arm64/kube-controller-manager"
	released := sum(r.files["/k8s/"+rel])
	other := strings.Repeat("ab", 32)

	s, b := testSupply(p, FetchOrBuild)
	s.pins = map[string]string{rel: other}
	_, err := provide(t.Context(), filepath.Join(t.TempDir(), "controlplane"), io.Discard, s)
	want := fmt.Sprintf("clustertest: kube-controller-manager (%s/k8s/%s) is refused: its SHA-256 is %s, and PinSHA256 lists %s;", p.URL, rel, released, other)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %v\nwant it to begin %s", err, want)
	}
	if b.count() != 0 {
		t.Errorf("the build ran %d times, want none", b.count())
	}

	s.pins = map[string]string{rel: strings.ToUpper(released), etcdVersion + "/etcd-" + etcdVersion + "-linux-amd64.tar.gz": other}
	var out bytes.Buffer
	if _, err := provide(t.Context(), filepath.Join(t.TempDir(), "controlplane"), &out, s); err != nil {
		t.Fatalf("with a matching pin (and one of another architecture): %v", err)
	}
	if !strings.HasSuffix(out.String(), "each matching the SHA-256 its publisher lists and the sums pinned\n") {
		t.Errorf("the line %q doesn't say the pins were checked", out.String())
	}
}

// TestFetchFallsBackToBuild asks a publisher that has no such release
// (404 for every file): the binaries are built instead, once, and the one
// line before the build says why; the folder is then up to date.
func TestFetchFallsBackToBuild(t *testing.T) {
	needsFetch(t)
	p := newFakePublisher(t, &fakeRelease{arch: "amd64", files: map[string][]byte{}})
	s, b := testSupply(p, FetchOrBuild)
	bin := filepath.Join(t.TempDir(), "controlplane")
	var out bytes.Buffer
	if _, err := provide(t.Context(), bin, &out, s); err != nil {
		t.Fatal(err)
	}
	if b.count() != 1 {
		t.Errorf("the build ran %d times, want once", b.count())
	}
	want := "clustertest: building the control plane (etcd, kube-apiserver, kube-controller-manager) from Kubernetes v1.37.2's source into " + bin +
		", since fetching the released binaries failed: clustertest: fetching " + p.URL + "/k8s/v1.37.2/bin/linux/amd64/kube-apiserver.sha256: 404 Not Found;" +
		" a cold build takes 13 to 18 minutes on two cores\nfake build: built\n"
	if got, _, _ := strings.Cut(out.String(), "clustertest: built the control plane in"); got != want {
		t.Errorf("provide wrote %q\nwant it to begin %q", out.String(), want)
	}
	stamp, err := sourceStamp()
	if err != nil {
		t.Fatal(err)
	}
	if !upToDate(bin, stamp) {
		t.Errorf("the built folder isn't up to date")
	}
}

// TestFetchServerNeverAnswers points the fetch at a server that accepts
// the request and then sends nothing, before its headers or in the middle
// of a body: after the bound (a second here, 30s by default) the fetch
// gives up, saying why, and the build takes over.
func TestFetchServerNeverAnswers(t *testing.T) {
	needsFetch(t)
	for _, tc := range []struct {
		name  string
		stall func(w http.ResponseWriter)
		why   string
	}{
		{name: "no headers", stall: func(http.ResponseWriter) {}, why: "timeout awaiting response headers"},
		{name: "half a body", stall: func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write(make([]byte, 10))
			w.(http.Flusher).Flush()
		}, why: "no byte came for 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakePublisher(t, newFakeRelease(t, "amd64", 4<<10))
			release := make(chan struct{})
			defer close(release) // before the server's Close, which waits for its handlers
			p.handle = func(w http.ResponseWriter, r *http.Request) bool {
				if !strings.HasSuffix(r.URL.Path, "/kube-apiserver") {
					return false
				}
				tc.stall(w)
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return true
			}
			s, b := testSupply(p, FetchOrBuild)
			var out bytes.Buffer
			begin := time.Now()
			if _, err := provide(t.Context(), filepath.Join(t.TempDir(), "controlplane"), &out, s); err != nil {
				t.Fatal(err)
			}
			took := time.Since(begin)
			if b.count() != 1 {
				t.Errorf("the build ran %d times, want once", b.count())
			}
			if took > 5*time.Second {
				t.Errorf("the fallback took %s, want the bound of 1s and little more", took)
			}
			if !strings.Contains(out.String(), "since fetching the released binaries failed: clustertest: fetching "+p.URL+"/k8s/v1.37.2/bin/linux/amd64/kube-apiserver: ") ||
				!strings.Contains(out.String(), tc.why) {
				t.Errorf("provide wrote %q, want it to say fetching kube-apiserver failed: %s", out.String(), tc.why)
			}
		})
	}
}

// TestFetchWhereNothingIsFetched: BuildOnly builds without a request, and
// so does a machine that isn't Linux, each saying why in its one line;
// FetchOnly, where the fetch fails or can't be tried, fails saying why,
// and builds nothing.
func TestFetchWhereNothingIsFetched(t *testing.T) {
	needsFetch(t)
	for _, tc := range []struct {
		name   string
		mode   Fetching
		goos   string
		empty  bool // the publisher has no such release
		why    string
		err    string
		builds int
	}{
		{name: "build only", mode: BuildOnly, goos: "linux", builds: 1, why: `since Fetch("off") says to build them;`},
		{name: "macOS", mode: FetchOrBuild, goos: "darwin", builds: 1, why: "since Kubernetes publishes its server binaries for Linux only, and this is darwin/amd64;"},
		{name: "fetch only, macOS", mode: FetchOnly, goos: "darwin",
			err: `clustertest: Kubernetes publishes its server binaries for Linux only, and this is darwin/amd64, and Fetch("only") says not to build them`},
		{name: "fetch only, no release", mode: FetchOnly, goos: "linux", empty: true,
			err: `clustertest: fetching URL/k8s/v1.37.2/bin/linux/amd64/kube-apiserver.sha256: 404 Not Found (Fetch("only") builds from source where the binaries can't be fetched)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFakeRelease(t, "amd64", 64)
			if tc.empty {
				r.files = map[string][]byte{}
			}
			p := newFakePublisher(t, r)
			s, b := testSupply(p, tc.mode)
			s.goos = tc.goos
			var out bytes.Buffer
			_, err := provide(t.Context(), filepath.Join(t.TempDir(), "controlplane"), &out, s)
			if want := strings.ReplaceAll(tc.err, "URL", p.URL); tc.err != "" && (err == nil || err.Error() != want) {
				t.Errorf("err = %v\nwant %s", err, want)
			} else if tc.err == "" && err != nil {
				t.Fatal(err)
			}
			if b.count() != tc.builds {
				t.Errorf("the build ran %d times, want %d", b.count(), tc.builds)
			}
			if asked := p.requests.Load(); !tc.empty && asked != 0 {
				t.Errorf("the server was asked %d times, want never", asked)
			}
			if tc.why != "" && !strings.Contains(out.String(), tc.why) {
				t.Errorf("provide wrote %q, want it to say %q", out.String(), tc.why)
			}
		})
	}
}

// TestFetchSettings: the Options say whether and where to fetch; the
// environment's variables, when set, override them; every mistake is in
// one error.
func TestFetchSettings(t *testing.T) {
	type want struct {
		mode, modeFrom, kubernetes, etcd string
	}
	for _, tc := range []struct {
		name string
		opts []Option
		env  map[string]string
		want want
		err  string
	}{
		{name: "defaults", want: want{"auto", "", DefaultKubernetesURL, DefaultEtcdURL}},
		{name: "options", opts: []Option{Fetch(FetchOnly), FetchFrom("https://mirror.example/k8s/", "https://mirror.example/etcd")},
			want: want{"only", `Fetch("only")`, "https://mirror.example/k8s", "https://mirror.example/etcd"}},
		{name: "one mirror", opts: []Option{FetchFrom("", "https://mirror.example/etcd")},
			want: want{"auto", "", DefaultKubernetesURL, "https://mirror.example/etcd"}},
		{name: "the environment overrides", opts: []Option{Fetch(FetchOnly), FetchFrom("https://a.example/k8s", "https://a.example/etcd")},
			env:  map[string]string{EnvFetch: "off", EnvKubernetesURL: "https://b.example/k8s", EnvEtcdURL: "https://b.example/etcd"},
			want: want{"off", "HUMUS_CONTROLPLANE_FETCH=off", "https://b.example/k8s", "https://b.example/etcd"}},
		{name: "empty variables are unset", opts: []Option{Fetch(BuildOnly)}, env: map[string]string{EnvFetch: ""},
			want: want{"off", `Fetch("off")`, DefaultKubernetesURL, DefaultEtcdURL}},
		{name: "every mistake",
			opts: []Option{FetchFrom("http://mirror.example/k8s", ""), PinSHA256("v1.37.2/bin/linux/amd64/kubectl", "abc"),
				PinSHA256(etcdVersion+"/etcd-"+etcdVersion+"-linux-amd64.tar.gz", strings.Repeat("0", 64))},
			env: map[string]string{EnvFetch: "yes", EnvEtcdURL: "mirror"},
			err: `clustertest: HUMUS_CONTROLPLANE_FETCH=yes: want "auto" (fetch, or build where fetching fails), "only" (fetch only) or "off" (build only)` + "\n" +
				`clustertest: FetchFrom: "http://mirror.example/k8s" is not an https URL` + "\n" +
				`clustertest: HUMUS_CONTROLPLANE_ETCD_URL: "mirror" is not an https URL` + "\n" +
				`clustertest: PinSHA256("v1.37.2/bin/linux/amd64/kubectl"): not a file fetched: one of v1.37.2/bin/linux/ARCH/{kube-apiserver,kube-controller-manager} or v3.7.0/etcd-v3.7.0-linux-ARCH.tar.gz` + "\n" +
				`clustertest: PinSHA256("v1.37.2/bin/linux/amd64/kubectl", "abc"): a SHA-256 is 64 hex digits`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := collect(tc.opts).settings(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("err = %v\nwant %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := (want{string(s.mode), s.modeFrom, s.kubernetes, s.etcd}); got != tc.want {
				t.Errorf("settings = %+v, want %+v", got, tc.want)
			}
			if s.bound != fetchBound || s.build == nil {
				t.Errorf("settings bound %s and build %v, want %s and the build from source", s.bound, s.build != nil, fetchBound)
			}
		})
	}
}

// TestFetchedVersionsAreTheBuiltOnes: the releases fetched are those the
// embedded source builds.
func TestFetchedVersionsAreTheBuiltOnes(t *testing.T) {
	goMod, err := source.ReadFile("source/go.mod.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, require := range []string{"\tk8s.io/kubernetes " + kubernetesVersion + "\n", "\tgo.etcd.io/etcd/server/v3 " + etcdVersion + "\n"} {
		if !strings.Contains(string(goMod), require) {
			t.Errorf("the embedded go.mod doesn't require %q, the release fetched", strings.TrimSpace(require))
		}
	}
}

// TestExtract takes etcd from the one folder at the top of the archive,
// whatever its name, and no other etcd.
func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		want  string
		err   string
	}{
		{name: "etcd's folder", files: map[string][]byte{"etcd-v3.7.0-linux-amd64/etcd": []byte("server"), "etcd-v3.7.0-linux-amd64/etcdctl": []byte("client")}, want: "server"},
		{name: "another folder", files: map[string][]byte{"./release/etcd": []byte("server")}, want: "server"},
		{name: "at the top", files: map[string][]byte{"etcd": []byte("server")}, err: "it holds no FOLDER/etcd"},
		{name: "deeper", files: map[string][]byte{"a/b/etcd": []byte("server")}, err: "it holds no FOLDER/etcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			for name, body := range tc.files {
				if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body))}); err != nil {
					t.Fatal(err)
				}
				if _, err := tw.Write(body); err != nil {
					t.Fatal(err)
				}
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "a.tar.gz"), filepath.Join(dir, "etcd")
			if err := os.WriteFile(src, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			err := extract(src, "etcd", dst)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("err = %v, want %s", err, tc.err)
				}
				return
			}
			got, rerr := os.ReadFile(dst)
			if err != nil || rerr != nil || string(got) != tc.want {
				t.Errorf("extract: %v; it wrote %q (%v), want %q", err, got, rerr, tc.want)
			}
		})
	}
}

func TestListedSum(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("B", 64)
	sums := a + "  etcd-v3.7.0-linux-amd64.tar.gz\n" + b + " *etcd-v3.7.0-linux-arm64.tar.gz\nnot a line\n"
	for name, want := range map[string]string{
		"etcd-v3.7.0-linux-amd64.tar.gz": a,
		"etcd-v3.7.0-linux-arm64.tar.gz": strings.ToLower(b),
		"etcd-v3.7.0-linux-s390x.tar.gz": "",
	} {
		if got, ok := listedSum(sums, name); got != want || ok != (want != "") {
			t.Errorf("listedSum(%s) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// TestBuildTakesNoSource: Build fetches or builds, and says that
// FromAssets and FromKubeconfig are Run's and Start's.
func TestBuildTakesNoSource(t *testing.T) {
	// Were Build to go on, it would find nothing to fetch on loopback and
	// build nothing: these machines reach no download location.
	t.Setenv(EnvDir, filepath.Join(t.TempDir(), "controlplane"))
	t.Setenv(EnvFetch, string(FetchOnly))
	t.Setenv(EnvKubernetesURL, "https://127.0.0.1:1/k8s")
	t.Setenv(EnvEtcdURL, "https://127.0.0.1:1/etcd")
	_, err := Build(t.Context(), FromAssets("/assets"), Fetch(FetchOnly), FetchFrom("https://127.0.0.1:1/k8s", "https://127.0.0.1:1/etcd"))
	want := "clustertest: Build fetches or builds the control plane's binaries; [the control plane of envtest's assets in /assets] is an option of Run and Start"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// BenchmarkFetch times the fetch from a publisher on loopback: the two
// Kubernetes binaries and etcd's archive, of 32 MiB each (random bytes,
// which gzip doesn't shrink),
// downloaded over HTTPS, hashed, checked, and etcd extracted. It reports
// the bytes downloaded a second; a real download's time is its size over
// the network's speed, and this path's cost on top.
func BenchmarkFetch(b *testing.B) {
	needsFetch(b)
	size := 32 << 20
	r := newFakeRelease(b, "amd64", size)
	p := newFakePublisher(b, r)
	s, _ := testSupply(p, FetchOnly)
	total := 0
	for path, body := range r.files {
		if !strings.HasSuffix(path, ".sha256") && !strings.HasSuffix(path, "SHA256SUMS") {
			total += len(body)
		}
	}
	b.SetBytes(int64(total))
	b.ResetTimer()
	for range b.N {
		bin := filepath.Join(b.TempDir(), "controlplane")
		if _, err := provide(b.Context(), bin, io.Discard, s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFetchRefusesARedirectToHTTP: a redirect to plain http is a failed
// fetch, not a download; the build takes over, saying why.
func TestFetchRefusesARedirectToHTTP(t *testing.T) {
	needsFetch(t)
	p := newFakePublisher(t, newFakeRelease(t, "amd64", 64))
	p.handle = func(w http.ResponseWriter, r *http.Request) bool {
		http.Redirect(w, r, "http://127.0.0.1:1"+r.URL.Path, http.StatusFound)
		return true
	}
	s, b := testSupply(p, FetchOrBuild)
	var out bytes.Buffer
	if _, err := provide(t.Context(), filepath.Join(t.TempDir(), "controlplane"), &out, s); err != nil {
		t.Fatal(err)
	}
	if b.count() != 1 || !strings.Contains(out.String(), "redirected to http://127.0.0.1:1/k8s/v1.37.2/bin/linux/amd64/kube-apiserver.sha256, which isn't https") {
		t.Errorf("the build ran %d times and provide wrote %q; want one build, after a line naming the redirect refused", b.count(), out.String())
	}
}

// TestFetchSettingsReachBuildAndStart: Build reads the environment's
// settings, and Start passes its Options on: told to fetch only, from a
// port on loopback where nothing listens, each fails saying so, and
// builds nothing.
func TestFetchSettingsReachBuildAndStart(t *testing.T) {
	needsFetch(t)
	if runtime.GOOS != "linux" {
		t.Skip("elsewhere nothing is fetched")
	}
	t.Setenv(EnvDir, filepath.Join(t.TempDir(), "controlplane"))
	t.Setenv(EnvKubernetesURL, "https://127.0.0.1:1/k8s")
	t.Setenv(EnvEtcdURL, "https://127.0.0.1:1/etcd")
	t.Setenv("PATH", "") // no go command: were the settings lost, the build would fail at once, not run
	// The Options name loopback too, so that code that loses either the
	// environment or the Options still asks no download location.
	nowhere := FetchFrom("https://127.0.0.1:1/k8s", "https://127.0.0.1:1/etcd")
	refused := "clustertest: fetching https://127.0.0.1:1/k8s/v1.37.2/bin/linux/" + runtime.GOARCH + "/kube-apiserver.sha256: "

	t.Run("Build, by the environment", func(t *testing.T) {
		t.Setenv(EnvFetch, string(FetchOnly))
		_, err := Build(t.Context(), Fetch(BuildOnly), nowhere, Progress(io.Discard))
		if err == nil || !strings.HasPrefix(err.Error(), refused) || !strings.HasSuffix(err.Error(), "(HUMUS_CONTROLPLANE_FETCH=only builds from source where the binaries can't be fetched)") {
			t.Errorf("err = %v, want it to say fetching from 127.0.0.1:1 failed, and that HUMUS_CONTROLPLANE_FETCH=only says not to build", err)
		}
	})
	t.Run("Start, by its Option", func(t *testing.T) {
		t.Setenv(EnvFetch, "")
		_, err := Start(t.Context(), t.TempDir(), Fetch(FetchOnly), nowhere, Progress(io.Discard))
		if err == nil || !strings.HasPrefix(err.Error(), refused) || !strings.HasSuffix(err.Error(), `(Fetch("only") builds from source where the binaries can't be fetched)`) {
			t.Errorf("err = %v, want it to say fetching from 127.0.0.1:1 failed, and that Fetch(\"only\") says not to build", err)
		}
	})
}

func TestPinnable(t *testing.T) {
	for p, want := range map[string]bool{
		"v1.37.2/bin/linux/amd64/kube-apiserver":          true,
		"v1.37.2/bin/linux/s390x/kube-controller-manager": true,
		"v3.7.0/etcd-v3.7.0-linux-arm64.tar.gz":           true,
		"v1.37.2/bin/linux/amd64/kubectl":                 false,
		"v1.37.1/bin/linux/amd64/kube-apiserver":          false,
		"v1.37.2/bin/linux//kube-apiserver":               false,
		"v1.37.2/bin/linux/amd64/kube-apiserver/x":        false,
		"v3.7.0/etcd-v3.7.0-linux-.tar.gz":                false,
		"v3.7.0/etcd-v3.7.0-linux-a/b.tar.gz":             false,
		"v3.7.0/etcd-v3.7.0-darwin-arm64.zip":             false,
		"kube-apiserver":                                  false,
	} {
		if got := pinnable(p); got != want {
			t.Errorf("pinnable(%q) = %v, want %v", p, got, want)
		}
	}
}
