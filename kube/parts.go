package kube

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Part is a part of a controller beyond its Reconciler: Owns or Finalize.
type Part interface{ part() }

// Owns reconciles an object again when a resource of gvr that it controls
// changes: one whose controller owner reference names the object's group
// and kind. The controller watches gvr's resources through a metadata
// informer, limited to Settings.Namespace, since only their owner
// references are looked at. A namespaced resource can name a cluster-scoped
// owner, such as its Namespace.
//
// The end user sets the owner reference when they apply the child; the
// controller needs list and watch on gvr.
func Owns(gvr schema.GroupVersionResource) Part { return owns{gvr: gvr} }

type owns struct{ gvr schema.GroupVersionResource }

func (owns) part() {}

// Finalize keeps every object until f has cleaned up after it. The
// controller adds the finalizer name to each object it reconciles, with
// server-side apply under its field manager, before the first reconcile.
// Once an object is being deleted, it calls f in place of the Reconciler
// until f returns nil, and then removes name, so the deletion completes. An
// error from f retries, as a reconcile's does; a panic in f is recovered and
// not retried, and the object keeps its finalizer until its next reconcile.
//
// f must be idempotent: it runs again after an error, after a new leader
// took over mid-way, and if the finalizer's removal fails. A deletion waits
// while no replica of the controller runs: the object stays, being
// deleted, until a leader has run f and removed the finalizer, so an
// uninstalled controller leaves its objects undeletable until the
// finalizer is removed by hand.
//
// T is the Controller's object type: Object[Spec, Status] for a Resource,
// and T for a Kind[T]. NewController and NewKindController check it, and
// that name is a qualified name with a domain prefix of the author's own,
// such as "cache.example.com/finalizer": a name without a domain, which
// the API server accepts with a warning, and a kubernetes.io or k8s.io
// domain (or a subdomain of one), which Kubernetes keeps for itself, are
// refused.
func Finalize[T any](name string, f func(ctx context.Context, obj T) error) Part {
	return finalize{name: name, f: f, typ: reflect.TypeFor[T]()}
}

type finalize struct {
	name string
	f    any // func(context.Context, T) error
	typ  reflect.Type
}

func (finalize) part() {}

// checkParts returns one error naming every mistake in parts, and the
// finalizer function for objects of type T, if one is given.
func checkParts[T any](parts []Part) (fin func(context.Context, T) error, name string, owned []schema.GroupVersionResource, err error) {
	var errs []error
	seen := map[schema.GroupVersionResource]bool{}
	for i, p := range parts {
		switch p := p.(type) {
		case owns:
			if e := checkGVR(p.gvr); e != nil {
				errs = append(errs, fmt.Errorf("kube: Owns(%s): %w", p.gvr, e))
				continue
			}
			if seen[p.gvr] {
				errs = append(errs, fmt.Errorf("kube: Owns(%s) is given twice", p.gvr))
				continue
			}
			seen[p.gvr] = true
			owned = append(owned, p.gvr)
		case finalize:
			if name != "" {
				errs = append(errs, fmt.Errorf("kube: Finalize(%q) is a second finalizer; a controller has one, %q", p.name, name))
				continue
			}
			if err := checkFinalizerName(p.name); err != nil {
				errs = append(errs, fmt.Errorf("kube: Finalize(%q): %w", p.name, err))
			}
			f, ok := p.f.(func(context.Context, T) error)
			if !ok {
				errs = append(errs, fmt.Errorf("kube: Finalize(%q): f takes a %s, and the controller's objects are %s", p.name, p.typ, reflect.TypeFor[T]()))
			}
			fin, name = f, p.name
		case nil:
			errs = append(errs, fmt.Errorf("kube: part %d is nil", i))
		default:
			errs = append(errs, fmt.Errorf("kube: part %d is a %T, not one of Owns or Finalize", i, p))
		}
	}
	return fin, name, owned, errors.Join(errs...)
}

// checkFinalizerName returns what is wrong with a finalizer's name. The API
// server takes any qualified name (IsQualifiedName, in
// k8s.io/apimachinery's ValidateFinalizerName), and for a custom
// resource's object only warns of one without a domain prefix
// (validateKubeFinalizerName in apiextensions-apiserver's
// registry/customresource: "prefer a domain-qualified finalizer name to
// avoid accidental conflicts with other finalizer writers"); for its own
// kinds, such as a Namespace, it refuses one ("name is neither a standard
// finalizer name nor is it fully qualified"). kube refuses it for every
// kind, and a prefix in kubernetes.io or k8s.io, which Kubernetes keeps
// for its own finalizers, such as kubernetes.io/pv-protection.
func checkFinalizerName(name string) error {
	if problems := validation.IsQualifiedName(name); len(problems) > 0 {
		return fmt.Errorf("the name must be a qualified name, such as example.com/finalizer: %s", strings.Join(problems, "; "))
	}
	prefix, _, ok := strings.Cut(name, "/")
	if !ok {
		return errors.New("the name must be domain-qualified, such as example.com/finalizer, as the API server prefers a finalizer name to be, to avoid accidental conflicts with other finalizer writers")
	}
	for _, reserved := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == reserved || strings.HasSuffix(prefix, "."+reserved) {
			return fmt.Errorf("the name's prefix %s is in %s, which Kubernetes keeps for its own finalizers: use a domain of your own", prefix, reserved)
		}
	}
	return nil
}

// checkGVR returns what is missing from gvr. Its group is "" for the core
// group, which is valid.
func checkGVR(gvr schema.GroupVersionResource) error {
	var missing []string
	if gvr.Version == "" {
		missing = append(missing, "Version")
	}
	if gvr.Resource == "" {
		missing = append(missing, "Resource")
	}
	if len(missing) > 0 {
		return errors.New("the GVR has no " + strings.Join(missing, " and no "))
	}
	return nil
}
