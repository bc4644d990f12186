package clustertest

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// etcdVersion is the release of etcd the control plane runs: the embedded
// go.mod's go.etcd.io/etcd/server/v3, and the release fetched.
const etcdVersion = "v3.7.0"

// The publishers' download locations, where the released binaries are
// fetched from unless FetchFrom or the environment names a mirror.
const (
	// DefaultKubernetesURL is where Kubernetes publishes its release
	// binaries: kube-apiserver of v1.37.2 for linux/amd64 is
	// DefaultKubernetesURL/v1.37.2/bin/linux/amd64/kube-apiserver, and its
	// SHA-256, in hex, is the file of the same name ending in .sha256.
	DefaultKubernetesURL = "https://dl.k8s.io/release"
	// DefaultEtcdURL is where etcd publishes its releases, on GitHub: etcd
	// v3.7.0 for linux/amd64 is
	// DefaultEtcdURL/v3.7.0/etcd-v3.7.0-linux-amd64.tar.gz, and the
	// release's SHA256SUMS file, beside it, lists its SHA-256.
	DefaultEtcdURL = "https://github.com/etcd-io/etcd/releases/download"
)

// The environment variables that say, on one machine, whether and where
// the control plane's released binaries are fetched from. Each, when set
// and not empty, overrides the Option of the same setting: the code says
// what a module wants, and the machine what it can reach.
const (
	// EnvFetch says whether the released binaries are fetched: "auto"
	// (fetched, and built where they can't be), "only" (fetched, never
	// built) or "off" (built, and nothing is downloaded); see Fetch.
	EnvFetch = "HUMUS_CONTROLPLANE_FETCH"
	// EnvKubernetesURL names a mirror of DefaultKubernetesURL; see
	// FetchFrom.
	EnvKubernetesURL = "HUMUS_CONTROLPLANE_KUBERNETES_URL"
	// EnvEtcdURL names a mirror of DefaultEtcdURL; see FetchFrom.
	EnvEtcdURL = "HUMUS_CONTROLPLANE_ETCD_URL"
)

// Fetching says whether the control plane's binaries are fetched,
// released, from their publishers, or built from source.
type Fetching string

const (
	// FetchOrBuild, the default, fetches the released binaries, and
	// builds them from source where they can't be fetched: off Linux, for
	// which Kubernetes publishes no server binaries, or when a download
	// fails (no network, no such release). A download whose SHA-256
	// differs from the one its publisher lists is refused, and nothing is
	// built in its place.
	FetchOrBuild Fetching = "auto"
	// FetchOnly fetches the released binaries, and fails where it can't,
	// saying why; nothing is built.
	FetchOnly Fetching = "only"
	// BuildOnly builds the binaries from source and downloads nothing (the
	// go command still fetches modules through GOPROXY).
	BuildOnly Fetching = "off"
)

// Fetch says whether Run, Start and Build fetch the released binaries or
// build them (FetchOrBuild unless it says otherwise). The environment's
// HUMUS_CONTROLPLANE_FETCH, when set, overrides it. Binaries already in
// BuildDir, fetched or built, are used either way: neither is done again.
func Fetch(how Fetching) Option {
	return func(o *options) { o.fetch = how }
}

// FetchFrom fetches the released binaries from mirrors of the publishers'
// locations, such as a repository manager inside a company's network:
// kubernetes in place of DefaultKubernetesURL and etcd in place of
// DefaultEtcdURL, each an https URL laid out as the one it mirrors. An
// empty one keeps its default. HUMUS_CONTROLPLANE_KUBERNETES_URL and
// HUMUS_CONTROLPLANE_ETCD_URL, when set, override them. Every download is
// checked against the SHA-256 the mirror serves beside it, as the
// publisher lists it; PinSHA256 checks it against a sum of one's own too.
func FetchFrom(kubernetes, etcd string) Option {
	return func(o *options) { o.kubernetesURL, o.etcdURL = kubernetes, etcd }
}

// PinSHA256 checks the released file at path (relative to its location,
// DefaultKubernetesURL or DefaultEtcdURL: such as
// "v1.37.2/bin/linux/amd64/kube-apiserver" or
// "v3.7.0/etcd-v3.7.0-linux-amd64.tar.gz") against sum, its SHA-256 in
// hex, as well as against the sum its publisher lists: a download that
// differs from either is refused. A pin of a file this machine doesn't
// fetch (another architecture's) is unused; a path that names none of the
// files fetched on any architecture, or a sum that isn't 64 hex digits,
// is an error. Binaries already in BuildDir aren't checked again.
func PinSHA256(path, sum string) Option {
	return func(o *options) {
		if o.pins == nil {
			o.pins = map[string]string{}
		}
		o.pins[path] = sum
	}
}

// A supply says how the control plane's binaries get into the build
// folder: fetched from where, or built.
type supply struct {
	mode       Fetching
	modeFrom   string            // what set mode: "HUMUS_CONTROLPLANE_FETCH=off", "Fetch(BuildOnly)" or ""
	kubernetes string            // the base URL of Kubernetes' release binaries
	etcd       string            // the base URL of etcd's releases
	pins       map[string]string // a path under its base URL → the SHA-256 pinned for it
	goos       string            // the platform fetched for
	goarch     string

	// bound is how long a download may go without a byte (and a
	// connection, a TLS handshake or a response's headers may take)
	// before it is abandoned: fetchBound unless a test says otherwise.
	bound time.Duration
	// roots are the CAs that a download's server is checked against; nil
	// is the system's.
	roots *x509.CertPool
	// build builds the binaries from source into a folder, writing its
	// progress to w; compile unless a test says otherwise.
	build func(ctx context.Context, bin string, w io.Writer) error
}

// fetchBound is how long a download may go without a byte before it is
// abandoned, and the build takes over.
const fetchBound = 30 * time.Second

// settings is the supply o and the environment (getenv) say, or an error
// naming every mistake in them. The environment overrides o.
func (o options) settings(getenv func(string) string) (supply, error) {
	s := supply{
		mode:       FetchOrBuild,
		kubernetes: DefaultKubernetesURL,
		etcd:       DefaultEtcdURL,
		pins:       o.pins,
		goos:       runtime.GOOS,
		goarch:     runtime.GOARCH,
		bound:      fetchBound,
		build:      compile,
	}
	var errs []error
	if o.fetch != "" {
		s.mode, s.modeFrom = o.fetch, fmt.Sprintf("Fetch(%q)", o.fetch)
	}
	if v := getenv(EnvFetch); v != "" {
		s.mode, s.modeFrom = Fetching(v), EnvFetch+"="+v
	}
	switch s.mode {
	case FetchOrBuild, FetchOnly, BuildOnly:
	default:
		errs = append(errs, fmt.Errorf("clustertest: %s: want %q (fetch, or build where fetching fails), %q (fetch only) or %q (build only)",
			s.modeFrom, FetchOrBuild, FetchOnly, BuildOnly))
	}
	for _, u := range []struct {
		to       *string
		option   string
		env      string
		fallback string
	}{
		{&s.kubernetes, o.kubernetesURL, EnvKubernetesURL, DefaultKubernetesURL},
		{&s.etcd, o.etcdURL, EnvEtcdURL, DefaultEtcdURL},
	} {
		what := "FetchFrom"
		if u.option != "" {
			*u.to = u.option
		}
		if v := getenv(u.env); v != "" {
			*u.to, what = v, u.env
		}
		if parsed, err := url.Parse(*u.to); err != nil || parsed.Scheme != "https" || parsed.Host == "" {
			errs = append(errs, fmt.Errorf("clustertest: %s: %q is not an https URL", what, *u.to))
		}
		*u.to = strings.TrimSuffix(*u.to, "/")
	}
	for _, p := range slices.Sorted(maps.Keys(o.pins)) {
		if !pinnable(p) {
			errs = append(errs, fmt.Errorf("clustertest: PinSHA256(%q): not a file fetched: one of %s/bin/linux/ARCH/{kube-apiserver,kube-controller-manager} or %s/etcd-%s-linux-ARCH.tar.gz",
				p, kubernetesVersion, etcdVersion, etcdVersion))
		}
		if !isSHA256(o.pins[p]) {
			errs = append(errs, fmt.Errorf("clustertest: PinSHA256(%q, %q): a SHA-256 is 64 hex digits", p, o.pins[p]))
		}
	}
	return s, errors.Join(errs...)
}

// pinnable reports whether p is the path of a file fetched, on some
// architecture.
func pinnable(p string) bool {
	if arch, name, ok := strings.Cut(strings.TrimPrefix(p, kubernetesVersion+"/bin/linux/"), "/"); ok && p != arch+"/"+name {
		return arch != "" && (name == "kube-apiserver" || name == "kube-controller-manager")
	}
	prefix, suffix := etcdVersion+"/etcd-"+etcdVersion+"-linux-", ".tar.gz"
	arch := strings.TrimSuffix(strings.TrimPrefix(p, prefix), suffix)
	return len(p) == len(prefix)+len(arch)+len(suffix) && arch != "" && !strings.Contains(arch, "/") && strings.HasPrefix(p, prefix)
}

// isSHA256 reports whether s is a SHA-256 in hex.
func isSHA256(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 2*sha256.Size
}

// provide puts the control plane's binaries into bin, unless they are
// there already: fetched or built as s says, under the lock beside bin,
// saying on w in one line which it did and why. It returns bin.
func provide(ctx context.Context, bin string, w io.Writer, s supply) (string, error) {
	want, err := sourceStamp()
	if err != nil {
		return "", err
	}
	if upToDate(bin, want) {
		return bin, nil
	}

	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", fmt.Errorf("clustertest: %w", err)
	}
	unlock, err := lock(ctx, bin+".lock", w, progressEvery)
	if err != nil {
		return "", err
	}
	defer unlock()
	if upToDate(bin, want) { // made by another process while this one waited
		_, _ = fmt.Fprintln(w, "clustertest: the other process fetched or built the control plane")
		return bin, nil
	}
	stampPath := filepath.Join(bin, "stamp")
	if err := os.Remove(stampPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("clustertest: %w", err)
	}

	why := s.unfetchable()
	if why == "" {
		begin := time.Now()
		err := s.fetch(ctx, bin)
		if err == nil {
			pinned := ""
			if len(s.pins) > 0 {
				pinned = " and the sums pinned"
			}
			_, _ = fmt.Fprintf(w, "clustertest: fetched the control plane's released binaries (kube-apiserver and kube-controller-manager %s from %s,"+
				" etcd %s from %s, for %s/%s) into %s in %s, each matching the SHA-256 its publisher lists%s\n",
				kubernetesVersion, s.kubernetes, etcdVersion, s.etcd, s.goos, s.goarch, bin, time.Since(begin).Round(time.Millisecond), pinned)
			stamp := want + "\n# fetched from " + s.kubernetes + " and " + s.etcd + "\n"
			if err := os.WriteFile(stampPath, []byte(stamp), 0o644); err != nil {
				return "", fmt.Errorf("clustertest: %w", err)
			}
			return bin, nil
		}
		if mismatch := (*sumMismatch)(nil); errors.As(err, &mismatch) {
			return "", fmt.Errorf("%w; nothing is built in its place: a download that isn't what its publisher released may have been tampered with"+
				" (%s=%s builds from source instead)", err, EnvFetch, BuildOnly)
		}
		if s.mode == FetchOnly {
			return "", fmt.Errorf("%w (%s builds from source where the binaries can't be fetched)", err, s.modeFrom)
		}
		why = "fetching the released binaries failed: " + err.Error()
	} else if s.mode == FetchOnly {
		return "", fmt.Errorf("clustertest: %s, and %s says not to build them", why, s.modeFrom)
	}

	_, _ = fmt.Fprintf(w, "clustertest: building the control plane (%s) from Kubernetes %s's source into %s, since %s;"+
		" a cold build takes 13 to 18 minutes on two cores\n", strings.Join(programs, ", "), kubernetesVersion, bin, why)
	begin := time.Now()
	if err := s.build(ctx, bin, w); err != nil {
		return "", err
	}
	if err := os.WriteFile(stampPath, []byte(want+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("clustertest: %w", err)
	}
	_, _ = fmt.Fprintf(w, "clustertest: built the control plane in %s\n", since(begin))
	return bin, nil
}

// unfetchable says why the binaries aren't to be fetched, or "" when they
// are.
func (s supply) unfetchable() string {
	switch {
	case s.mode == BuildOnly:
		return s.modeFrom + " says to build them"
	case s.goos != "linux":
		return fmt.Sprintf("Kubernetes publishes its server binaries for Linux only, and this is %s/%s", s.goos, s.goarch)
	}
	return ""
}

// fetch downloads the released binaries into bin, each checked against
// the SHA-256 its publisher lists and the one pinned for it.
func (s supply) fetch(ctx context.Context, bin string) error {
	client := s.client()
	for _, name := range []string{"kube-apiserver", "kube-controller-manager"} {
		rel := kubernetesVersion + "/bin/linux/" + s.goarch + "/" + name
		listed, err := s.get(ctx, client, s.kubernetes+"/"+rel+".sha256")
		if err != nil {
			return err
		}
		want := strings.ToLower(firstField(listed))
		if !isSHA256(want) {
			return fmt.Errorf("clustertest: %s/%s.sha256 holds no SHA-256: %q", s.kubernetes, rel, truncate(listed, 100))
		}
		tmp := filepath.Join(bin, "."+name+".download")
		if err := s.download(ctx, client, s.kubernetes, rel, want, tmp); err != nil {
			return err
		}
		if err := install(tmp, filepath.Join(bin, name)); err != nil {
			return err
		}
	}

	archive := "etcd-" + etcdVersion + "-linux-" + s.goarch + ".tar.gz"
	rel := etcdVersion + "/" + archive
	sums, err := s.get(ctx, client, s.etcd+"/"+etcdVersion+"/SHA256SUMS")
	if err != nil {
		return err
	}
	want, ok := listedSum(sums, archive)
	if !ok {
		return fmt.Errorf("clustertest: %s/%s/SHA256SUMS lists no SHA-256 for %s", s.etcd, etcdVersion, archive)
	}
	tmp := filepath.Join(bin, "."+archive+".download")
	defer func() { _ = os.Remove(tmp) }()
	if err := s.download(ctx, client, s.etcd, rel, want, tmp); err != nil {
		return err
	}
	etcd := filepath.Join(bin, ".etcd.download")
	if err := extract(tmp, "etcd", etcd); err != nil {
		return fmt.Errorf("clustertest: %s: %w", archive, err)
	}
	return install(etcd, filepath.Join(bin, "etcd"))
}

// client is the HTTP client downloads go through: every step of a
// request bounded by s.bound, and only https, redirects included.
func (s supply) client() *http.Client {
	dialer := &net.Dialer{Timeout: s.bound}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			TLSClientConfig:       &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:   s.bound,
			ResponseHeaderTimeout: s.bound,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to %s, which isn't https", req.URL)
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
}

// get is the body, at most 1 MiB of it, of the file at u.
func (s supply) get(ctx context.Context, client *http.Client, u string) (string, error) {
	var b strings.Builder
	if err := s.copyFrom(ctx, client, u, &limitedWriter{w: &b, n: 1 << 20}); err != nil {
		return "", err
	}
	return b.String(), nil
}

// download writes the file rel under base into the file tmp, and checks
// its SHA-256 against listed, its publisher's, and the one pinned for
// rel. It removes tmp on failure.
func (s supply) download(ctx context.Context, client *http.Client, base, rel, listed, tmp string) error {
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	h := sha256.New()
	err = s.copyFrom(ctx, client, base+"/"+rel, io.MultiWriter(f, h))
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("clustertest: %w", cerr)
	}
	if err == nil {
		got := hex.EncodeToString(h.Sum(nil))
		switch pin, pinned := s.pins[rel]; {
		case got != listed:
			err = &sumMismatch{file: path.Base(rel), url: base + "/" + rel, got: got, want: listed, whose: "its publisher"}
		case pinned && got != strings.ToLower(pin):
			err = &sumMismatch{file: path.Base(rel), url: base + "/" + rel, got: got, want: pin, whose: "PinSHA256"}
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// copyFrom copies the body of a GET of u to w, failing on a status other
// than 200 and on a body that sends no byte for s.bound.
func (s supply) copyFrom(ctx context.Context, client *http.Client, u string, w io.Writer) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("clustertest: fetching %s: %w", u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("clustertest: fetching %s: %w", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("clustertest: fetching %s: %s", u, resp.Status)
	}
	stalled := fmt.Errorf("no byte came for %s", s.bound)
	timer := time.AfterFunc(s.bound, func() { cancel(stalled) })
	defer timer.Stop()
	if _, err := io.Copy(w, &stallReader{r: resp.Body, timer: timer, bound: s.bound}); err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		return fmt.Errorf("clustertest: fetching %s: %w", u, err)
	}
	return nil
}

// A stallReader restarts timer, of bound, on every read.
type stallReader struct {
	r     io.Reader
	timer *time.Timer
	bound time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.timer.Reset(s.bound)
	return n, err
}

// A limitedWriter fails once more than n bytes are written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, errors.New("more than 1 MiB, which no list of sums is")
	}
	l.n -= len(p)
	return l.w.Write(p)
}

// A sumMismatch is a download refused for a SHA-256 other than the one
// listed for it.
type sumMismatch struct {
	file, url string
	got, want string
	whose     string // "its publisher" or "PinSHA256"
}

func (e *sumMismatch) Error() string {
	return fmt.Sprintf("clustertest: %s (%s) is refused: its SHA-256 is %s, and %s lists %s", e.file, e.url, e.got, e.whose, e.want)
}

// firstField is the first whitespace-separated field of s: a .sha256
// file's sum, with or without the file's name after it.
func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// listedSum is the SHA-256 that sums, in sha256sum's format (a sum, a
// space, a space or a '*', and a file's name, a line each), lists for
// name.
func listedSum(sums, name string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(sums))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.TrimPrefix(f[1], "*") == name && isSHA256(strings.ToLower(f[0])) {
			return strings.ToLower(f[0]), true
		}
	}
	return "", false
}

// extract writes the regular file name, in the one folder at the top of
// the tar.gz archive at src (etcd-VERSION-linux-ARCH/ in etcd's, which its
// release notes unpack with --strip-components=1), into the file dst,
// executable.
func extract(src, name, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("it holds no FOLDER/%s", name)
		}
		if err != nil {
			return err
		}
		dir, base := path.Split(path.Clean(strings.TrimPrefix(hdr.Name, "./")))
		if base != name || dir == "" || strings.Contains(strings.TrimSuffix(dir, "/"), "/") || hdr.Typeflag != tar.TypeReg {
			continue
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(dst)
		}
		return err
	}
}

// install makes tmp executable and renames it to dst.
func install(tmp, dst string) error {
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	return nil
}

// truncate is s, cut to n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
