package podenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/kube"
)

// The service account's files, which the kubelet mounts in every pod. The
// Host's FS has no leading slash: this is
// /var/run/secrets/kubernetes.io/serviceaccount/.
const serviceAccount = "var/run/secrets/kubernetes.io/serviceaccount/"

// ReadConnection reads the Connection from h:
//
//   - KUBECONFIG, when it is set, is the absolute path of a kubeconfig with
//     its credentials embedded, for running outside a cluster; one that
//     names files, or runs an exec plugin or an auth provider, is refused;
//   - otherwise the Connection is the pod's: KUBERNETES_SERVICE_HOST and
//     KUBERNETES_SERVICE_PORT, which the kubelet sets, and the service
//     account's CA and token, whose file Token reads again on each call.
//
// It returns every problem in one error, each named by its variable or
// file.
//
// The files are read with readFile, not config.File: config names a value
// it can't parse in its error, and a kubeconfig holds a token.
func ReadConnection(ctx context.Context, h humus.Host) (kube.Connection, error) {
	if path, ok := h.LookupEnv("KUBECONFIG"); ok {
		data, err := readFile(h.FS, path)
		if err != nil {
			return kube.Connection{}, err
		}
		conn, err := fromKubeconfig(data)
		if err != nil {
			return kube.Connection{}, fmt.Errorf("podenv: kubeconfig %s: %w", path, err)
		}
		return conn, nil
	}

	var errs []error
	ca, err := readFile(h.FS, serviceAccount+"ca.crt")
	errs = append(errs, err)
	roots, err := certPool(ca)
	if ca != nil && err != nil {
		errs = append(errs, fmt.Errorf("podenv: /%sca.crt: %w", serviceAccount, err))
	}
	// The token is read now only so that a pod without one fails at start,
	// naming the file. Token reads it again on each call, since the kubelet
	// rotates it.
	_, err = readFile(h.FS, serviceAccount+"token")
	errs = append(errs, err)

	env := func(name string) config.Source { return config.Env(h, name) }
	conn, err := config.Struct(func(r *config.Resolver) kube.Connection {
		return kube.Connection{
			// JoinHostPort brackets an IPv6 host.
			Server: net.JoinHostPort(r.Get(env("KUBERNETES_SERVICE_HOST")), r.Get(env("KUBERNETES_SERVICE_PORT"))),
			TLS:    &tls.Config{RootCAs: roots},
			Token: func(context.Context) (string, error) {
				b, err := readFile(h.FS, serviceAccount+"token")
				return string(bytes.TrimSpace(b)), err
			},
		}
	}).Read(ctx)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return kube.Connection{}, err
	}
	return conn, nil
}

// readFile reads the file at path, absolute, from fsys, the Host's FS,
// whose paths have no leading slash.
func readFile(fsys fs.FS, path string) ([]byte, error) {
	path = strings.TrimPrefix(path, "/")
	b, err := fs.ReadFile(fsys, path)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err
	}
	if err != nil {
		return nil, fmt.Errorf("podenv: reading /%s: %w", path, err)
	}
	return b, nil
}

// fromKubeconfig is the Connection of a kubeconfig's current context. Its
// credentials must be embedded, as `kubectl config view --flatten --minify`
// writes them and as the control plane of `make cluster` does: a bearer
// token, or a client certificate and key. A kubeconfig that names files, or
// that runs an exec plugin or an auth provider, is refused rather than
// followed: those grow with every cloud, and a Token function of the App's
// own, with the cloud's SDK, covers them.
func fromKubeconfig(data []byte) (kube.Connection, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return kube.Connection{}, err
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return kube.Connection{}, fmt.Errorf("its current context %q isn't one of its contexts", cfg.CurrentContext)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return kube.Connection{}, fmt.Errorf("context %q names cluster %q, which it doesn't have", cfg.CurrentContext, kctx.Cluster)
	}
	user, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok {
		return kube.Connection{}, fmt.Errorf("context %q names user %q, which it doesn't have", cfg.CurrentContext, kctx.AuthInfo)
	}

	var errs []error
	refuse := func(set bool, what string) {
		if set {
			errs = append(errs, fmt.Errorf("%s isn't supported: embed the credentials instead", what))
		}
	}
	refuse(cluster.CertificateAuthority != "", "a CA file ("+cluster.CertificateAuthority+")")
	refuse(cluster.InsecureSkipTLSVerify, "insecure-skip-tls-verify")
	refuse(cluster.ProxyURL != "", "a proxy")
	refuse(user.TokenFile != "", "a token file")
	refuse(user.ClientCertificate != "" || user.ClientKey != "", "a client certificate file")
	refuse(user.Exec != nil, "an exec plugin")
	refuse(user.AuthProvider != nil, "an auth provider")
	refuse(user.Username != "" || user.Password != "", "basic auth")

	u, err := url.Parse(cluster.Server)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("server %q: %w", cluster.Server, err))
	case u.Scheme != "https" || u.Host == "":
		errs = append(errs, fmt.Errorf("server %q isn't an https:// URL", cluster.Server))
	}
	tlsConfig := &tls.Config{ServerName: cluster.TLSServerName}
	if len(cluster.CertificateAuthorityData) > 0 {
		tlsConfig.RootCAs, err = certPool(cluster.CertificateAuthorityData)
		if err != nil {
			errs = append(errs, fmt.Errorf("its CA: %w", err))
		}
	}
	if len(user.ClientCertificateData) > 0 {
		cert, err := tls.X509KeyPair(user.ClientCertificateData, user.ClientKeyData)
		if err != nil {
			errs = append(errs, fmt.Errorf("its client certificate: %w", err))
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	if err := errors.Join(errs...); err != nil {
		return kube.Connection{}, err
	}

	conn := kube.Connection{Server: u.Host, TLS: tlsConfig}
	if u.Port() == "" {
		conn.Server = net.JoinHostPort(u.Hostname(), "443")
	}
	if token := user.Token; token != "" {
		conn.Token = func(context.Context) (string, error) { return token, nil }
	}
	return conn, nil
}

// certPool is a pool of the PEM certificates in pem.
func certPool(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}
