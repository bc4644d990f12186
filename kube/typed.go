package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// ResourceOf is a resource whose objects are T: a Resource[Spec, Status],
// whose objects are Object[Spec, Status], or a Kind[T]. NewTypedClient
// takes either.
type ResourceOf[T any] interface {
	typed(*T) typedResource
}

// typedResource is what a TypedClient knows of its resource, whatever its
// Go type.
type typedResource struct {
	gvr   schema.GroupVersionResource
	kind  string
	scope Scope
	err   error // what is wrong with the Resource or the Kind, or nil
}

func (r Resource[Spec, Status]) typed(*Object[Spec, Status]) typedResource {
	_, err := r.CRD()
	return typedResource{gvr: r.GVR(), kind: r.Kind, scope: r.Scope, err: err}
}

func (k Kind[T]) typed(*T) typedResource {
	return typedResource{gvr: k.GVR, kind: k.Kind, scope: k.Scope, err: checkKind(k, "")}
}

// TypedClient reads and writes one resource's objects on the API server,
// each decoded into a T of the caller's own: a custom resource's
// Object[Spec, Status], with no generated clientset, or a Kind's T. Where a
// Reader reads a controller's cache, a TypedClient asks the API server
// each time: it is for a test, a command, or a controller's writes of a
// resource it doesn't reconcile.
//
// Its errors are the API server's own, which apierrors.IsNotFound,
// IsAlreadyExists, IsConflict and IsInvalid recognise. A TypedClient is
// safe for concurrent use.
type TypedClient[T any] struct {
	res   dynamic.NamespaceableResourceInterface
	gvr   schema.GroupVersionResource
	kind  string
	scope Scope
	err   error // what NewTypedClient found wrong, or nil
}

// NewTypedClient returns a TypedClient of r's objects, through c:
//
//	memcacheds := kube.NewTypedClient(client, app.Memcached)
//	m, err := memcacheds.Get(ctx, "default", "cache")
//
// r is a Resource, whose objects are Object[Spec, Status], or a Kind[T],
// whose objects are T. What is wrong with r (CRD's errors for a Resource),
// or a nil c, is each call's error.
func NewTypedClient[T any](c *Client, r ResourceOf[T]) *TypedClient[T] {
	var d dynamic.Interface
	var err error
	if c == nil {
		err = errors.New("the Client is nil")
	} else if d, err = dynamic.NewForConfig(c.Config()); err != nil {
		err = fmt.Errorf("the dynamic client: %w", err)
	}
	return newTypedClient(d, r, err)
}

// NewTypedClientOn returns a TypedClient of r's objects through d, a
// dynamic client: client-go's fake (dynamic/fake) in a unit test, or one
// built from a rest.Config of its own.
func NewTypedClientOn[T any](d dynamic.Interface, r ResourceOf[T]) *TypedClient[T] {
	var err error
	if d == nil {
		err = errors.New("the dynamic.Interface is nil")
	}
	return newTypedClient(d, r, err)
}

func newTypedClient[T any](d dynamic.Interface, r ResourceOf[T], err error) *TypedClient[T] {
	if r == nil {
		return &TypedClient[T]{err: errors.New("kube: NewTypedClient: the resource is nil: give a Resource or a Kind")}
	}
	res := r.typed(nil)
	c := &TypedClient[T]{gvr: res.gvr, kind: res.kind, scope: res.scope}
	if err := errors.Join(res.err, err); err != nil {
		c.err = fmt.Errorf("kube: NewTypedClient(%s): %w", res.gvr, err)
		return c
	}
	c.res = d.Resource(res.gvr)
	return c
}

// in is the resource's objects in namespace, "" for every namespace, or
// an error naming what the resource's scope refuses: a namespace, for a
// cluster-scoped resource, or, for one object (name isn't ""), none, for
// a namespaced resource, whose request would go to a path that names no
// object and come back NotFound.
func (c *TypedClient[T]) in(namespace, name string) (dynamic.ResourceInterface, error) {
	if c.err != nil {
		return nil, c.err
	}
	switch {
	case namespace != "" && c.scope == Cluster:
		return nil, fmt.Errorf("kube: %s %s/%s: the resource is cluster-scoped: its objects are in no namespace", c.kind, namespace, name)
	case namespace == "" && name != "" && c.scope == Namespaced:
		return nil, fmt.Errorf("kube: %s %s: the resource is namespaced: name the object's namespace", c.kind, name)
	case namespace == "":
		return c.res, nil
	}
	return c.res.Namespace(namespace), nil
}

// Get returns the object named name in namespace ("" for a
// cluster-scoped resource): an error that apierrors.IsNotFound recognises
// when there is none.
func (c *TypedClient[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	var obj T
	res, err := c.in(namespace, name)
	if err != nil {
		return obj, err
	}
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return obj, err
	}
	return c.decode(u)
}

// List returns the objects in namespace ("" for every namespace) whose
// labels and fields the selectors match (nil for every object), in the
// API server's order. The fields the API server selects by are the
// resource's: every resource's metadata.name and metadata.namespace, and
// a custom resource's selectableFields.
func (c *TypedClient[T]) List(ctx context.Context, namespace string, labels labels.Selector, fields fields.Selector) ([]T, error) {
	res, err := c.in(namespace, "")
	if err != nil {
		return nil, err
	}
	l, err := res.List(ctx, listOptions(labels, fields))
	if err != nil {
		return nil, err
	}
	objs := make([]T, 0, len(l.Items))
	for i := range l.Items {
		obj, err := c.decode(&l.Items[i])
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// Create creates obj in its namespace, and returns it as the API server
// stored it. Its apiVersion and kind, when empty, are the resource's. An
// object of that name already there is an error that
// apierrors.IsAlreadyExists recognises.
func (c *TypedClient[T]) Create(ctx context.Context, obj T) (T, error) {
	var created T
	u, err := c.encode(obj)
	if err != nil {
		return created, err
	}
	res, err := c.in(u.GetNamespace(), nameOrGenerated(u))
	if err != nil {
		return created, err
	}
	if u, err = res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return created, err
	}
	return c.decode(u)
}

// Update replaces the object obj names with obj, but its status, and
// returns it as the API server stored it: a whole write, as kubectl
// replace makes, so a list item obj no longer has is gone, whoever set
// it. obj's resourceVersion, when set (as a Get or Create returned it),
// makes the write conditional: an object changed since is an error that
// apierrors.IsConflict recognises; "" writes over whatever is there. The
// fields it sets are the Update's field manager's, named after the
// Client's user agent, beside those others applied.
func (c *TypedClient[T]) Update(ctx context.Context, obj T) (T, error) {
	return c.update(ctx, obj, false)
}

// UpdateStatus replaces the status of the object obj names with obj's, as
// Update does the rest, through the status subresource.
func (c *TypedClient[T]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	return c.update(ctx, obj, true)
}

func (c *TypedClient[T]) update(ctx context.Context, obj T, status bool) (T, error) {
	var updated T
	u, err := c.encode(obj)
	if err != nil {
		return updated, err
	}
	res, err := c.in(u.GetNamespace(), u.GetName())
	if err != nil {
		return updated, err
	}
	if status {
		u, err = res.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	} else {
		u, err = res.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		return updated, err
	}
	return c.decode(u)
}

// Apply applies obj, but its status, with server-side apply as
// opts.FieldManager (required), and returns the object as the API server
// holds it after. What it declares is everything obj's JSON encoding
// writes but the status, and of its metadata only its name, namespace,
// labels, annotations, finalizers and owner references: the manager owns
// those fields, and releases the ones it applied before and applies no
// longer. So build obj from what the manager means to own, not from a
// Get, whose finalizers, labels and annotations others own. opts.Force
// takes fields another manager owns: without it, their conflict is an
// error that apierrors.IsConflict recognises.
func (c *TypedClient[T]) Apply(ctx context.Context, obj T, opts metav1.ApplyOptions) (T, error) {
	return c.apply(ctx, obj, opts, false)
}

// ApplyStatus applies obj's status to the status subresource, with
// server-side apply as opts.FieldManager (required), and returns the
// object as the API server holds it after. It declares the status alone:
// of obj's metadata, only its name and namespace are sent.
func (c *TypedClient[T]) ApplyStatus(ctx context.Context, obj T, opts metav1.ApplyOptions) (T, error) {
	return c.apply(ctx, obj, opts, true)
}

func (c *TypedClient[T]) apply(ctx context.Context, obj T, opts metav1.ApplyOptions, status bool) (T, error) {
	var applied T
	u, err := c.encode(obj)
	if err != nil {
		return applied, err
	}
	res, err := c.in(u.GetNamespace(), u.GetName())
	if err != nil {
		return applied, err
	}
	meta := map[string]any{}
	kept := []string{"name", "namespace", "labels", "annotations", "finalizers", "ownerReferences"}
	if status {
		kept = kept[:2]
	}
	for _, k := range kept {
		if v, ok := u.Object["metadata"].(map[string]any)[k]; ok {
			meta[k] = v
		}
	}
	u.Object["metadata"] = meta
	subresource := []string(nil)
	if status {
		u.Object = map[string]any{"apiVersion": u.Object["apiVersion"], "kind": u.Object["kind"], "metadata": meta, "status": u.Object["status"]}
		subresource = []string{"status"}
	} else {
		delete(u.Object, "status")
	}
	body, err := u.MarshalJSON()
	if err != nil {
		return applied, fmt.Errorf("kube: encoding %s %s: %w", c.kind, nameOf(u), err)
	}
	patched, err := res.Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts.ToPatchOptions(), subresource...)
	if err != nil {
		return applied, err
	}
	return c.decode(patched)
}

// Delete deletes the object named name in namespace ("" for a
// cluster-scoped resource): an error that apierrors.IsNotFound recognises
// when there is none. An object with finalizers is only marked for
// deletion: it is gone once they are removed.
func (c *TypedClient[T]) Delete(ctx context.Context, namespace, name string) error {
	res, err := c.in(namespace, name)
	if err != nil {
		return err
	}
	return res.Delete(ctx, name, metav1.DeleteOptions{})
}

// WatchEvent is one change of an object that a Watch saw: its Type is
// watch.Added, watch.Modified or watch.Deleted, and Object the object
// after it (before it, for a deletion), decoded into the caller's own
// copy.
type WatchEvent[T any] struct {
	Type   watch.EventType
	Object T
}

// Watch watches the objects in namespace ("" for every namespace) whose
// labels and fields the selectors match (nil for every object): an Added
// event for each one there when it starts, and then an event for each
// change, until ctx ends, the loop breaks or the API server ends the
// watch (after its timeout, minutes), when the sequence ends. An error
// (the watch refused, an error event, an object that can't be decoded)
// is yielded once, the API server's own, and ends the sequence.
//
//	for e, err := range memcacheds.Watch(ctx, "default", nil, nil) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(e.Type, e.Object.Name)
//	}
func (c *TypedClient[T]) Watch(ctx context.Context, namespace string, labels labels.Selector, fields fields.Selector) iter.Seq2[WatchEvent[T], error] {
	return func(yield func(WatchEvent[T], error) bool) {
		res, err := c.in(namespace, "")
		if err != nil {
			yield(WatchEvent[T]{}, err)
			return
		}
		w, err := res.Watch(ctx, listOptions(labels, fields))
		if err != nil {
			yield(WatchEvent[T]{}, err)
			return
		}
		defer w.Stop()
		for {
			var e watch.Event
			var ok bool
			select {
			case <-ctx.Done():
				return
			case e, ok = <-w.ResultChan():
			}
			if !ok || ctx.Err() != nil {
				// Ended: a watch whose context ends hands its stream's
				// error (context canceled) on as an event, which is no
				// error of the caller's watch.
				return
			}
			switch e.Type {
			case watch.Bookmark:
				continue
			case watch.Error:
				yield(WatchEvent[T]{}, apierrors.FromObject(e.Object))
				return
			}
			u, isU := e.Object.(*unstructured.Unstructured)
			if !isU {
				yield(WatchEvent[T]{}, fmt.Errorf("kube: watching %s: a %s event holds a %T", c.gvr, e.Type, e.Object))
				return
			}
			obj, err := c.decode(u)
			if !yield(WatchEvent[T]{Type: e.Type, Object: obj}, err) || err != nil {
				return
			}
		}
	}
}

// listOptions selects by labels and fields, nil for everything.
func listOptions(labels labels.Selector, fields fields.Selector) metav1.ListOptions {
	var opts metav1.ListOptions
	if labels != nil {
		opts.LabelSelector = labels.String()
	}
	if fields != nil {
		opts.FieldSelector = fields.String()
	}
	return opts
}

// decode decodes u into the caller's own T.
func (c *TypedClient[T]) decode(u *unstructured.Unstructured) (T, error) {
	var obj T
	data, err := u.MarshalJSON()
	if err == nil {
		err = json.Unmarshal(data, &obj)
	}
	if err != nil {
		return obj, fmt.Errorf("kube: decoding %s %s: %w", c.kind, nameOf(u), err)
	}
	return obj, nil
}

// encode encodes obj as an unstructured object, with the resource's
// apiVersion and kind when it has none.
func (c *TypedClient[T]) encode(obj T) (*unstructured.Unstructured, error) {
	var m map[string]any
	data, err := json.Marshal(obj)
	if err == nil {
		err = utiljson.Unmarshal(data, &m) // integers as int64, as unstructured objects hold them
	}
	if err != nil {
		return nil, fmt.Errorf("kube: encoding a %s: %w", c.kind, err)
	}
	if m == nil {
		return nil, fmt.Errorf("kube: encoding a %s: it encodes as null", c.kind)
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetAPIVersion() == "" {
		u.SetAPIVersion(c.gvr.GroupVersion().String())
	}
	if u.GetKind() == "" {
		u.SetKind(c.kind)
	}
	return u, nil
}

// nameOrGenerated is u's name, or its generateName.
func nameOrGenerated(u *unstructured.Unstructured) string {
	if n := u.GetName(); n != "" {
		return n
	}
	return u.GetGenerateName()
}

// nameOf is u's namespace/name, or its name.
func nameOf(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}
