package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
)

// Source is what a Reader reads, whatever its type: its cache, and the
// App's writes it waits for.
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
	// Ledger is the Client's writes, which its reads wait for.
	Ledger *Ledger
}

// readYourWrites bounds a read's wait for the cache to bring the App's own
// last write of an object.
const readYourWrites = 5 * time.Second

// ErrCacheBehind is kube.ErrCacheBehind.
var ErrCacheBehind = errors.New("kube: the cache hasn't brought the App's own write")

// cacheBehindError is a read that ErrCacheBehind ended, its message
// naming the object and the write.
type cacheBehindError struct{ msg string }

func (e *cacheBehindError) Error() string { return e.msg }

func (e *cacheBehindError) Is(target error) bool { return target == ErrCacheBehind }

// AwaitOwnWrite waits until store has caught up with the last write of
// the object at key that the App made through its Client, if any whose
// event no read has seen yet: up to readYourWrites, or until ctx ends. The
// cache has caught up once it holds the object at the write's version or
// later, or has brought any event at or past it; after a delete, once it
// no longer holds the object (or holds another of the same name). A
// write of an object the Reader's namespace or labels don't keep never
// waits, since its cache never holds it. With no such write it costs a
// look at the Ledger.
func (r *Source) AwaitOwnWrite(ctx context.Context, store toolscache.Indexer, namespace, name, key string) error {
	if r.Ledger == nil {
		return nil
	}
	deadline := time.Now().Add(readYourWrites)
	for {
		w, ok := r.Ledger.last(r.GR, key)
		if !ok || !r.keeps(namespace, w) {
			return nil // it never will come to this cache
		}
		if w.caughtUp(store, key) {
			r.Ledger.seen(r.GR, key, w)
			return nil
		}
		if !time.Now().Before(deadline) {
			return &cacheBehindError{fmt.Sprintf("kube: reading %s %s: the cache hasn't brought the App's own %s within %v", r.Kind, key, w, readYourWrites)}
		}
		if !sleep(ctx, 5*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// AwaitOwnWrites waits, as AwaitOwnWrite does for one object, until store
// has caught up with the last write of each object in namespace ("" for
// every one) that the App made and whose event no read has seen yet: what
// a List is to hold. With no such write, it costs a look at the Ledger.
func (r *Source) AwaitOwnWrites(ctx context.Context, store toolscache.Indexer, namespace string) error {
	if r.Ledger == nil {
		return nil
	}
	deadline := time.Now().Add(readYourWrites)
	for {
		var behind string
		var last *Write
		var seen []string
		var seenW []*Write
		r.Ledger.pending(r.GR, func(key string, w *Write) {
			if behind != "" {
				return
			}
			ns := ""
			if i := strings.IndexByte(key, '/'); i >= 0 {
				ns = key[:i]
			}
			if (namespace != "" && ns != namespace) || !r.keeps(ns, w) {
				return
			}
			if w.caughtUp(store, key) {
				seen, seenW = append(seen, key), append(seenW, w)
				return
			}
			behind, last = key, w
		})
		for i, key := range seen {
			r.Ledger.seen(r.GR, key, seenW[i])
		}
		if behind == "" {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &cacheBehindError{fmt.Sprintf("kube: listing %s: the cache hasn't brought the App's own %s of %s within %v", r.Kind, last, behind, readYourWrites)}
		}
		if !sleep(ctx, 5*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// String names w in a message: "write (resourceVersion 5)", or "delete".
func (w *Write) String() string {
	switch {
	case w.Deleted:
		return "delete"
	default:
		return "write (resourceVersion " + w.RV + ")"
	}
}

// caughtUp reports whether store has brought w, the last write of the
// object at key.
func (w *Write) caughtUp(store toolscache.Indexer, key string) bool {
	if !w.Deleted {
		return caughtUp(store, key, w.RV)
	}
	cached, ok, _ := store.GetByKey(key)
	if !ok {
		return true
	}
	m, ok := cached.(metav1.Object)
	if !ok {
		return true
	}
	if w.UID != "" && string(m.GetUID()) != w.UID {
		return true // another object of the same name, created since
	}
	if w.RV == "" {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(m.GetResourceVersion(), w.RV)
	return err != nil || cmp > 0 // a later version than the one deleted
}

// keeps reports whether r's cache keeps the object in namespace that w
// wrote: its Selector's namespace and labels. A field selector can't be
// told from the object's labels: a write r's fields don't keep waits for
// the cache to pass its version, as any write does.
func (r *Source) keeps(namespace string, w *Write) bool {
	k := r.Entry.Key()
	if k.Namespace != "" && k.Namespace != namespace {
		return false
	}
	// A delete whose answer named no labels waits as any delete does.
	return r.Labels == nil || (w.Deleted && w.Labels == nil) || r.Labels.Matches(labels.Set(w.Labels))
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

// Store is the reader's synced cache, or an error saying why there is
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

// Decode decodes a cached object into v.
func (r *Source) Decode(cached any, v any) error {
	u, ok := cached.(*cache.Object)
	if !ok {
		return fmt.Errorf("kube: reading %s: its cache keeps only what Owns needs of each object, its owner, since a controller that owns it began serving before this Reader was declared: declare every Read before the first controller serves, and give the Reader to a controller that reads it (kube.Reads)", r.Entry.Key())
	}
	return Decode(u, v)
}

// IndexFailed records that an index function failed for u, once for u's
// key until the index succeeds for it or u is deleted.
func (r *Source) IndexFailed(u *cache.Object, err error, stack []byte) {
	r.Failed.Record(r.Log, Key(u), "indexing an object", "it is indexed by nothing until it changes",
		[]any{slog.String(AttrResource, r.GR.String()), slog.String("object", Describe(u))}, err, stack)
}

// FailedOnce is the keys a function of the user's (an index's, a
// Related's or References' mapping) failed for, each recorded once until
// the function succeeds for it again or its object is deleted: a key is
// kept no longer than its object.
type FailedOnce struct {
	keys sync.Map
	n    atomic.Int64 // how many keys it holds
}

// Record writes what failed doing what, and its consequence, unless key's
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

// Forget forgets key: its function succeeded for it, or its object was
// deleted.
func (f *FailedOnce) Forget(key string) {
	if _, held := f.keys.LoadAndDelete(key); held {
		f.n.Add(-1)
	}
}

// Len is how many keys f holds.
func (f *FailedOnce) Len() int { return int(f.n.Load()) }
