package control

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/z5labs/humus/kube/internal/transport"
)

// Ledger is the writes a Client made of the resources its Readers read,
// whatever the context they were sent with: creates, updates, patches,
// applies and deletes, each as its answer says (the Client's transport
// records them). A Reader's read waits for the cache to bring the last
// one of what it reads (Source.AwaitOwnWrite), so an App reads its own
// writes. An entry goes once a read sees the cache has brought it, or
// rywBound after it was made: the Ledger holds only writes of the last
// 30 s whose event no read has seen yet.
type Ledger struct {
	mu    sync.RWMutex
	read  map[schema.GroupResource]bool
	m     map[schema.GroupResource]map[string]*Write // by the object's key
	n     int                                        // entries in m
	swept time.Time
}

// Write is the last write of an object, as its answer said.
type Write struct {
	RV      string            // the object's resourceVersion after it; "" for a delete that said none
	UID     string            // the object's UID, for a delete
	Labels  map[string]string // the object's, after it
	Deleted bool              // the write deleted the object
	at      time.Time
}

// NewLedger returns an empty Ledger.
func NewLedger() *Ledger {
	return &Ledger{read: map[schema.GroupResource]bool{}, m: map[schema.GroupResource]map[string]*Write{}}
}

// Read has l record the writes of gr: a Reader reads it.
func (l *Ledger) Read(gr schema.GroupResource) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.read[gr] = true
}

// Owns reports whether l records the writes of gr.
func (l *Ledger) Owns(gr schema.GroupResource) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.read[gr]
}

// RecordWrite records a write's answer, as the Client's transport reads it.
func (l *Ledger) RecordWrite(gr schema.GroupResource, namespace, name string, a transport.Answer) {
	if a.ResourceVersion == "" && !a.Deleted {
		return
	}
	now := time.Now()
	w := &Write{RV: a.ResourceVersion, UID: a.UID, Labels: a.Labels, Deleted: a.Deleted, at: now}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.read[gr] {
		return
	}
	if now.Sub(l.swept) > rywBound {
		l.sweep(now)
	}
	byKey := l.m[gr]
	if byKey == nil {
		byKey = map[string]*Write{}
		l.m[gr] = byKey
	}
	k := objectKey(namespace, name)
	if _, ok := byKey[k]; !ok {
		l.n++
	}
	byKey[k] = w
}

// sweep forgets the writes older than rywBound, such as those whose
// objects no Reader has read since.
func (l *Ledger) sweep(now time.Time) {
	l.swept = now
	for gr, byKey := range l.m {
		for k, w := range byKey {
			if now.Sub(w.at) > rywBound {
				delete(byKey, k)
				l.n--
			}
		}
		if len(byKey) == 0 {
			delete(l.m, gr)
		}
	}
}

// last is the last write of the object of gr at key, unless it is older
// than rywBound.
func (l *Ledger) last(gr schema.GroupResource, key string) (*Write, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.n == 0 {
		return nil, false
	}
	w, ok := l.m[gr][key]
	if !ok || time.Since(w.at) > rywBound {
		return nil, false
	}
	return w, true
}

// pending calls f with the last write of each object of gr that l holds,
// but those older than rywBound.
func (l *Ledger) pending(gr schema.GroupResource, f func(key string, w *Write)) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.n == 0 {
		return
	}
	now := time.Now()
	for k, w := range l.m[gr] {
		if now.Sub(w.at) <= rywBound {
			f(k, w)
		}
	}
}

// seen forgets w, the last write of the object of gr at key, once a read
// saw the cache bring it: unless a later write replaced it.
func (l *Ledger) seen(gr schema.GroupResource, key string, w *Write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if byKey := l.m[gr]; byKey[key] == w {
		delete(byKey, key)
		l.n--
	}
}

// objectKey is the cache key of the object named name in namespace.
func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
