package clustertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/z5labs/humus/kube/internal/procutil"
)

// programs are the control plane's commands, each a main package of the
// embedded source (source/NAME.go.txt, written as NAME/main.go) and a
// binary of the same name in the build folder.
var programs = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// kubernetesVersion is the release the control plane is built from: the
// embedded go.mod's k8s.io/kubernetes, and what /version reports.
const kubernetesVersion = "v1.37.2"

// ldflags stamps the version kube-apiserver reports at /version. A build
// with other flags misses Go's build cache, so every build of the control
// plane uses exactly these.
const ldflags = "-X k8s.io/component-base/version.gitVersion=" + kubernetesVersion +
	" -X k8s.io/component-base/version.gitMajor=1" +
	" -X k8s.io/component-base/version.gitMinor=37" +
	" -X k8s.io/component-base/version.gitTreeState=clean"

// source is the control plane's module, named so that the go command
// doesn't take it for a nested module or for part of this package; see
// source/README.md. sourceFiles maps each embedded file to the path it is
// written to.
//
//go:embed source/*.txt
var source embed.FS

var sourceFiles = map[string]string{
	"source/go.mod.txt":                     "go.mod",
	"source/go.sum.txt":                     "go.sum",
	"source/etcd.go.txt":                    "etcd/main.go",
	"source/kube-apiserver.go.txt":          "kube-apiserver/main.go",
	"source/kube-controller-manager.go.txt": "kube-controller-manager/main.go",
}

// EnvDir is the environment variable naming the folder the control plane
// is built into and run from, in place of the default under the user's
// cache folder; see BuildDir.
const EnvDir = "HUMUS_CONTROLPLANE"

// BuildDir is the folder that holds the built control plane: the folder
// HUMUS_CONTROLPLANE names, made absolute, when it is set and not empty,
// and otherwise humus/controlplane-v1.37.2 in the user's cache folder
// (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches
// on macOS). Every test binary on the machine, of any module, that finds
// the same folder shares one build.
func BuildDir() (string, error) {
	if dir := os.Getenv(EnvDir); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("clustertest: %s=%q: %w", EnvDir, dir, err)
		}
		return abs, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("clustertest: no folder to build the control plane in: set %s: %w", EnvDir, err)
	}
	return filepath.Join(cache, "humus", "controlplane-"+kubernetesVersion), nil
}

// Build puts the control plane's binaries into BuildDir, unless they are
// already there for the embedded source, and returns that folder. A warm
// start runs no go command and downloads nothing.
//
// By default (see Fetch) it fetches Kubernetes' released kube-apiserver
// and kube-controller-manager of v1.37.2 and etcd's release v3.7.0 for the
// machine's architecture from their publishers (DefaultKubernetesURL and
// DefaultEtcdURL, or the mirrors FetchFrom names), checks each against the
// SHA-256 its publisher lists (and the one PinSHA256 pins), and builds
// them from source only where they can't be fetched: off Linux, or when a
// download fails (no network, no such release, a server that sends
// nothing for 30s). A download whose sum differs is refused, naming the
// file and both sums, and nothing is built in its place. It says on stderr
// (or Progress's writer), in one line, which it did and why. The
// environment's HUMUS_CONTROLPLANE_FETCH, HUMUS_CONTROLPLANE_KUBERNETES_URL
// and HUMUS_CONTROLPLANE_ETCD_URL override those Options.
//
// The build writes the source into the folder's src/ and runs the go
// command there, from any module: the go command on PATH, with GOWORK=off
// and GOFLAGS=-mod=mod -buildvcs=false, and the rest of the environment as
// it is (GOPROXY, GOCACHE, ...). A cold build takes 13 to 18 minutes on
// two cores, its Go build cache empty: it builds each program in turn, and
// says on stderr when each begins and ends, and, at least every 30s, how
// many packages it has compiled. With the Go build cache warm (the folder
// removed, or another one named), it links the programs in a minute or
// two.
//
// Either holds a lock on the file beside the folder named FOLDER.lock, so
// two processes at once fetch or build once; the one that waits says so.
// Build takes no FromAssets or FromKubeconfig, and returns an error saying
// so. Off Unix it returns an error saying the control plane runs on Unix
// only.
func Build(ctx context.Context, opts ...Option) (string, error) {
	o := collect(opts)
	if len(o.sources) > 0 {
		return "", fmt.Errorf("clustertest: Build fetches or builds the control plane's binaries; %v is an option of Run and Start", o.sources)
	}
	return build(ctx, o)
}

// progressEvery is how often a build, or a wait for another's, writes a
// line saying how far it got.
const progressEvery = 30 * time.Second

// build is Build: the binaries, fetched or built as o and the environment
// say, in BuildDir, with progress on o's writer. It reads the environment
// variables that say where and how: HUMUS_CONTROLPLANE (through BuildDir),
// and those of the fetch.
func build(ctx context.Context, o options) (string, error) {
	if !procutil.Supported {
		return "", errUnixOnly
	}
	bin, err := BuildDir()
	if err != nil {
		return "", err
	}
	s, err := o.settings(os.Getenv)
	if err != nil {
		return "", err
	}
	return provide(ctx, bin, o.writer(), s)
}

// compile builds the control plane from the embedded source into bin.
func compile(ctx context.Context, bin string, w io.Writer) error {
	src := filepath.Join(bin, "src")
	if err := writeSource(src); err != nil {
		return err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("clustertest: building the control plane needs the go command on PATH: %w", err)
	}
	g := goBuild{
		goTool: goTool,
		dir:    src,
		env:    append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false"),
		flags:  []string{"-ldflags", ldflags},
		every:  progressEvery,
		w:      w,
	}
	for i, p := range programs {
		if err := g.program(ctx, p, bin, fmt.Sprintf("%d of %d", i+1, len(programs))); err != nil {
			return err
		}
	}
	return nil
}

// writeSource writes the embedded source into the folder src as the
// module it is, replacing whatever src held.
func writeSource(src string) error {
	if err := os.RemoveAll(src); err != nil {
		return fmt.Errorf("clustertest: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(sourceFiles)) {
		data, err := source.ReadFile(name)
		if err != nil {
			return fmt.Errorf("clustertest: the embedded source: %w", err)
		}
		path := filepath.Join(src, filepath.FromSlash(sourceFiles[name]))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("clustertest: %w", err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("clustertest: %w", err)
		}
	}
	return nil
}

// A goBuild builds main packages of one module with the go command,
// saying how far it got.
type goBuild struct {
	goTool string        // the go command
	dir    string        // the module's folder, where the go command runs
	env    []string      // the go command's environment
	flags  []string      // go build's flags besides -v and -o
	every  time.Duration // how often a line says how far it got
	w      io.Writer     // where the lines go
}

// program builds the main package ./name into the folder out, as number
// nth of the build (such as "2 of 3"). It first lists the package's
// dependencies with go list -deps, which downloads the modules that are
// missing, for their count; then go build -v names each package as it
// compiles it (not those it finds in Go's build cache), which it counts.
func (g goBuild) program(ctx context.Context, name, out, nth string) error {
	begin := time.Now()
	_, _ = fmt.Fprintf(g.w, "clustertest: %s (%s): listing its packages, and downloading the modules missing\n", name, nth)
	var list bytes.Buffer
	downloads := 0
	err := g.run(ctx, []string{"list", "-deps", "./" + name}, &list,
		func(line string) {
			if strings.HasPrefix(line, "go: downloading ") {
				downloads++
			}
		},
		func() string { return fmt.Sprintf("%d modules downloaded", downloads) },
		name)
	if err != nil {
		return err
	}
	total := len(strings.Fields(list.String()))

	_, _ = fmt.Fprintf(g.w, "clustertest: %s (%s): compiling; it depends on %d packages\n", name, nth, total)
	compiled := 0
	args := append(append([]string{"build", "-v"}, g.flags...), "-o", out+string(filepath.Separator), "./"+name)
	err = g.run(ctx, args, io.Discard,
		func(line string) {
			if isImportPath(line) {
				compiled++
			}
		},
		func() string {
			return fmt.Sprintf("%d of its %d packages compiled (the rest are in Go's build cache, or still to come)", compiled, total)
		},
		name)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(g.w, "clustertest: %s (%s): built in %s, %d packages compiled\n", name, nth, since(begin), compiled)
	return nil
}

// run runs the go command with args in g.dir, its stdout to stdout,
// calling line under a lock with each line of its stderr, and writing
// "clustertest: what: progress(), elapsed" to g.w every g.every until it
// exits. Its error holds stderr's last lines.
func (g goBuild) run(ctx context.Context, args []string, stdout io.Writer, line func(string), progress func() string, what string) error {
	begin := time.Now()
	cmd := exec.CommandContext(ctx, g.goTool, args...)
	cmd.Dir, cmd.Env = g.dir, g.env
	var mu sync.Mutex
	var tailBuf bytes.Buffer
	cmd.Stdout = stdout
	cmd.Stderr = &lineWriter{fn: func(l string) {
		mu.Lock()
		defer mu.Unlock()
		line(l)
		tailBuf.WriteString(l + "\n")
		if tailBuf.Len() > 64<<10 {
			tailBuf.Next(tailBuf.Len() - 32<<10)
		}
	}}
	cmd.Cancel = func() error {
		procutil.KillGroup(cmd.Process.Pid)
		return nil
	}
	cmd.WaitDelay = 10 * time.Second
	if err := procutil.Spawn(cmd); err != nil {
		return fmt.Errorf("clustertest: building the control plane: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(g.every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				return fmt.Errorf("clustertest: building the control plane in %s: %s %s: %w\n%s",
					g.dir, g.goTool, strings.Join(args, " "), err, lastLines(tailBuf.Bytes(), 40))
			}
			return nil
		case <-tick.C:
			mu.Lock()
			p := progress()
			mu.Unlock()
			_, _ = fmt.Fprintf(g.w, "clustertest: %s: %s, %s\n", what, p, since(begin))
		}
	}
}

// isImportPath reports whether a line of go build -v is a package's
// import path, rather than an error, a "# package" header or a note of
// the go command's.
func isImportPath(line string) bool {
	return line != "" && !strings.ContainsAny(line, " \t:") && !strings.HasPrefix(line, "#")
}

// since is the time since begin, to the second.
func since(begin time.Time) time.Duration {
	return time.Since(begin).Round(time.Second)
}

// A lineWriter calls fn with each whole line written to it, without its
// newline. exec.Cmd writes to it from one goroutine.
type lineWriter struct {
	fn      func(string)
	partial []byte
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.partial = append(lw.partial, p...)
	for {
		i := bytes.IndexByte(lw.partial, '\n')
		if i < 0 {
			break
		}
		lw.fn(string(lw.partial[:i]))
		lw.partial = lw.partial[i+1:]
	}
	return len(p), nil
}

// sourceStamp is a hash of what the binaries are built from: the build
// flags, and the embedded source, each file under the path it is written
// to.
func sourceStamp() (string, error) {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "ldflags %q\n", ldflags)
	for _, name := range slices.Sorted(maps.Keys(sourceFiles)) {
		data, err := source.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("clustertest: the embedded source: %w", err)
		}
		_, _ = fmt.Fprintf(h, "%s %d\n", sourceFiles[name], len(data))
		_, _ = h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// upToDate reports whether bin holds every program and a stamp whose
// first line is want: built or fetched, for the embedded source.
func upToDate(bin, want string) bool {
	got, err := os.ReadFile(filepath.Join(bin, "stamp"))
	first, _, _ := strings.Cut(string(got), "\n")
	if err != nil || strings.TrimSpace(first) != want {
		return false
	}
	for _, p := range programs {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			return false
		}
	}
	return true
}

// lock takes an exclusive flock on path, waiting for it, and returns its
// release. The kernel releases it too when the process dies. When another
// process holds it, lock says so on w, and again every interval while it
// waits.
func lock(ctx context.Context, path string, w io.Writer, every time.Duration) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	begin := time.Now()
	next, told := begin, false
	for {
		locked, err := procutil.TryLock(f)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("clustertest: %w", err)
		}
		if locked {
			return func() { _ = f.Close() }, nil
		}
		if now := time.Now(); !now.Before(next) {
			if !told {
				told = true
				_, _ = fmt.Fprintf(w, "clustertest: another process is fetching or building the control plane (it holds %s); waiting for it\n", path)
			} else {
				_, _ = fmt.Fprintf(w, "clustertest: still waiting for the other process to fetch or build the control plane, %s\n", since(begin))
			}
			next = now.Add(every)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("clustertest: waiting for %s: %w", path, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
