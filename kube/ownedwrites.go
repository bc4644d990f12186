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

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// A reconcile's writes to the resources its controller Owns are its own
// outcome too: the Reconciler has their responses. The Client's transport
// records the resourceVersion each of them returned, and the event that
// brings that version queues nothing. A write is recorded when it goes
// through the Client's transport (a clientset built from Client.Config),
// with the reconcile's context, and its answer is JSON or protobuf, as
// client-go's clients ask for; any other write's event queues the owner as
// a change of someone else's does.

// writeRecorder records a write's answer: the resource it was sent to, and
// the object's namespace, name and resourceVersion after it. It records
// only the resources it owns, and the transport reads no other answer.
type writeRecorder interface {
	owns(gr schema.GroupResource) bool
	recordWrite(gr schema.GroupResource, namespace, name, rv string)
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
	_ = resp.Body.Close()
	// The caller reads the answer as it came, or the error reading it.
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	if err != nil || len(body) > maxRecordedBytes {
		return resp, nil
	}
	if m, ok := metadataOf(mt, body); ok && m.Name != "" {
		rec.recordWrite(gr, m.Namespace, m.Name, m.ResourceVersion)
	}
	return resp, nil
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
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var gr schema.GroupResource
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		gr.Group, segs = segs[1], segs[3:]
	default:
		return gr, false
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		segs = segs[2:] // a namespaced resource; namespaces/{name} alone is a Namespace
	}
	gr.Resource = segs[0]
	return gr, gr.Resource != ""
}

// ownedWrites keeps the resourceVersions that a controller's reconciles
// wrote to the resources it Owns, until their events come, or for
// rywBound.
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
	rvs []string // in the order written
	at  time.Time
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

func (w *ownedWrites) recordWrite(gr schema.GroupResource, namespace, name, rv string) {
	if rv == "" || !w.owns(gr) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.swept) > rywBound {
		// Forget the writes whose events never came, such as those a
		// relist folded into a later version's.
		for k, wr := range w.m {
			if now.Sub(wr.at) > rywBound {
				delete(w.m, k)
			}
		}
		w.swept = now
	}
	k := ownedKey{gr, namespace, name}
	wr := w.m[k]
	wr.rvs, wr.at = append(wr.rvs, rv), now
	w.m[k] = wr
}

// redundant reports whether the event bringing version rv of an owned
// object is that of a reconcile's own write. An event past the last write
// forgets the object's writes.
func (w *ownedWrites) redundant(gr schema.GroupResource, namespace, name, rv string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := ownedKey{gr, namespace, name}
	wr, ok := w.m[k]
	if !ok {
		return false
	}
	if cmp, err := resourceversion.CompareResourceVersion(rv, wr.rvs[len(wr.rvs)-1]); err != nil || cmp >= 0 {
		delete(w.m, k)
		return err == nil && cmp == 0
	}
	i := slices.Index(wr.rvs, rv)
	if i < 0 {
		return false
	}
	wr.rvs = slices.Delete(wr.rvs, 0, i+1) // events come in order
	w.m[k] = wr
	return true
}
