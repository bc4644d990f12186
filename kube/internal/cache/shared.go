package cache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// The cache a Client's controllers share. A controller's own resource has
// an informer of the controller's own (or of each shard it holds); the
// resources it owns (Owns) and those its Reconciler reads (Read, Related,
// References) are cached by the Client instead, one informer for each
// resource, namespace and selector, whatever mix of controllers, owners and
// readers needs it: one list and one watch on the API server, one copy of
// each object in the heap.
//
//   - Everything is declared before any controller serves: Read registers
//     its resource with the Client when it is called, Owns when
//     NewController runs. An informer starts when the first controller that
//     declared it serves (step 2 of How one key is reconciled), and stops
//     when the last one's Serve returns; nothing starts inside a
//     reconcile, so Synced means every cache a reconcile reads has synced.
//   - A resource only owned is kept as its metadata, what maps a change to
//     its owner (Owned); one that is read too is kept whole, as the
//     controller's own objects are (Object: its metadata without
//     managedFields, and its JSON, decoded on each read); one read only
//     through ReadTrimmed is kept as a Object too, its JSON trimmed
//     to what the Reader's type decodes (trim). The choice is made when
//     its informer starts.
//   - A controller that joins a running informer is handed every object it
//     holds as the initial list, as a cold start would hand them.

// Shared is the informers of one Client's controllers.
type Shared struct {
	logFor func(Key) logr.Logger // the logger each informer runs with

	mu      sync.Mutex
	entries map[Key]*Entry
}

// NewShared is a cache whose informer of each key runs with logFor's
// logger: its records name the informer's resource, not a controller,
// since every controller of the Client shares it.
func NewShared(logFor func(Key) logr.Logger) *Shared {
	return &Shared{logFor: logFor, entries: map[Key]*Entry{}}
}

// Key is what one shared informer lists and watches.
type Key struct {
	GVR       schema.GroupVersionResource
	Namespace string // "" for every namespace
	Labels    string // a label selector, or "" for every object
	Fields    string // a field selector, or ""
}

// String names the key in errors and records, such as
// "apps/v1, Resource=deployments in namespace shop with labels app=web".
func (k Key) String() string {
	var b strings.Builder
	b.WriteString(k.GVR.String())
	if k.Namespace != "" {
		b.WriteString(" in namespace " + k.Namespace)
	}
	if k.Labels != "" {
		b.WriteString(" with labels " + k.Labels)
	}
	if k.Fields != "" {
		b.WriteString(" with fields " + k.Fields)
	}
	return b.String()
}

// entry returns key's entry, kept whole from now on when whole.
func (s *Shared) Entry(key Key, whole bool) *Entry {
	e := s.get(key)
	e.mu.Lock()
	e.whole = e.whole || whole
	e.mu.Unlock()
	return e
}

// trimmedEntry returns key's entry, read through t from now on: kept
// trimmed by t, unless it is read whole too. An entry read through another
// trim, of another type, is refused: a cache keeps its objects one way,
// and the union of two types' fields would be a third the code declares
// nowhere.
func (s *Shared) TrimmedEntry(key Key, t *Trim) (*Entry, error) {
	e := s.get(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.trim != nil && e.trim.typ != t.typ {
		return nil, fmt.Errorf("its cache, of %s, is trimmed to what %s decodes by another Reader: read one resource, namespace and Selector through one Go type (or the same Reader), or whole with Read", key, e.trim.typ)
	}
	if e.trim == nil {
		e.trim = t
	}
	return e, nil
}

// get returns key's entry, made if there is none.
func (s *Shared) get(key Key) *Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		e = &Entry{key: key, log: s.logFor(key)}
		s.entries[key] = e
	}
	return e
}

// form is how a cache keeps its objects.
type form int

const (
	keptAsMetadata form = iota // ownedObjects: only owned
	keptTrimmed                // cachedObjects trimmed by the entry's trim: read only through ReadTrimmed
	keptWhole                  // cachedObjects: read through Read
)

// form is how e keeps its objects, given who reads them. e.mu is held.
func (e *Entry) form() form {
	switch {
	case e.whole:
		return keptWhole
	case e.trim != nil:
		return keptTrimmed
	}
	return keptAsMetadata
}

// describe says how e keeps its objects when they are kept as f, in an
// error: "as its metadata only". e.mu is held.
func (e *Entry) describe(f form) string {
	switch f {
	case keptWhole:
		return "whole"
	case keptTrimmed:
		return "trimmed to what " + e.trim.typ.String() + " decodes"
	}
	return "as its metadata only"
}

// Entry is one shared informer: while a controller runs it, its
// informer, and who uses it.
type Entry struct {
	key Key
	log logr.Logger // its informer's, which names its resource

	mu    sync.Mutex
	whole bool  // read whole (Read), so kept as cachedObjects
	trim  *Trim // read trimmed (ReadTrimmed), so kept as cachedObjects trimmed by it unless whole
	// The running informer, nil while no controller runs it; stop stops
	// it, and stopped is closed once it has.
	inf     toolscache.SharedIndexInformer
	keptAs  form // as the running informer keeps its objects
	users   int
	stop    context.CancelFunc
	stopped chan struct{}
	// onError are the users' checks of the informer's list and watch
	// errors, each told of every one.
	onError map[*User]func(error)
	// indexers are the indexes declared of its objects (IndexBy), which
	// each informer it runs keeps from its start.
	indexers toolscache.Indexers
	// onDelete is told the key of each object its informer's watch or
	// relist finds deleted, from the informer's start.
	onDelete []func(key string)
}

// OnDelete has f told the key of each object deleted from e's cache by
// every informer it runs from now on: what remembers something of an
// object forgets it. Declare it before the informer starts, as an index.
func (e *Entry) OnDelete(f func(key string)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onDelete = append(e.onDelete, f)
}

// addIndex declares an index of e's objects by f, and returns its name.
func (e *Entry) AddIndex(f toolscache.IndexFunc) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.indexers == nil {
		e.indexers = toolscache.Indexers{}
	}
	name := "humus.kube.index." + strconv.Itoa(len(e.indexers))
	e.indexers[name] = f
	return name
}

// User is one controller's use of a shared informer, from join until
// leave.
type User struct {
	e   *Entry
	inf toolscache.SharedIndexInformer
	reg toolscache.ResourceEventHandlerRegistration // nil without a handler
}

// join runs e's informer for one more user: started with cl's clients and
// e's logger if no controller runs it, and h, when not nil, added to it
// with the user's logger. A running informer hands h every object it
// holds, as its initial list. onError is told of every list and watch
// error, until leave.
func (e *Entry) Join(cl Clients, logger logr.Logger, h toolscache.ResourceEventHandler, onError func(error)) (*User, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.inf != nil && e.form() != e.keptAs {
		return nil, fmt.Errorf("kube: %s is cached %s, by a controller that was serving before it was read %s: declare every Read before the first controller serves", e.key, e.describe(e.keptAs), e.describe(e.form()))
	}
	start := e.inf == nil
	if start {
		inf, err := e.informer(cl)
		if err != nil {
			return nil, err
		}
		e.inf, e.keptAs, e.onError = inf, e.form(), map[*User]func(error){}
	}
	u := &User{e: e, inf: e.inf}
	if h != nil {
		reg, err := e.inf.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{Logger: &logger})
		if err != nil {
			return nil, fmt.Errorf("kube: adding an event handler to %s: %w", e.key, err)
		}
		u.reg = reg
	}
	if onError != nil {
		e.onError[u] = onError
	}
	e.users++
	if start {
		run, stop := context.WithCancel(klog.NewContext(context.Background(), e.log))
		stopped := make(chan struct{})
		e.stop, e.stopped = stop, stopped
		go func() {
			defer close(stopped)
			e.inf.RunWithContext(run)
		}()
	}
	return u, nil
}

// synced reports whether the user's cache has synced: the informer's,
// and the initial list handed to its handler.
func (u *User) Synced() bool {
	if u.reg != nil {
		return u.reg.HasSynced()
	}
	return u.inf.HasSynced()
}

// leave ends the use: its handler removed, once it has stopped handling
// events, and the informer stopped, once it has stopped, when no user is
// left.
func (u *User) Leave() {
	e := u.e
	e.mu.Lock()
	delete(e.onError, u)
	e.users--
	last := e.users == 0
	var stopped chan struct{}
	if last {
		e.stop()
		stopped = e.stopped
		e.inf, e.stop, e.stopped = nil, nil, nil
	}
	e.mu.Unlock()
	if u.reg != nil {
		_ = toolscache.ShutDownEventHandler(u.inf, u.reg)
	}
	if last {
		<-stopped
	}
}

// store is the informer's store while a controller runs it, or nil.
func (e *Entry) Store() toolscache.Indexer {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.inf == nil || !e.inf.HasSynced() {
		return nil
	}
	return e.inf.GetIndexer()
}

// watchError tells each user of a list or watch error, and logs it as
// client-go's own handler does, once.
func (e *Entry) watchError(ctx context.Context, r *toolscache.Reflector, err error) {
	e.mu.Lock()
	checks := make([]func(error), 0, len(e.onError))
	for _, f := range e.onError {
		checks = append(checks, f)
	}
	e.mu.Unlock()
	for _, f := range checks {
		f(err)
	}
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
}

// newInformer is e's informer, through cl: of whole objects, through the
// objects' REST client as the controller's own resource's, trimmed by
// e.trim when kept so, or of their metadata, through the metadata client,
// trimmed by OwnedMetadata. It lists and watches with e's selectors, has
// no resync (an owner's would repeat the owner's own), and keeps a
// namespace index, for List. e.mu is held.
func (e *Entry) informer(cl Clients) (toolscache.SharedIndexInformer, error) {
	k := e.key
	selected := k.Selected
	var lw toolscache.ListWatch
	var client any
	var example runtime.Object
	kept := e.form()
	if kept != keptAsMetadata {
		res := cl.Objects(k.GVR, k.Namespace)
		lw = toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return res.List(ctx, selected(o))
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return res.Watch(ctx, selected(o))
			},
		}
		client, example = cl.Dynamic, &Object{}
	} else {
		md := cl.Metadata.Resource(k.GVR).Namespace(k.Namespace)
		lw = toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return Listing(md.List)(ctx, selected(o))
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return md.Watch(ctx, selected(o))
			},
		}
		client, example = cl.Metadata, &metav1.PartialObjectMetadata{}
	}
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	maps.Copy(indexers, e.indexers)
	inf := NewInformer(lw, client, k.GVR, example, 0, indexers)
	if err := inf.SetWatchErrorHandlerWithContext(e.watchError); err != nil {
		return nil, fmt.Errorf("kube: setting a watch error handler: %w", err)
	}
	var transform toolscache.TransformFunc
	switch kept {
	case keptAsMetadata:
		transform = OwnedMetadata
	case keptTrimmed:
		transform = e.trim.Transform
	}
	if transform != nil {
		if err := inf.SetTransform(transform); err != nil {
			return nil, fmt.Errorf("kube: setting a transform: %w", err)
		}
	}
	if fs := slices.Clone(e.onDelete); len(fs) > 0 {
		deleted := toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if k, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				for _, f := range fs {
					f(k)
				}
			}
		}}
		if _, err := inf.AddEventHandler(deleted); err != nil {
			return nil, fmt.Errorf("kube: adding a deletion handler to %s: %w", k, err)
		}
	}
	return inf, nil
}

// selected is o with k's selectors too.
func (k Key) Selected(o metav1.ListOptions) metav1.ListOptions {
	o.LabelSelector, o.FieldSelector = AndSelector(o.LabelSelector, k.Labels), AndSelector(o.FieldSelector, k.Fields)
	return o
}

// selecting is list and watch, listing and watching with k's selectors
// too.
func Selecting[L runtime.Object](k Key, list func(context.Context, metav1.ListOptions) (L, error), watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) (func(context.Context, metav1.ListOptions) (runtime.Object, error), func(context.Context, metav1.ListOptions) (watch.Interface, error)) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := list(ctx, k.Selected(o))
			if err != nil {
				return nil, err
			}
			return l, nil
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return watchFn(ctx, k.Selected(o))
		}
}

// andSelector is both selectors, a and b, either of which may be empty.
func AndSelector(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// Key is what e lists and watches.
func (e *Entry) Key() Key { return e.key }
