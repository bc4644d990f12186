package kube

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"

	"github.com/z5labs/humus/kube/internal/webhooks"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/version"
)

// Versions is a custom resource of several versions: one CRD, whose every
// version is a Resource of its own Go types, with its own Rules, and whose
// objects the API server converts between the versions through a webhook
// that Handler answers.
//
// One version is the hub, and every other is converted to it and from it
// by two plain Go functions, which VersionOf ties to it. To and from the
// hub is enough: the API server only ever asks for one object at one
// version to be given at another, and any version reaches any other
// through the hub, so n versions need 2(n-1) functions rather than n(n-1).
// The hub is the version that holds most: the newest, as a rule, so that
// what a newer version added is never squeezed through an older one. A
// field one version has and the other can't hold survives a conversion
// all the same, kept in an annotation (see Handler).
//
//	var Memcacheds = kube.Versions[v1beta1.MemcachedSpec, v1beta1.MemcachedStatus]{
//		Hub:     v1beta1.Memcached,
//		Others:  []kube.Version[v1beta1.MemcachedSpec, v1beta1.MemcachedStatus]{
//			kube.VersionOf(v1alpha1.Memcached, v1alpha1.ToHub, v1alpha1.FromHub).
//				Deprecated("cache.example.com/v1alpha1 Memcached is deprecated; use v1beta1"),
//		},
//		Storage: "v1beta1",
//		Webhook: kube.ConversionWebhook{URL: "https://memcached-operator.example.com/convert", CABundle: ca},
//	}
//
// The hub's types are the type parameters, so a function converting to any
// other type doesn't compile.
type Versions[HubSpec, HubStatus any] struct {
	// Hub is the version every other converts to and from. It is served
	// and not deprecated.
	Hub Resource[HubSpec, HubStatus]

	// Others are the resource's other versions, each with its conversions
	// to and from Hub. Each names the same Group, Kind, Plural and Scope as
	// Hub, and a version of its own; ShortNames and Categories are the
	// CRD's, from Hub, so each leaves them out or gives Hub's.
	Others []Version[HubSpec, HubStatus]

	// Storage is the version the API server stores objects at: Hub's or
	// one of Others'. Required. Moving it leaves the objects written
	// before at the old one until they are written again; Migrate
	// rewrites them.
	Storage string

	// Webhook is where the API server sends its ConversionReviews: where
	// Handler is served.
	Webhook ConversionWebhook
}

// Version is a version of a resource whose hub has a spec of type HubSpec
// and a status of type HubStatus: a Resource of its own types, and the two
// functions that convert its objects to and from the hub's. VersionOf
// makes one.
type Version[HubSpec, HubStatus any] struct {
	resource   crdSource
	spec       reflect.Type // the version's Spec and Status, for RoundTrip
	status     reflect.Type
	conv       *converter[HubSpec, HubStatus]
	notServed  bool
	deprecated bool
	warning    *string
}

// crdSource is a Resource without its type parameters: its names, and its
// one-version CRD.
type crdSource struct {
	Group, Version, Kind, Plural string
	Scope                        Scope
	ShortNames, Categories       []string
	crd                          func() (*apiextensionsv1.CustomResourceDefinition, error)
	subject                      string // Resource[Spec, Status], for errors
}

func sourceOf[Spec, Status any](r Resource[Spec, Status]) crdSource {
	return crdSource{
		Group: r.Group, Version: r.Version, Kind: r.Kind, Plural: r.Plural, Scope: r.Scope,
		ShortNames: r.ShortNames, Categories: r.Categories,
		crd:     r.CRD,
		subject: fmt.Sprintf("Resource[%s, %s]", reflect.TypeFor[Spec](), reflect.TypeFor[Status]()),
	}
}

// VersionOf is r, a version of a resource, converted to its hub by toHub
// and from it by fromHub.
//
// Each function is handed its own copy of the object, and returns the
// object at the other version: its ObjectMeta as it was, which holds the
// name, namespace and UID the API server refuses a conversion to change,
// and the labels and annotations it keeps from the converted object; its
// Spec and Status converted. The TypeMeta it sets is overwritten with the
// version's. An error, or a panic, fails the conversion of the request it
// is part of: the API server answers the read or write that asked for it
// with the error.
//
// A function converting between the versions' types field by field is
// what they take; one that needs more than the object, such as a lookup,
// doesn't belong in a conversion, which the API server runs for every read
// at another version than the stored one.
func VersionOf[Spec, Status, HubSpec, HubStatus any](
	r Resource[Spec, Status],
	toHub func(Object[Spec, Status]) (Object[HubSpec, HubStatus], error),
	fromHub func(Object[HubSpec, HubStatus]) (Object[Spec, Status], error),
) Version[HubSpec, HubStatus] {
	return Version[HubSpec, HubStatus]{
		resource: sourceOf(r),
		spec:     reflect.TypeFor[Spec](),
		status:   reflect.TypeFor[Status](),
		conv:     newConverter(r.Version, toHub, fromHub),
	}
}

// Deprecated marks the version deprecated: the API server answers every
// request at it with a warning, which kubectl prints. warning is the
// warning's text, at most 256 printable ASCII characters; "" has the API
// server write its own, "<group>/<version> <Kind> is deprecated".
func (v Version[HubSpec, HubStatus]) Deprecated(warning string) Version[HubSpec, HubStatus] {
	v.deprecated = true
	if warning != "" {
		v.warning = &warning
	}
	return v
}

// NotServed stops the API server from serving the version: a request at
// it is answered 404, while objects stored at it are still read, and
// converted to the others. It is the step before removing a version from
// Others, once no object is stored at it (see Migrate).
func (v Version[HubSpec, HubStatus]) NotServed() Version[HubSpec, HubStatus] {
	v.notServed = true
	return v
}

// ConversionWebhook is where the API server reaches the conversion
// webhook: by URL, or by a Service of the cluster, with the CA that signs
// its serving certificate.
type ConversionWebhook struct {
	// URL is the webhook's https:// URL, without a user, a query or a
	// fragment, such as https://memcached-operator.example.com/convert,
	// for a webhook outside the cluster or on a fixed address. One of URL
	// and Service is required, the other left out.
	URL string

	// Service is the Service in front of the webhook, for one in the
	// cluster.
	Service *ServiceReference

	// CABundle is the PEM certificates of the CA that signs the webhook's
	// serving certificate, which the API server trusts it by. Default
	// none: the API server trusts the system's roots, or a tool such as
	// cert-manager's CA injector fills it in on the cluster's CRD (see
	// docs/evolving-your-api.md).
	CABundle []byte
}

// ServiceReference is a Service the API server reaches a webhook through.
type ServiceReference struct {
	Namespace string // required
	Name      string // required
	Path      string // the URL's path, such as /convert; default /
	Port      int32  // default 443
}

// kubeVersion matches a version name Kubernetes orders as a version:
// v1, v2beta1, v1alpha3. The API server takes any DNS-1035 label, but
// orders another after them all, alphabetically, in discovery, so kubectl
// would prefer v1alpha1 to it.
var kubeVersion = regexp.MustCompile(`^v[1-9][0-9]*(?:(?:alpha|beta)[1-9][0-9]*)?$`)

// CRD returns the resource's CustomResourceDefinition, every version in
// it: each reflected from its own types and Rules as Resource.CRD does,
// highest first in Kubernetes' order (v1, v1beta2, v1beta1, v1alpha1),
// Storage stored, each served unless NotServed, and its deprecation, with
// the webhook conversion strategy, ConversionReview v1, and Webhook's
// client config.
//
// It returns one error naming every mistake it finds, across the
// versions: each version's own, as Resource.CRD reports them; a version
// that names another Group, Kind, Plural or Scope than Hub, or other
// ShortNames or Categories; a version name that isn't a Kubernetes
// version (v1, v1beta1, v2alpha1), or that two versions have; a version
// made without VersionOf or with a nil function; a Storage that names no
// version; and a Webhook without one of URL and Service, with both, with
// a URL that isn't https or has a user, a query or a fragment, with a
// Service missing its namespace or name, or with a CABundle that holds no
// PEM certificate.
func (v Versions[HubSpec, HubStatus]) CRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	out, errs := v.build()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// versionEntry is one version of Versions, the hub's included.
type versionEntry[HubSpec, HubStatus any] struct {
	Version[HubSpec, HubStatus]
	where string // Hub or Others[i], for errors
}

// entries returns the hub and Others, in that order.
func (v Versions[HubSpec, HubStatus]) entries() []versionEntry[HubSpec, HubStatus] {
	es := []versionEntry[HubSpec, HubStatus]{{
		Version: Version[HubSpec, HubStatus]{
			resource: sourceOf(v.Hub),
			spec:     reflect.TypeFor[HubSpec](),
			status:   reflect.TypeFor[HubStatus](),
			conv:     hubConverter[HubSpec, HubStatus](v.Hub.Version),
		},
		where: "Hub",
	}}
	hubLists := listsOf(v.Hub.CRD) // the list-maps conversions merge by, read once
	for i, o := range v.Others {
		o.conv = o.conv.withLists(hubLists, listsOf(o.resource.crd))
		es = append(es, versionEntry[HubSpec, HubStatus]{Version: o, where: fmt.Sprintf("Others[%d]", i)})
	}
	return es
}

func (v Versions[HubSpec, HubStatus]) build() (*apiextensionsv1.CustomResourceDefinition, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kube: Versions: "+format, args...))
	}
	hub := sourceOf(v.Hub)
	var versions []apiextensionsv1.CustomResourceDefinitionVersion
	var base *apiextensionsv1.CustomResourceDefinition
	seen := map[string]string{}
	for _, e := range v.entries() {
		r := e.resource
		if r.crd == nil {
			bad("%s: a Version made without VersionOf: it has no Resource and no conversion", e.where)
			continue
		}
		name := fmt.Sprintf("%s (%s)", e.where, r.Version)
		errs = append(errs, entryErrs(e, hub, seen)...)
		c, err := r.crd()
		if err != nil {
			for _, e := range unjoin(err) {
				errs = append(errs, fmt.Errorf("kube: Versions: %s: %w", name, e))
			}
			continue
		}
		if base == nil && e.where == "Hub" {
			base = c
		}
		cv := c.Spec.Versions[0]
		cv.Served = !e.notServed
		cv.Storage = r.Version == v.Storage
		cv.Deprecated = e.deprecated
		cv.DeprecationWarning = e.warning
		if e.warning != nil {
			if msg := warningErr(*e.warning); msg != "" {
				bad("%s: Deprecated warning %q %s", name, *e.warning, msg)
			}
		}
		versions = append(versions, cv)
	}
	if v.Storage == "" {
		bad("missing Storage: the version the API server stores objects at")
	} else if _, ok := seen[v.Storage]; !ok {
		bad("Storage %q names none of the versions", v.Storage)
	}
	errs = append(errs, v.Webhook.errs()...)
	if len(errs) > 0 || base == nil {
		return nil, errs
	}
	slices.SortStableFunc(versions, func(a, b apiextensionsv1.CustomResourceDefinitionVersion) int {
		return cmp.Compare(0, version.CompareKubeAwareVersionStrings(a.Name, b.Name))
	})
	out := base
	out.Spec.Versions = versions
	out.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             v.Webhook.clientConfig(),
			ConversionReviewVersions: []string{"v1"},
		},
	}
	return out, nil
}

// entryErrs returns the mistakes in e beside the hub's names, and records
// its version in seen, by the version's where.
func entryErrs[HubSpec, HubStatus any](e versionEntry[HubSpec, HubStatus], hub crdSource, seen map[string]string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kube: Versions: "+format, args...))
	}
	r, v, where := e.resource, e.Version, e.where
	name := fmt.Sprintf("%s (%s)", where, r.Version)
	isHub := where == "Hub"
	if v.conv == nil || !v.conv.complete() {
		bad("%s: a nil conversion function: VersionOf takes both toHub and fromHub", name)
	}
	if r.Version != "" && !kubeVersion.MatchString(r.Version) {
		bad("%s: Version %q isn't a Kubernetes version, such as v1, v1beta1 or v2alpha1, which the API server orders by", name, r.Version)
	}
	if prev, ok := seen[r.Version]; ok && r.Version != "" {
		bad("%s: Version %q is %s's too", name, r.Version, prev)
	} else {
		seen[r.Version] = where
	}
	if !isHub {
		differs := func(field string, got, want any) {
			bad("%s: %s %v differs from Hub's %v: every version is of one resource", name, field, got, want)
		}
		if r.Group != hub.Group {
			differs("Group", r.Group, hub.Group)
		}
		if r.Kind != hub.Kind {
			differs("Kind", r.Kind, hub.Kind)
		}
		if r.Plural != hub.Plural {
			differs("Plural", r.Plural, hub.Plural)
		}
		if r.Scope != hub.Scope {
			differs("Scope", r.Scope, hub.Scope)
		}
		if len(r.ShortNames) > 0 && !slices.Equal(r.ShortNames, hub.ShortNames) {
			differs("ShortNames", r.ShortNames, hub.ShortNames)
		}
		if len(r.Categories) > 0 && !slices.Equal(r.Categories, hub.Categories) {
			differs("Categories", r.Categories, hub.Categories)
		}
	}
	return errs
}

// unjoin is the errors err joins, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// warningErr is what is wrong with a deprecation warning, as the API
// server's validation of a CRD says; "" when nothing is.
func warningErr(w string) string {
	if len(w) > 256 {
		return "is longer than 256 characters"
	}
	for _, r := range w {
		if r < ' ' || r > '~' {
			return "holds a character that isn't printable ASCII"
		}
	}
	return ""
}

// errs returns every mistake in w.
func (w ConversionWebhook) errs() []error {
	e := webhooks.Endpoint{URL: w.URL, Service: (*webhooks.Service)(w.Service), CABundle: w.CABundle}
	return e.Errs("kube: Versions.Webhook: ", "the API server converts objects between the versions through the webhook")
}

// clientConfig is w as the CRD's conversion webhook's client config.
func (w ConversionWebhook) clientConfig() *apiextensionsv1.WebhookClientConfig {
	c := &apiextensionsv1.WebhookClientConfig{CABundle: slices.Clone(w.CABundle)}
	if w.URL != "" {
		u := w.URL
		c.URL = &u
		return c
	}
	s := &apiextensionsv1.ServiceReference{Namespace: w.Service.Namespace, Name: w.Service.Name}
	if w.Service.Path != "" {
		p := w.Service.Path
		s.Path = &p
	}
	port := cmp.Or(w.Service.Port, 443)
	s.Port = &port
	c.Service = s
	return c
}
