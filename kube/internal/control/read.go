package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/z5labs/humus/kube/internal/transport"
)

// reader is what a Reader knows, whatever its type.
type Source struct {
	Log        *slog.Logger // the Client's
	Shared     *cache.Shared
	Failed     FailedOnce // the keys its index functions failed for
	Unreadable FailedOnce // the keys List failed to decode, left out of it
	Entry      *cache.Entry
	GR         schema.GroupResource
	Kind       string
	Scope      Scope
	Labels     labels.Selector // its Selector's labels, parsed; nil for every object
	Err        error           // what Read found wrong, or nil
}

// readYourWrites bounds Get's wait for the cache to bring the
// controller's own last write of an object.
const readYourWrites = 5 * time.Second

// ErrCacheBehind is kube.ErrCacheBehind.
var ErrCacheBehind = errors.New("kube: the cache hasn't brought a reconcile's own write")

// cacheBehindError is a read that ErrCacheBehind ended, its message
// naming the object and the write.
type cacheBehindError struct{ msg string }

func (e *cacheBehindError) Error() string { return e.msg }

func (e *cacheBehindError) Is(target error) bool { return target == ErrCacheBehind }

// awaitOwnWrite waits until store has caught up with the last write of
// the object at key that ctx's reconcile made, if any whose event hasn't
// come: up to readYourWrites, or until ctx ends. The cache has caught up
// once it holds the object at the write's version or later, or has
// brought any event at or past it, the object's deletion included; a
// write of an object the Reader's namespace or labels don't keep never
// waits, since its cache never holds it.
func (r *Source) AwaitOwnWrite(ctx context.Context, store toolscache.Indexer, namespace, name, key string) error {
	writes, ok := transport.WritesFrom(ctx).(*OwnedWrites)
	if !ok {
		return nil
	}
	deadline := time.Now().Add(readYourWrites)
	for {
		w, ok := writes.lastWrite(r.GR, namespace, name)
		if !ok || !r.keeps(namespace, w.Labels) || caughtUp(store, key, w.RV) {
			return nil // its event came, or it never will to this cache
		}
		if !time.Now().Before(deadline) {
			return &cacheBehindError{fmt.Sprintf("kube: reading %s %s: the cache hasn't brought this reconcile's own write of it (resourceVersion %s) within %v", r.Kind, key, w.RV, readYourWrites)}
		}
		if !Sleep(ctx, 5*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// awaitOwnWrites waits, as awaitOwnWrite does for one object, until store
// has caught up with the last write of each object in namespace ("" for
// every one) that ctx's reconcile made and whose event hasn't come: what
// a List is to hold. Without a reconcile's context, or with no such
// write, it costs a look at the reconcile's writes, and waits for none.
func (r *Source) AwaitOwnWrites(ctx context.Context, store toolscache.Indexer, namespace string) error {
	writes, ok := transport.WritesFrom(ctx).(*OwnedWrites)
	if !ok {
		return nil
	}
	deadline := time.Now().Add(readYourWrites)
	for {
		var behind, rv string
		writes.pendingIn(r.GR, func(ns, name string, w OwnedAnswer) {
			if behind != "" || (namespace != "" && ns != namespace) || !r.keeps(ns, w.Labels) {
				return
			}
			key := name
			if ns != "" {
				key = ns + "/" + name
			}
			if !caughtUp(store, key, w.RV) {
				behind, rv = key, w.RV
			}
		})
		if behind == "" {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &cacheBehindError{fmt.Sprintf("kube: listing %s: the cache hasn't brought this reconcile's own write of %s (resourceVersion %s) within %v", r.Kind, behind, rv, readYourWrites)}
		}
		if !Sleep(ctx, 5*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// keeps reports whether r's cache keeps an object in namespace with
// lbls: its Selector's namespace and labels. A field selector can't be
// told from the object's labels: a write r's fields don't keep waits for
// the cache to pass its version, as any write does.
func (r *Source) keeps(namespace string, lbls map[string]string) bool {
	k := r.Entry.Key()
	return (k.Namespace == "" || k.Namespace == namespace) && (r.Labels == nil || r.Labels.Matches(labels.Set(lbls)))
}

// caughtUp reports whether store has brought the version rv of the object
// at key: it holds the object at rv or later, or its last event (or
// bookmark) is at rv or later, so whatever became of the object by rv, a
// deletion included, is in it.
func caughtUp(store toolscache.Indexer, key, rv string) bool {
	atLeast := func(v string) bool {
		cmp, err := resourceversion.CompareResourceVersion(v, rv)
		return err == nil && cmp >= 0
	}
	if v := store.LastStoreSyncResourceVersion(); v != "" && atLeast(v) {
		return true
	}
	if cached, ok, _ := store.GetByKey(key); ok {
		if m, ok := cached.(metav1.Object); ok {
			cmp, err := resourceversion.CompareResourceVersion(m.GetResourceVersion(), rv)
			return err != nil || cmp >= 0
		}
	}
	return false
}

// store is the reader's synced cache, or an error saying why there is
// none.
func (r *Source) Store() (toolscache.Indexer, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	s := r.Entry.Store()
	if s == nil {
		return nil, fmt.Errorf("kube: reading %s: its cache hasn't synced: give the Reader to the Controller that reads it (kube.Reads), whose Serve keeps it warm", r.Entry.Key())
	}
	return s, nil
}

// decode decodes a cached object into v.
func (r *Source) Decode(cached any, v any) error {
	u, ok := cached.(*cache.Object)
	if !ok {
		return fmt.Errorf("kube: reading %s: its cache keeps only what Owns needs of each object, its owner, since a controller that owns it began serving before this Reader was declared: declare every Read before the first controller serves, and give the Reader to a controller that reads it (kube.Reads)", r.Entry.Key())
	}
	return Decode(u, v)
}

// indexFailed records that an index function failed for u, once for u's
// key until the index succeeds for it or u is deleted.
func (r *Source) IndexFailed(u *cache.Object, err error, stack []byte) {
	r.Failed.Record(r.Log, Key(u), "indexing an object", "it is indexed by nothing until it changes",
		[]any{slog.String(AttrResource, r.GR.String()), slog.String("object", Describe(u))}, err, stack)
}

// failedOnce is the keys a function of the user's (an index's, a
// Related's or References' mapping) failed for, each recorded once until
// the function succeeds for it again or its object is deleted: a key is
// kept no longer than its object.
type FailedOnce struct {
	keys sync.Map
	n    atomic.Int64 // how many keys it holds
}

// record writes what failed doing what, and its consequence, unless key's
// failure is already recorded: an ERROR record for a panic, with its
// stack, or a WARN record for an error, such as an object that can't be
// decoded.
func (f *FailedOnce) Record(log *slog.Logger, key, what, consequence string, attrs []any, err error, stack []byte) {
	if _, seen := f.keys.LoadOrStore(key, struct{}{}); seen {
		return
	}
	f.n.Add(1)
	attrs = append(attrs, slog.String("error", err.Error()))
	if stack != nil {
		log.Error(what+" panicked: "+consequence, append(attrs, slog.String(AttrExcStacktrace, string(stack)))...)
		return
	}
	log.Warn(what+" failed: "+consequence, attrs...)
}

// forget forgets key: its function succeeded for it, or its object was
// deleted.
func (f *FailedOnce) Forget(key string) {
	if _, held := f.keys.LoadAndDelete(key); held {
		f.n.Add(-1)
	}
}

// len is how many keys f holds.
func (f *FailedOnce) Len() int { return int(f.n.Load()) }
