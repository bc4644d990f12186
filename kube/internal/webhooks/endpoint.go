// Package webhooks is what kube's webhooks share, the conversion webhook
// (kube/internal/review) and the admission webhooks (kube/admission):
//
//   - where the API server reaches one (Endpoint): an https URL, or a
//     Service in the cluster, and the CA bundle it trusts it by, checked
//     alike for a CRD's conversion webhook and for an admission
//     configuration, every mistake at once, each naming the value;
//   - the gate a review's handler opens with (Accept): POSTed, as
//     application/json;
//   - what a review names, clipped (Clip) before it reaches a span, a
//     record or a message: a webhook's port answers anyone who reaches it.
//
// It imports only the standard library.
package webhooks

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"strings"
)

// Endpoint is where the API server reaches a webhook: one of URL and
// Service, and the CA bundle it trusts.
type Endpoint struct {
	URL      string
	Service  *Service
	CABundle []byte
}

// Service is a Service in front of a webhook, as kube.ServiceReference.
type Service struct {
	Namespace string
	Name      string
	Path      string
	Port      int32
}

// Errs returns every mistake in e, each message after prefix; missing says
// what the webhook is for, when e names neither a URL nor a Service.
func (e Endpoint) Errs(prefix, missing string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(prefix+format, args...))
	}
	switch {
	case e.URL == "" && e.Service == nil:
		bad("missing URL or Service: %s", missing)
	case e.URL != "" && e.Service != nil:
		bad("both URL %q and Service %s/%s: give one", e.URL, e.Service.Namespace, e.Service.Name)
	case e.URL != "":
		u, err := url.Parse(e.URL)
		switch {
		case err != nil:
			bad("URL %q: %v", e.URL, err)
		case u.Scheme != "https" || u.Host == "":
			bad("URL %q: should be https://host[:port]/path: the API server calls a webhook over TLS", e.URL)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(e.URL, "?") || strings.Contains(e.URL, "#"):
			bad("URL %q: may not have a user, a query or a fragment", e.URL)
		}
	default:
		s := e.Service
		if s.Namespace == "" {
			bad("Service: missing Namespace")
		}
		if s.Name == "" {
			bad("Service: missing Name")
		}
		if s.Path != "" && !strings.HasPrefix(s.Path, "/") {
			bad("Service: Path %q should start with /", s.Path)
		}
		if s.Port < 0 || s.Port > 65535 {
			bad("Service: Port %d is not a port, 1 to 65535 (0 for 443)", s.Port)
		}
	}
	if len(e.CABundle) > 0 {
		rest, n := e.CABundle, 0
		for {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				continue
			}
			if _, err := x509.ParseCertificate(b.Bytes); err != nil {
				bad("CABundle: a certificate that doesn't parse: %v", err)
			}
			n++
		}
		if n == 0 {
			bad("CABundle holds no PEM certificate")
		}
	}
	return errs
}
