package kubeenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/internal/transport"
)

// readCluster fills conn's Server and TLS from a kubeconfig's cluster, and
// returns every problem with it, each naming its field.
func readCluster(h humus.Host, c *clientcmdapi.Cluster, conn *kube.Connection) []error {
	var errs []error
	server, err := serverAddr(c.Server)
	errs = append(errs, err)
	conn.Server = server
	conn.TLS = &tls.Config{ServerName: c.TLSServerName}

	ca, err := fileOrData(h, c.LocationOfOrigin, "certificate-authority", c.CertificateAuthority, c.CertificateAuthorityData)
	errs = append(errs, err)
	if ca != nil {
		conn.TLS.RootCAs, err = certPool(ca)
		errs = append(errs, named(certificateAuthority(c), err))
	}
	if c.InsecureSkipTLSVerify {
		errs = append(errs, errors.New("insecure-skip-tls-verify: not supported: a kube.Client always verifies the API server's certificate; "+
			"give the CA that signed it in certificate-authority or certificate-authority-data instead"))
	}
	if c.ProxyURL != "" {
		errs = append(errs, errors.New("proxy-url: not supported: a kube.Client dials the API server through its Host, never through a proxy; "+
			"reach the API server directly instead, or give the Host a Dial that goes through the proxy"))
	}
	return compact(errs)
}

// serverAddr is the host:port of server, an https:// URL, 443 unless it
// names a port.
func serverAddr(server string) (string, error) {
	if server == "" {
		return "", errors.New("server: not set")
	}
	u, err := url.Parse(server)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // without the URL, which may hold a password
	}
	if err != nil {
		return "", fmt.Errorf("server: not a URL: %w", err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("server: %s isn't an https:// URL: a kube.Client always speaks TLS", transport.RedactURL(server))
	}
	if (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("server: %s has more than a host and a port, which kube.Connection.Server is: give the API server's own address", transport.RedactURL(server))
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	if err := kube.CheckServer(addr); err != nil {
		return "", fmt.Errorf("server: %w", err)
	}
	return addr, nil
}

// readUser fills conn's client certificate and Token from a kubeconfig's
// user, and returns every problem with it, each naming its field.
func readUser(h humus.Host, u *clientcmdapi.AuthInfo, conn *kube.Connection) []error {
	errs := []error{
		refuse(u.Exec != nil, "exec", func() string {
			return fmt.Sprintf("kubeenv runs no credential plugin (here %q); "+
				"fill kube.Connection.Token with the cloud's own SDK in your code instead, or use a token (kubectl create token)", u.Exec.Command)
		}),
		refuse(u.AuthProvider != nil, "auth-provider", func() string {
			return fmt.Sprintf("kubeenv runs no auth provider (here %q); "+
				"fill kube.Connection.Token with the provider's own SDK in your code instead, or use a token (kubectl create token)", u.AuthProvider.Name)
		}),
		refuse(u.Username != "" || u.Password != "", "username and password", func() string {
			return "basic auth, which kube-apiserver no longer accepts; use a token or a client certificate"
		}),
		refuse(u.Impersonate != "" || u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0, "as", func() string {
			return "impersonation; use a kubeconfig with the credentials of the identity itself"
		}),
	}
	errs = append(errs, readClientCert(h, u, conn)...)
	errs = append(errs, readUserToken(h, u, conn))
	return compact(errs)
}

// readClientCert fills conn.TLS.Certificates from u's client certificate
// and key, when it has one, and returns every problem with them.
func readClientCert(h humus.Host, u *clientcmdapi.AuthInfo, conn *kube.Connection) []error {
	cert, certErr := fileOrData(h, u.LocationOfOrigin, "client-certificate", u.ClientCertificate, u.ClientCertificateData)
	key, keyErr := fileOrData(h, u.LocationOfOrigin, "client-key", u.ClientKey, u.ClientKeyData)
	if certErr != nil || keyErr != nil {
		return compact([]error{certErr, keyErr})
	}
	switch {
	case cert == nil && key == nil:
		return nil
	case key == nil:
		return []error{errors.New("client-key: not set: a client certificate needs its key, in client-key or client-key-data")}
	case cert == nil:
		return []error{errors.New("client-certificate: not set: a client key needs its certificate, in client-certificate or client-certificate-data")}
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return []error{fmt.Errorf("client-certificate and client-key: %w", err)}
	}
	conn.TLS.Certificates = []tls.Certificate{pair}
	return nil
}

// readUserToken sets conn.Token from u's token or tokenFile, when it has one.
// A token file is read now, so a missing one is an error at once, and
// again on each call of Token.
func readUserToken(h humus.Host, u *clientcmdapi.AuthInfo, conn *kube.Connection) error {
	switch {
	case u.Token != "" && u.TokenFile != "":
		return errors.New("token and tokenFile: both set: keep one")
	case u.Token != "":
		token := u.Token
		conn.Token = func(context.Context) (string, error) { return token, nil }
	case u.TokenFile != "":
		p := resolve(h, u.LocationOfOrigin, u.TokenFile)
		if _, err := readTokenFile(h.FS, p); err != nil {
			return fmt.Errorf("tokenFile: %w", err)
		}
		conn.Token = fileToken(h.FS, p)
	}
	return nil
}

// fileOrData is a field given by file, whose path is field, or as data,
// in field-data: the file's content, read through h.FS, or the data, or
// nil when neither is set. Both set is an error, as kubectl makes it.
func fileOrData(h humus.Host, kubeconfig, field, file string, data []byte) ([]byte, error) {
	switch {
	case file != "" && len(data) > 0:
		return nil, fmt.Errorf("%s and %s-data: both set: keep one", field, field)
	case file != "":
		b, err := readFile(h.FS, resolve(h, kubeconfig, file))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return b, nil
	case len(data) > 0:
		return data, nil
	}
	return nil, nil
}

// resolve is the absolute path of p, a path a kubeconfig at kubeconfig
// names: p taken against the kubeconfig's folder when it is relative, as
// kubectl takes it.
func resolve(h humus.Host, kubeconfig, p string) string {
	h.Dir = path.Dir(kubeconfig)
	return "/" + h.HostPath(p)
}

// certificateAuthority names where c's CA came from.
func certificateAuthority(c *clientcmdapi.Cluster) string {
	if c.CertificateAuthority != "" {
		return "certificate-authority " + c.CertificateAuthority
	}
	return "certificate-authority-data"
}

// refuse is an error naming field and saying why, when set.
func refuse(set bool, field string, why func() string) error {
	if !set {
		return nil
	}
	return fmt.Errorf("%s: not supported: %s", field, why())
}

// named is err, prefixed with what, unless it is nil.
func named(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// compact is errs without its nils.
func compact(errs []error) []error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
