package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WriteRecorder records a write's answer: the resource it was sent to, the
// object's namespace and name, and what the answer says of the write. It
// records only the resources it Owns, and the transport reads no other
// answer.
type WriteRecorder interface {
	Owns(gr schema.GroupResource) bool
	RecordWrite(gr schema.GroupResource, namespace, name string, a Answer)
}

// Answer is what a write's answer says of it.
type Answer struct {
	ResourceVersion string            // the object's, after the write
	Created         bool              // the write created the object: a 201
	Writer          ManagedEntry      // the managedFields entry the writer owns
	Labels          map[string]string // the object's, after the write
	// Deleted is a DELETE's answer that the object is gone (not kept for
	// its finalizers, which is an update): its UID, when the answer says,
	// and its last resourceVersion.
	Deleted bool
	UID     string
}

// ManagedEntry names a managedFields entry as kube-apiserver keeps one for
// each: its manager, its operation and its subresource.
type ManagedEntry struct {
	Manager     string
	Operation   metav1.ManagedFieldsOperationType
	Subresource string
}

type writeRecorderKey struct{}

// RecordingWrites returns ctx carrying r: the writes sent with it are
// recorded in r, as the package doc says.
func RecordingWrites(ctx context.Context, r WriteRecorder) context.Context {
	return context.WithValue(ctx, writeRecorderKey{}, r)
}

// WritesFrom is the WriteRecorder ctx carries, or nil.
func WritesFrom(ctx context.Context) WriteRecorder {
	r, _ := ctx.Value(writeRecorderKey{}).(WriteRecorder)
	return r
}

// writesTransport reads the answer of each write whose context carries a
// WriteRecorder, and of each write all records, and records it.
type writesTransport struct {
	next http.RoundTripper
	all  WriteRecorder // records writes whatever their context; nil for none
}

// maxRecordedBytes bounds the answers read for a resourceVersion: etcd
// keeps no object larger.
const maxRecordedBytes = 3 << 20

func (t *writesTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode/100 != 2 || resp.ContentLength > maxRecordedBytes {
		return resp, err
	}
	del := r.Method == http.MethodDelete
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return resp, err
	}
	gr, segs, ok := splitPath(r.URL.Path)
	if !ok || (del && len(segs) != 2) {
		return resp, nil // not an object's write, such as a deletecollection
	}
	var recs []WriteRecorder
	if rec, ok := r.Context().Value(writeRecorderKey{}).(WriteRecorder); ok && !del && rec.Owns(gr) {
		recs = append(recs, rec)
	}
	if t.all != nil && t.all.Owns(gr) {
		recs = append(recs, t.all)
	}
	if len(recs) == 0 {
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
	m, ok := metadataOf(mt, body)
	a := Answer{
		ResourceVersion: m.ResourceVersion,
		Created:         resp.StatusCode == http.StatusCreated,
		Writer:          writersEntry(r),
		Labels:          m.Labels,
	}
	namespace, name := m.Namespace, m.Name
	if del {
		// Named by its path: the answer is the object, or a Status.
		namespace, name = namespaceOf(r.URL.Path), segs[1]
		if !ok || m.Name == "" || m.DeletionTimestamp == nil {
			a = Answer{Deleted: true, UID: string(m.UID), ResourceVersion: m.ResourceVersion, Labels: m.Labels}
			if m.Name == "" {
				a = Answer{Deleted: true, UID: statusUID(mt, body)}
			}
		}
	} else if !ok {
		return resp, nil
	}
	if name == "" {
		return resp, nil
	}
	for _, rec := range recs {
		rec.RecordWrite(gr, namespace, name, a)
	}
	return resp, nil
}

// namespaceOf is the namespace an API path names, or "".
func namespaceOf(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+1 < len(segs); i++ {
		if segs[i] == "namespaces" && i+2 < len(segs) {
			return segs[i+1]
		}
	}
	return ""
}

// statusUID is the UID a DELETE's Status answer names in its details, in
// JSON; "" in protobuf, or when it names none.
func statusUID(mediaType string, body []byte) string {
	if mediaType != jsonType {
		return ""
	}
	var st struct {
		Details struct {
			UID string `json:"uid"`
		} `json:"details"`
	}
	_ = json.Unmarshal(body, &st)
	return st.Details.UID
}

// writersEntry is the managedFields entry that r's writer owns, as
// kube-apiserver names it: the fieldManager the request names, or else its
// User-Agent up to the first "/", printable runes only, cut to 128 bytes;
// the operation Apply for a server-side apply, Update for any other write;
// and the subresource the path names.
func writersEntry(r *http.Request) ManagedEntry {
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
	return ManagedEntry{Manager: manager, Operation: op, Subresource: subresourceOf(r.URL.Path)}
}

// maxFieldManager is the longest field manager the API server keeps: it
// cuts a User-Agent taken for one to this many bytes
// (metav1validation.FieldManagerMaxLength).
const maxFieldManager = 128

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
