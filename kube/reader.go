package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// Selector is which objects of a resource a cache keeps: the zero
// Selector keeps every object of every namespace. An object outside it is
// neither cached nor read, nor does its change reconcile anything.
type Selector struct {
	// Namespace keeps one namespace's objects: "" keeps every
	// namespace's; otherwise a DNS-1123 label. It must be "" for a
	// cluster-scoped resource.
	Namespace string

	// Labels keeps the objects whose labels match it: a label selector,
	// such as "app=web,tier!=cache"; "" keeps them all.
	Labels string

	// Fields keeps the objects whose fields match it: a field selector of
	// the fields the API server can select the resource by (every
	// resource by metadata.name and metadata.namespace, some by more, such
	// as a Secret's type), such as "metadata.name=site"; "" keeps them all.
	// A field the API server can't select by makes the controller's Serve
	// end with its answer.
	Fields string
}

// check returns what is wrong with s for a resource of scope, every
// mistake at once.
func (s Selector) check(scope Scope) error {
	var errs []error
	if s.Namespace != "" {
		if err := checkWatchNamespace(s.Namespace); err != nil {
			errs = append(errs, fmt.Errorf("Selector.Namespace %q: %w", s.Namespace, err))
		} else if scope == Cluster {
			errs = append(errs, fmt.Errorf("Selector.Namespace %q: the resource is cluster-scoped: its objects are in no namespace", s.Namespace))
		}
	}
	if err := checkLabelSelector(s.Labels); err != nil {
		errs = append(errs, fmt.Errorf("Selector.Labels %q: %w", s.Labels, err))
	}
	if err := checkFieldSelector(s.Fields); err != nil {
		errs = append(errs, fmt.Errorf("Selector.Fields %q: %w", s.Fields, err))
	}
	return errors.Join(errs...)
}

// key is the cache key of gvr's objects that s keeps.
func (s Selector) key(gvr schema.GroupVersionResource) cache.Key {
	return cache.Key{GVR: gvr, Namespace: s.Namespace, Labels: s.Labels, Fields: s.Fields}
}

// Reader reads one resource's objects from the cache that every
// Controller built on its Client shares, typed and read-only: each read
// decodes its own copy, which the caller may change. A Reader is declared
// before the controllers serve (Read), and given to each Controller whose
// Reconciler reads it (Reads, Related or References): that controller's
// Serve keeps its cache warm, and its Synced waits for it.
type Reader[T any] struct{ *reader }

// reader is what a Reader knows, whatever its type: its cache, and the
// Client and Go type it was declared with.
type reader struct {
	*control.Source
	client *Client
	typ    reflect.Type
}

// Read declares a read of k's objects that sel keeps, from the cache of
// c's controllers, and returns the Reader that reads them. Give it to the
// Controller whose Reconciler reads it (Reads, or Related or References),
// whose Serve keeps the cache warm: no informer starts inside a
// reconcile. The same resource and Selector, read by several Readers,
// owned by several controllers, or both, is listed and watched once.
// NewController reports what is wrong with k or sel, with its other
// mistakes; so does each read.
func Read[T any](c *Client, k Kind[T], sel Selector) *Reader[T] {
	return &Reader[T]{newReader[T](c, k.GVR, k.Kind, k.Scope, checkKind(k, ""), sel)}
}

// ReadTrimmed declares a read of k's objects that sel keeps, as Read does,
// of which the cache keeps only what T decodes: T is a Go type of the
// fields the Reconciler reads, such as a Deployment's replicas, pod
// template's images and ready replicas, and each object is decoded into it
// as it comes, encoded again, and that JSON kept, with the object's
// metadata (without managedFields, as every cached object). A read returns
// what Read's would of those fields; nothing else is kept, and a field T
// lacks can't be read, so what is kept and what is read can't disagree.
// For a resource whose objects are large and read in part: of the 750
// bytes of JSON beside its metadata that the API server serves for the
// Memcached example's Deployment (its pod template with the defaults the
// API server fills in, before a Deployment controller adds its status's
// conditions), the example's trim keeps 320.
//
// T is a struct with an embedded metav1.ObjectMeta, as Read's, of the
// rest holding only what is read, in the JSON names of the resource (a
// field of an API type, such as metav1.LabelSelector, keeps all of that
// type's). The same resource and Selector owned too (Owns) is listed,
// watched and kept once, for both. Read by several ReadTrimmed of the same
// T, it is kept once, trimmed; read by Read too, whole, from which T
// decodes what it would from the trimmed JSON. Through another T, it is
// refused: NewController reports it, as it does Read's mistakes.
func ReadTrimmed[T any](c *Client, k Kind[T], sel Selector) *Reader[T] {
	r := newReaderOf[T](c, k.GVR, k.Kind, k.Scope, checkKind(k, ""), sel, "ReadTrimmed")
	if r.Err != nil {
		return &Reader[T]{r}
	}
	e, err := c.cache.TrimmedEntry(sel.key(k.GVR), cache.TrimTo[T]())
	if err != nil {
		r.Err = fmt.Errorf("kube: ReadTrimmed(%s): %w", k.GVR, err)
		return &Reader[T]{r}
	}
	r.Entry = e
	e.OnDelete(r.Unreadable.Forget)
	return &Reader[T]{r}
}

// ReadResource declares a read of r's objects that sel keeps, as Read does
// for a Kind: each is decoded into an Object, as a Reconciler is handed
// one.
func ReadResource[Spec, Status any](c *Client, r Resource[Spec, Status], sel Selector) *Reader[Object[Spec, Status]] {
	var err error
	if _, crdErr := r.CRD(); crdErr != nil {
		err = crdErr
	}
	return &Reader[Object[Spec, Status]]{newReader[Object[Spec, Status]](c, r.GVR(), r.Kind, r.Scope, err, sel)}
}

func newReader[T any](c *Client, gvr schema.GroupVersionResource, kind string, scope Scope, err error, sel Selector) *reader {
	r := newReaderOf[T](c, gvr, kind, scope, err, sel, "Read")
	if r.Err == nil {
		r.Entry = c.cache.Entry(sel.key(gvr), true)
		r.Entry.OnDelete(r.Unreadable.Forget)
	}
	return r
}

// newReaderOf is a reader of gvr without its cache entry, or with the
// error, every mistake at once, that fn, the function declaring it,
// reports.
func newReaderOf[T any](c *Client, gvr schema.GroupVersionResource, kind string, scope Scope, err error, sel Selector, fn string) *reader {
	r := &reader{Source: &control.Source{GR: gvr.GroupResource(), Kind: kind, Scope: control.Scope(scope)}, client: c, typ: reflect.TypeFor[T]()}
	if c != nil {
		r.Log, r.Shared, r.Ledger = c.log, c.cache, c.ledger
		c.ledger.Read(r.GR)
	}
	errs := []error{err}
	if selErr := sel.check(scope); selErr != nil {
		errs = append(errs, selErr)
	} else if sel.Labels != "" {
		r.Labels, _ = labels.Parse(sel.Labels) // checked
	}
	if c == nil {
		errs = append(errs, errors.New("the Client is nil"))
	}
	if err := errors.Join(errs...); err != nil {
		r.Err = fmt.Errorf("kube: %s(%s): %w", fn, gvr, err)
	}
	return r
}

// Reads keeps r's cache warm while the controller serves: its Serve starts
// r's informer, unless another controller's runs it already, and its
// Synced waits for it. Give it to each controller whose Reconciler reads
// r; Related and References read r too.
func Reads[T any](r *Reader[T]) Part { return reads{r: r.reader} }

type reads struct{ r *reader }

func (reads) part() {}

// Get returns the object named name in namespace ("" for a cluster-scoped
// resource), decoded into its own copy: an error that apierrors.IsNotFound
// recognises when the cache has none.
//
// It reads the App's own writes, with whatever context: after the App
// wrote the object through a clientset built from Client.Config (a
// create, an update, a patch or an apply, in a reconcile or not), Get
// returns it at that write's version or later, and after the App deleted
// it, NotFound (or a new object of the same name), waiting for the cache
// to catch up, up to 5 seconds, and then fails saying so
// (ErrCacheBehind), so a reconcile is retried rather than computed from
// what its own write replaced. A write of an object the Reader's Selector
// namespace or labels don't keep never waits; a write whose event never
// came is forgotten 30 seconds after it was made.
func (r *Reader[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	var obj T
	store, err := r.Store()
	if err != nil {
		return obj, err
	}
	k := name
	if namespace != "" {
		k = namespace + "/" + name
	}
	if err := r.AwaitOwnWrite(ctx, store, namespace, name, k); err != nil {
		return obj, err
	}
	cached, ok, err := store.GetByKey(k)
	if err != nil {
		return obj, fmt.Errorf("kube: reading %s %s: %w", r.Kind, k, err)
	}
	if !ok {
		return obj, apierrors.NewNotFound(r.GR, name)
	}
	err = r.Decode(cached, &obj)
	return obj, err
}

//nolint:errorlint // the sentinel itself

// ErrCacheBehind is what a Reader's Get or List, or an Index's List,
// returns, wrapped, when the cache hasn't brought the App's own write of
// what it reads within 5 seconds: errors.Is tells it from the others.
// Returned from Reconcile, it retries the object with backoff, as any
// error does, so the reconcile isn't computed from what its own write
// replaced.
var ErrCacheBehind = control.ErrCacheBehind

// List returns the objects in namespace ("" for every namespace the
// cache keeps) whose labels sel matches (nil for every object), each
// decoded into its own copy, in no particular order. It reads the App's
// own writes of the resource, as Get does: it waits, up to 5 seconds, for
// the cache to bring each, and then fails saying which it hasn't. An object that can't
// be decoded into T (stored before a field changed its type, say) is left
// out, recorded once (a WARN record naming it and the field) until it
// decodes or is deleted: one such object doesn't fail every List. Get of
// it returns the error.
func (r *Reader[T]) List(ctx context.Context, namespace string, sel labels.Selector) ([]T, error) {
	store, err := r.Store()
	if err != nil {
		return nil, err
	}
	if err := r.AwaitOwnWrites(ctx, store, namespace); err != nil {
		return nil, err
	}
	var cached []any
	if namespace == "" {
		cached = store.List()
	} else if cached, err = store.ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
		return nil, fmt.Errorf("kube: listing %s in %s: %w", r.Kind, namespace, err)
	}
	objs := make([]T, 0, len(cached))
	for _, c := range cached {
		if sel != nil && !sel.Empty() {
			m, ok := c.(metav1.Object)
			if !ok || !sel.Matches(labels.Set(m.GetLabels())) {
				continue
			}
		}
		var obj T
		if err := r.Decode(c, &obj); err != nil {
			u, ok := c.(*cache.Object)
			if !ok {
				return nil, err // not a cache it can read at all
			}
			r.Unreadable.Record(r.Log, control.Key(u), "reading an object", "every List leaves it out until it changes",
				[]any{slog.String(control.AttrResource, r.GR.String()), slog.String("object", control.Describe(u))}, err, nil)
			continue
		}
		if r.Unreadable.Len() > 0 {
			if m, ok := c.(metav1.Object); ok {
				r.Unreadable.Forget(control.Key(m))
			}
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// checkKind returns what is wrong with k, every mistake at once, each
// message after prefix.
func checkKind[T any](k Kind[T], prefix string) error {
	var errs []error
	if err := checkGVR(k.GVR); err != nil {
		errs = append(errs, fmt.Errorf("%sKind.GVR %s: %w", prefix, k.GVR, err))
	}
	if k.Kind == "" {
		errs = append(errs, errors.New(prefix+"Kind.Kind is required"))
	}
	if k.Scope != Namespaced && k.Scope != Cluster {
		errs = append(errs, fmt.Errorf("%sKind.Scope %q is neither %s nor %s", prefix, k.Scope, Namespaced, Cluster))
	}
	if !reflect.PointerTo(reflect.TypeFor[T]()).Implements(reflect.TypeFor[metav1.Object]()) {
		errs = append(errs, fmt.Errorf("%sKind[%s]: *%[2]s isn't a metav1.Object, as a client-go type's pointer is", prefix, reflect.TypeFor[T]()))
	}
	return errors.Join(errs...)
}

// Index is an index of a Reader's objects, by the values a function of
// each returns, kept as they change: "the Pods on this node", "the Secrets
// of this type". It is declared before the controllers serve, with its
// Reader, and read through List.
type Index[T any] struct {
	r    *reader
	name string
}

// IndexBy declares an index of r's objects by what values returns for
// each, such as a Pod's node name. The cache keeps it from its start, so
// declare it, as r, before any controller that reads r serves: an index
// declared later fails each List, saying so. A panic in values, or an
// object that can't be decoded into T, is recorded once for the object,
// which is indexed by nothing until it changes; it never stops the
// informer.
func IndexBy[T any](r *Reader[T], values func(obj T) []string) *Index[T] {
	idx := &Index[T]{r: r.reader}
	if r.Err != nil {
		return idx
	}
	r.Entry.OnDelete(r.Failed.Forget)
	idx.name = r.Entry.AddIndex(func(obj any) (vs []string, _ error) {
		u, ok := obj.(*cache.Object)
		if !ok {
			return nil, nil
		}
		defer func() {
			if p := recover(); p != nil {
				vs = nil
				r.IndexFailed(u, fmt.Errorf("panic: %v", p), debug.Stack())
			}
		}()
		var v T
		if err := control.Decode(u, &v); err != nil {
			r.IndexFailed(u, err, nil)
			return nil, nil
		}
		vs = values(v)
		r.Failed.Forget(control.Key(u))
		return vs, nil
	})
	return idx
}

// List returns the objects the index holds under value, each decoded
// into its own copy, in no particular order. It reads the App's own
// writes, as Reader's List does.
func (i *Index[T]) List(ctx context.Context, value string) ([]T, error) {
	store, err := i.r.Store()
	if err != nil {
		return nil, err
	}
	if err := i.r.AwaitOwnWrites(ctx, store, ""); err != nil {
		return nil, err
	}
	cached, err := store.ByIndex(i.name, value)
	if err != nil {
		return nil, fmt.Errorf("kube: listing %s by an index: %w: declare each IndexBy before the controllers serve", i.r.Entry.Key(), err)
	}
	objs := make([]T, 0, len(cached))
	for _, c := range cached {
		var obj T
		if err := i.r.Decode(c, &obj); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// Related reconciles the controller's objects that keys names when an
// object of r changes: keys is called with the object before and after
// each change (on its creation, the object; on its deletion, its last
// state), and every object either names is reconciled, so a reference
// that moves away reconciles its old referrer too. An object of the
// controller's resource is named by its namespace and name, its
// namespace "" when the resource is cluster-scoped.
//
// A related change queues as a change of the controller's own object
// does: at normal priority, ahead of a cold start's backlog. The
// controller's own writes to r's objects, made through a clientset built
// from Client.Config with the context Reconcile is handed, queue nothing,
// as those to the resources it owns don't. The objects r holds when the
// controller starts queue nothing either: every object of the
// controller's is reconciled at its start anyway. A panic in keys is
// recovered and recorded, and maps the change to nothing.
//
// Related reads r: NewController checks r as Reads does.
func Related[R any](r *Reader[R], keys func(obj R) []types.NamespacedName) Part {
	return related{r: r.reader, mapper: func(u *cache.Object) ([]types.NamespacedName, error) {
		var obj R
		if err := control.Decode(u, &obj); err != nil {
			return nil, err
		}
		return keys(obj), nil
	}}
}

// References reconciles each of the controller's objects when an object
// of r it refers to changes, is created or is deleted: refs, a function
// of the controller's own object, names the objects of r it refers to,
// such as the ConfigMap a Website's spec names. The controller keeps an
// index of its objects by what refs returns, updated as they change, so a
// related change finds its referrers without a scan: every Website
// naming a ConfigMap is reconciled when it changes. A reference changed
// to another object follows the new one from then on. T is the
// Controller's object type, as Finalize's is: NewController checks it.
//
// A panic in refs, or an object that can't be decoded into T, is
// recovered and recorded once for that object, which is then indexed by
// nothing until it changes. Related's other promises hold for References
// too.
func References[R, T any](r *Reader[R], refs func(obj T) []types.NamespacedName) Part {
	return related{r: r.reader, typ: reflect.TypeFor[T](), index: func(u *cache.Object) ([]types.NamespacedName, error) {
		var obj T
		if err := control.Decode(u, &obj); err != nil {
			return nil, err
		}
		return refs(obj), nil
	}}
}

type related struct {
	r *reader
	// mapper maps a related object to the controller's keys (Related), or
	// index maps a controller's object to the related objects it names
	// (References), of type typ.
	mapper func(u *cache.Object) ([]types.NamespacedName, error)
	index  func(u *cache.Object) ([]types.NamespacedName, error)
	typ    reflect.Type
}

func (related) part() {}
