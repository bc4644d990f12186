package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
)

// Kubeconfig reads the Connection of a kubeconfig's context from h, for
// running outside a cluster, as kubectl would reach it:
//
//   - path is the kubeconfig's path, absolute or relative to h.Dir, or a
//     list of paths separated as in KUBECONFIG (":" on Unix, ";" on
//     Windows), which are merged as kubectl merges them: the first file
//     to name a cluster, a user or a context wins it, as the first to set
//     current-context does, and a file of the list that doesn't exist is
//     skipped, unless none does;
//   - contextName is the context to read, or "" for the current-context;
//   - the cluster's server must be an https:// URL, whose host and port
//     (443 unless it names one) are Server; its CA, from
//     certificate-authority or certificate-authority-data, is
//     TLS.RootCAs, or, with neither, the system's roots; tls-server-name
//     is TLS.ServerName;
//   - the user's client-certificate and client-key, by file or as data,
//     are TLS.Certificates; its token is Token, or its tokenFile is, read
//     again on each call, so a token rewritten in the file is picked up.
//     A context with no user sends no credentials;
//   - a file a kubeconfig names by a relative path is taken against that
//     kubeconfig's own folder, as kubectl does;
//   - every file is read through h.FS, now, so that a missing one is an
//     error here rather than on the first request.
//
// It refuses, by name and with what to do instead, what it would have to
// run or could only follow in part: an exec plugin or an auth provider
// (fill Token with the cloud's own SDK instead), insecure-skip-tls-verify,
// proxy-url, a username and password, impersonation, and a field given
// both as a file and as data. The context's namespace is not read:
// kube.Settings.Namespace is the App's to set.
//
// It returns every problem in one error, each naming the kubeconfig's
// file, the context and the field. No token, key or password is ever in
// it: a server URL it names shows xxxxx for its password, its query's
// values and its fragment, where a token is sometimes placed. When ctx
// is done, it reads nothing and returns an error wrapping ctx's.
func Kubeconfig(ctx context.Context, h humus.Host, path, contextName string) (kube.Connection, error) {
	if err := ctx.Err(); err != nil {
		return kube.Connection{}, fmt.Errorf("kubeenv: reading kubeconfig %s: %w", path, err)
	}
	files, err := kubeconfigFiles(h, path)
	if err != nil {
		return kube.Connection{}, err
	}
	cfg, err := loadKubeconfigs(h.FS, files)
	if err != nil {
		return kube.Connection{}, err
	}
	return fromContext(h, cfg, strings.Join(files, string(filepath.ListSeparator)), contextName)
}

// kubeconfigFiles is the absolute path of each kubeconfig list names,
// relative ones taken against h.Dir, without repeats, as kubectl drops
// them. It refuses to take a relative path against a Dir that isn't an
// absolute path, which would silently make it a path from "/".
func kubeconfigFiles(h humus.Host, list string) ([]string, error) {
	var files []string
	var errs []error
	for _, p := range filepath.SplitList(list) {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) && !path.IsAbs(filepath.ToSlash(h.Dir)) {
			errs = append(errs, fmt.Errorf("kubeenv: kubeconfig %s is a relative path, and Host.Dir %q isn't an absolute path to take it against", p, h.Dir))
			continue
		}
		if f := "/" + h.HostPath(p); !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("kubeenv: kubeconfig path %q names no file", list)
	}
	return files, nil
}

// loadKubeconfigs reads and decodes each of files, and merges them as
// kubectl does: the first to name a cluster, a user or a context wins
// that name, and the first to set current-context wins it. Each entry's
// LocationOfOrigin is the file it came from, whose folder a relative path
// in it is taken against. A file that doesn't exist is skipped when there
// are several, unless none of them exists.
func loadKubeconfigs(fsys fs.FS, files []string) (*clientcmdapi.Config, error) {
	merged := clientcmdapi.NewConfig()
	var errs, missing []error
	for _, f := range files {
		data, err := readFile(fsys, f)
		if errors.Is(err, fs.ErrNotExist) && len(files) > 1 {
			missing = append(missing, fmt.Errorf("kubeenv: kubeconfig %w", err))
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("kubeenv: kubeconfig %w", err))
			continue
		}
		cfg, err := decode(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("kubeenv: kubeconfig %s: %w", f, err))
			continue
		}
		mergeFirstWins(merged.Clusters, cfg.Clusters, func(c *clientcmdapi.Cluster) { c.LocationOfOrigin = f })
		mergeFirstWins(merged.AuthInfos, cfg.AuthInfos, func(u *clientcmdapi.AuthInfo) { u.LocationOfOrigin = f })
		mergeFirstWins(merged.Contexts, cfg.Contexts, func(c *clientcmdapi.Context) { c.LocationOfOrigin = f })
		if merged.CurrentContext == "" {
			merged.CurrentContext = cfg.CurrentContext
		}
	}
	if len(missing) == len(files) {
		errs = append(missing, errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return merged, nil
}

// decode decodes a kubeconfig's data, of any version client-go knows, as
// clientcmd.Load does, without importing clientcmd, whose package
// variables read $HOME: empty data is an empty kubeconfig.
func decode(data []byte) (*clientcmdapi.Config, error) {
	cfg := clientcmdapi.NewConfig()
	if len(data) == 0 {
		return cfg, nil
	}
	decoded, _, err := clientcmdlatest.Codec.Decode(data, &schema.GroupVersionKind{Version: clientcmdlatest.Version, Kind: "Config"}, cfg)
	if err != nil {
		return nil, err
	}
	out, ok := decoded.(*clientcmdapi.Config)
	if !ok {
		return nil, fmt.Errorf("a %T, not a kubeconfig", decoded)
	}
	return out, nil
}

// mergeFirstWins adds to dst each entry of src whose name dst doesn't have
// yet, after origin marks where it came from.
func mergeFirstWins[T any](dst, src map[string]*T, origin func(*T)) {
	for _, name := range slices.Sorted(maps.Keys(src)) {
		if _, ok := dst[name]; !ok && src[name] != nil {
			origin(src[name])
			dst[name] = src[name]
		}
	}
}

// fromContext is the Connection of cfg's context named contextName, or of
// its current-context when that is "". where names cfg's files in errors.
func fromContext(h humus.Host, cfg *clientcmdapi.Config, where, contextName string) (kube.Connection, error) {
	name := contextName
	if name == "" {
		name = cfg.CurrentContext
	}
	if name == "" {
		return kube.Connection{}, fmt.Errorf("kubeenv: kubeconfig %s has no current-context: name one of its contexts (%s)", where, names(cfg.Contexts))
	}
	kctx, ok := cfg.Contexts[name]
	if !ok || kctx == nil {
		return kube.Connection{}, fmt.Errorf("kubeenv: kubeconfig %s has no context %q (it has %s)", where, name, names(cfg.Contexts))
	}

	// Each problem is named by the file that holds what it's in, which, in
	// a merged list, needn't be the context's.
	at := func(file string) string { return fmt.Sprintf("kubeenv: kubeconfig %s: context %q", file, name) }
	var errs []error
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if kctx.Cluster == "" {
		errs = append(errs, fmt.Errorf("%s: cluster: not set: name one of its clusters (%s)", at(kctx.LocationOfOrigin), names(cfg.Clusters)))
	} else if !ok || cluster == nil {
		errs = append(errs, fmt.Errorf("%s: cluster %q isn't in the kubeconfig (it has %s)", at(kctx.LocationOfOrigin), kctx.Cluster, names(cfg.Clusters)))
	}
	var user *clientcmdapi.AuthInfo
	if kctx.AuthInfo != "" {
		if user, ok = cfg.AuthInfos[kctx.AuthInfo]; !ok || user == nil {
			errs = append(errs, fmt.Errorf("%s: user %q isn't in the kubeconfig (it has %s)", at(kctx.LocationOfOrigin), kctx.AuthInfo, names(cfg.AuthInfos)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return kube.Connection{}, err
	}

	var conn kube.Connection
	errs = readCluster(h, cluster, &conn)
	for i, err := range errs {
		errs[i] = fmt.Errorf("%s: cluster %q: %w", at(cluster.LocationOfOrigin), kctx.Cluster, err)
	}
	if user != nil {
		for _, err := range readUser(h, user, &conn) {
			errs = append(errs, fmt.Errorf("%s: user %q: %w", at(user.LocationOfOrigin), kctx.AuthInfo, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return kube.Connection{}, err
	}
	return conn, nil
}

// names lists m's names, sorted, or says there are none.
func names[T any](m map[string]*T) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
