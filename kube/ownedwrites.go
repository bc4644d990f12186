package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// A reconcile's writes to the resources its controller Owns are its own
// outcome too: the Reconciler has their responses. The Client's transport
// records the resourceVersion each of them returned, and the event that
// brings that version queues nothing, provided the write made that
// version. A write is recorded when it goes through the Client's transport
// (a clientset built from Client.Config), with the reconcile's context,
// and its answer is JSON or protobuf, as client-go's clients ask for; any
// other write's event queues the owner as a change of someone else's does.
//
// A write that changes nothing makes no version: kube-apiserver's store
// writes nothing when the object's bytes are unchanged, and answers with
// the stored object, whose resourceVersion can be another client's write
// that the informer hasn't brought yet. The answer can't tell the two
// apart, but the event can: a write that changed the object changed its
// writer's managedFields entry too (server-side apply and update set the
// entry's time, to the second, whenever they change the object, and the
// entry's fields when they change what the writer owns), while another
// client's write leaves the writer's entry as it was. So the event of a
// recorded version is the reconcile's own only when the writer's entry
// differs between the version before it and that version, or, for an
// object new to the cache, when the write created it (201). A change of
// the writer's within the second of its last one, to fields it already
// owned, is taken for someone else's: one reconcile more, never one less.

// writeRecorder records a write's answer: the resource it was sent to, the
// object's namespace and name, and what the answer says of the write. It
// records only the resources it owns, and the transport reads no other
// answer.
type writeRecorder interface {
	owns(gr schema.GroupResource) bool
	recordWrite(gr schema.GroupResource, namespace, name string, w ownedAnswer)
}

// ownedAnswer is what a write's answer says of it: the object's
// resourceVersion after it, whether it created the object, and which
// managedFields entry is the writer's (managedKey).
type ownedAnswer struct {
	rv      string
	created bool
	entry   uint64
}

type writeRecorderKey struct{}

// recordingWrites returns ctx carrying r, for the Client's transport.
func recordingWrites(ctx context.Context, r writeRecorder) context.Context {
	return context.WithValue(ctx, writeRecorderKey{}, r)
}

// writesTransport reads the answer of each write whose context carries a
// writeRecorder, and records it.
type writesTransport struct {
	next http.RoundTripper
}

// maxRecordedBytes bounds the answers read for a resourceVersion: etcd
// keeps no object larger.
const maxRecordedBytes = 3 << 20

func (t *writesTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	rec, ok := r.Context().Value(writeRecorderKey{}).(writeRecorder)
	if err != nil || !ok || resp.StatusCode/100 != 2 || resp.ContentLength > maxRecordedBytes {
		return resp, err
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return resp, err
	}
	gr, ok := resourceOf(r.URL.Path)
	if !ok || !rec.owns(gr) {
		return resp, nil // such as the controller's own status
	}
	mt, _, mtErr := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mtErr != nil || (mt != jsonType && mt != protobufType) {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRecordedBytes+1))
	if err == nil && len(body) > maxRecordedBytes {
		// Too long to record: the caller reads what was read, then the
		// rest of the answer as it comes.
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return resp, nil
	}
	_ = resp.Body.Close()
	// The caller reads the answer as it came, or the error reading it.
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	if err != nil {
		return resp, nil
	}
	if m, ok := metadataOf(mt, body); ok && m.Name != "" {
		rec.recordWrite(gr, m.Namespace, m.Name, ownedAnswer{
			rv:      m.ResourceVersion,
			created: resp.StatusCode == http.StatusCreated,
			entry:   writersEntry(r),
		})
	}
	return resp, nil
}

// writersEntry is the managedKey of the managedFields entry that r's
// writer owns, as kube-apiserver names it: the fieldManager the request
// names, or else its User-Agent up to the first "/", printable runes only,
// cut to 128 bytes; the operation Apply for a server-side apply, Update
// for any other write; and the subresource the path names.
func writersEntry(r *http.Request) uint64 {
	manager := r.URL.Query().Get("fieldManager")
	if manager == "" {
		ua, _, _ := strings.Cut(r.UserAgent(), "/")
		var b strings.Builder
		for _, c := range ua {
			if !unicode.IsPrint(c) {
				continue
			}
			if b.Len()+utf8.RuneLen(c) > maxFieldManager {
				break
			}
			b.WriteRune(c)
		}
		manager = b.String()
	}
	op := metav1.ManagedFieldsOperationUpdate
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch") {
		op = metav1.ManagedFieldsOperationApply
	}
	return managedKey(manager, op, subresourceOf(r.URL.Path))
}

// The media types of the answers a write's resourceVersion is read from:
// JSON, and the protobuf that client-go's clientsets ask for.
const (
	jsonType     = "application/json"
	protobufType = "application/vnd.kubernetes.protobuf"
)

// protobufMagic starts every object the API server encodes as protobuf,
// followed by a runtime.Unknown holding the object.
var protobufMagic = []byte("k8s\x00")

// metadataOf reads an answer's object's metadata. In protobuf, every
// Kubernetes object has its metav1.ObjectMeta as its field 1.
func metadataOf(mediaType string, body []byte) (metav1.ObjectMeta, bool) {
	var m metav1.ObjectMeta
	if mediaType == jsonType {
		var obj struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		err := json.Unmarshal(body, &obj)
		return obj.Metadata, err == nil
	}
	var unknown runtime.Unknown
	if !bytes.HasPrefix(body, protobufMagic) || unknown.Unmarshal(body[len(protobufMagic):]) != nil {
		return m, false
	}
	for b := unknown.Raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return m, false
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			return m, n >= 0 && m.Unmarshal(v) == nil
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return m, false
		}
		b = b[n:]
	}
	return m, false
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// errReader returns err, or io.EOF when it is nil.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// resourceOf is the group and resource of an API path:
// /api/v1/namespaces/{namespace}/{resource}/{name}/{subresource},
// /apis/{group}/{version}/{resource}/{name}, and so on.
func resourceOf(path string) (schema.GroupResource, bool) {
	gr, _, ok := splitPath(path)
	return gr, ok
}

// subresourceOf is the subresource an API path names, or "".
func subresourceOf(path string) string {
	_, segs, _ := splitPath(path)
	if len(segs) >= 3 {
		return segs[2]
	}
	return ""
}

// splitPath is the group of an API path, and its segments from the
// resource on: resource, name, subresource.
func splitPath(path string) (schema.GroupResource, []string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var gr schema.GroupResource
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		gr.Group, segs = segs[1], segs[3:]
	default:
		return gr, nil, false
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		segs = segs[2:] // a namespaced resource; namespaces/{name} alone is a Namespace
	}
	gr.Resource = segs[0]
	return gr, segs, gr.Resource != ""
}

// ownedWrites keeps the writes that a controller's reconciles made to the
// resources it Owns, until their events come, or for rywBound.
type ownedWrites struct {
	owned []schema.GroupResource

	mu    sync.Mutex
	m     map[ownedKey]ownedWrite
	swept time.Time
}

type ownedKey struct {
	gr              schema.GroupResource
	namespace, name string
}

type ownedWrite struct {
	writes []ownedAnswer // in the order written
	at     time.Time
}

func newOwnedWrites(owned []schema.GroupVersionResource) *ownedWrites {
	w := &ownedWrites{m: map[ownedKey]ownedWrite{}}
	for _, gvr := range owned {
		w.owned = append(w.owned, gvr.GroupResource())
	}
	return w
}

func (w *ownedWrites) owns(gr schema.GroupResource) bool {
	return w != nil && slices.Contains(w.owned, gr)
}

func (w *ownedWrites) recordWrite(gr schema.GroupResource, namespace, name string, wr ownedAnswer) {
	if wr.rv == "" || !w.owns(gr) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.swept) > rywBound {
		// Forget the writes whose events never came, such as those a
		// relist folded into a later version's.
		for k, ow := range w.m {
			if now.Sub(ow.at) > rywBound {
				delete(w.m, k)
			}
		}
		w.swept = now
	}
	k := ownedKey{gr, namespace, name}
	ow := w.m[k]
	ow.writes, ow.at = append(ow.writes, wr), now
	w.m[k] = ow
}

// redundant reports whether the event that brings obj, an owned object of
// gr, after old (nil when the object is new to the cache), is that of a
// reconcile's own write: its version is one a write of the reconcile's
// answered, and that write made it. An event past the last write forgets
// the object's writes.
func (w *ownedWrites) redundant(gr schema.GroupResource, old, obj metav1.Object) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := ownedKey{gr, obj.GetNamespace(), obj.GetName()}
	ow, ok := w.m[k]
	if !ok {
		return false
	}
	rv := obj.GetResourceVersion()
	last := ow.writes[len(ow.writes)-1]
	if cmp, err := resourceversion.CompareResourceVersion(rv, last.rv); err != nil || cmp >= 0 {
		delete(w.m, k)
		return err == nil && cmp == 0 && last.made(old, obj)
	}
	i := slices.IndexFunc(ow.writes, func(wr ownedAnswer) bool { return wr.rv == rv })
	if i < 0 {
		return false
	}
	made := ow.writes[i].made(old, obj)
	ow.writes = slices.Delete(ow.writes, 0, i+1) // events come in order
	w.m[k] = ow
	return made
}

// made reports whether the write made obj, the version it answered, from
// old, the version before it in the cache, and nobody else changed it
// between them: it created the object; or it changed the writer's
// managedFields entry and no other entry changed (a relist can fold
// another client's change into the event of the reconcile's write: the
// other client's entry tells).
func (wr ownedAnswer) made(old, obj metav1.Object) bool {
	if old == nil {
		return wr.created
	}
	after, ok := managedSumOf(obj, wr.entry)
	if !ok {
		return false
	}
	before, ok := managedSumOf(old, wr.entry)
	return (!ok || before != after) && othersUnchanged(old, obj, wr.entry)
}
