package transport

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

var deploymentsGR = schema.GroupResource{Group: "apps", Resource: "deployments"}

func TestResourceOfAPath(t *testing.T) {
	for path, want := range map[string]schema.GroupResource{
		"/apis/apps/v1/namespaces/default/deployments/d":        deploymentsGR,
		"/apis/apps/v1/namespaces/default/deployments":          deploymentsGR,
		"/apis/apps/v1/namespaces/default/deployments/d/status": deploymentsGR,
		"/apis/apps/v1/deployments":                             deploymentsGR,
		"/api/v1/namespaces/default/configmaps/c":               {Resource: "configmaps"},
		"/api/v1/namespaces/team-a":                             {Resource: "namespaces"},
		"/api/v1/namespaces":                                    {Resource: "namespaces"},
		"/apis/rbac.authorization.k8s.io/v1/clusterroles/r":     {Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
	} {
		if got, ok := resourceOf(path); !ok || got != want {
			t.Errorf("resourceOf(%q) = %v, %v, want %v", path, got, ok, want)
		}
	}
	for _, path := range []string{"/version", "/api/v1", "/apis/apps/v1", "/healthz", ""} {
		if got, ok := resourceOf(path); ok {
			t.Errorf("resourceOf(%q) = %v, want none", path, got)
		}
	}
}

// recorded is a WriteRecorder of Deployments that keeps what it is told.
type recorded []string

func (r *recorded) Owns(gr schema.GroupResource) bool { return gr == deploymentsGR }

func (r *recorded) RecordWrite(gr schema.GroupResource, namespace, name string, a Answer) {
	s := gr.String() + " " + namespace + "/" + name + " " + a.ResourceVersion
	if a.Created {
		s += " created"
	}
	*r = append(*r, s)
}

// answer is what a test server answers a write with.
type answer struct{ contentType, body string }

// writeAnswers serves a write to a path ending in one of answers' names
// with that answer, a write to "refused" with a 409, and any other with
// answers["d"]; the server stops when t ends.
func writeAnswers(t *testing.T, answers map[string]answer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[path.Base(r.URL.Path)]
		if !ok {
			a = answers["d"] // a create's path ends at the resource
		}
		w.Header().Set("Content-Type", a.contentType)
		if path.Base(r.URL.Path) == "refused" {
			w.WriteHeader(http.StatusConflict)
		}
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// deploymentAnswers are the answers of TestTheTransportRecordsAReconcilesWrites:
// Deployment default/d in JSON at version 42 and in protobuf at 43, a
// refusal, a garbled protobuf and a YAML answer.
func deploymentAnswers(t *testing.T) map[string]answer {
	t.Helper()
	const jsonAnswer = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"default","name":"d","resourceVersion":"42"},"spec":{"replicas":1}}`
	var pb bytes.Buffer
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", ResourceVersion: "43", Labels: map[string]string{"app": "d"}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1))}}
	d.APIVersion, d.Kind = "apps/v1", "Deployment"
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(d, &pb); err != nil {
		t.Fatal(err)
	}
	return map[string]answer{
		"d":        {"application/json", jsonAnswer},
		"refused":  {"application/json", `{"kind":"Status","metadata":{"resourceVersion":"44"}}`},
		"protobuf": {"application/vnd.kubernetes.protobuf", pb.String()},
		"garbled":  {"application/vnd.kubernetes.protobuf", "k8s\x00\x0a\xff"},
		"yaml":     {"application/yaml", "metadata: {name: d, resourceVersion: '45'}"},
	}
}

// The transport records the resourceVersion of each write a reconcile's
// context carries a recorder for, whatever its verb, from a JSON answer or
// a protobuf one (client-go's clientsets ask for protobuf), and hands its
// caller the answer whole; a read, a write without a recorder, a write to
// a resource the recorder doesn't own, a refused write or an answer it
// can't read records nothing.
func TestTheTransportRecordsAReconcilesWrites(t *testing.T) {
	answers := deploymentAnswers(t)
	srv := writeAnswers(t, answers)
	client := &http.Client{Transport: &writesTransport{next: http.DefaultTransport}}
	deployment := "/apis/apps/v1/namespaces/default/deployments/"

	for _, tc := range []struct {
		method, path string
		recording    bool
		want         []string
	}{
		{http.MethodPatch, deployment + "d", true, []string{"deployments.apps default/d 42"}},
		{http.MethodPut, deployment + "d", true, []string{"deployments.apps default/d 42"}},
		{http.MethodPost, "/apis/apps/v1/namespaces/default/deployments", true, []string{"deployments.apps default/d 42"}},
		{http.MethodPatch, deployment + "protobuf", true, []string{"deployments.apps default/d 43"}},
		{http.MethodGet, deployment + "d", true, nil},
		{http.MethodDelete, deployment + "d", true, nil},
		{http.MethodPatch, deployment + "d", false, nil},
		{http.MethodPatch, deployment + "refused", true, nil},
		{http.MethodPatch, deployment + "garbled", true, nil},
		{http.MethodPatch, deployment + "yaml", true, nil},
		{http.MethodPatch, "/api/v1/namespaces/default/configmaps/d", true, nil},
	} {
		var rec recorded
		ctx := t.Context()
		if tc.recording {
			ctx = RecordingWrites(ctx, &rec)
		}
		req, err := http.NewRequestWithContext(ctx, tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Errorf("%s %s: reading the answer: %v", tc.method, tc.path, err)
		}
		want, ok := answers[path.Base(tc.path)]
		if !ok {
			want = answers["d"]
		}
		if string(body) != want.body {
			t.Errorf("%s %s: the caller read %q, want the answer whole", tc.method, tc.path, body)
		}
		if !slices.Equal(rec, tc.want) {
			t.Errorf("%s %s (recording %v): recorded %q, want %q", tc.method, tc.path, tc.recording, rec, tc.want)
		}
	}
}

// Recording a write never changes what its caller reads: an answer over
// the bound the transport reads for a resourceVersion (3 MiB) reaches the
// caller whole, whether its length is known in advance or not (chunked,
// or gzip, which Go's transport decompresses and so has no length). Before,
// such an answer was cut at 3 MiB + 1 byte.
func TestAnAnswerOverTheRecordedBoundReachesTheCallerWhole(t *testing.T) {
	big := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"default","name":"d","resourceVersion":"42","annotations":{"big":%q}}}`,
		strings.Repeat("x", maxRecordedBytes+1<<20))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch path.Base(r.URL.Path) {
		case "chunked":
			for rest := big; rest != ""; {
				n := min(len(rest), 64<<10)
				_, _ = io.WriteString(w, rest[:n])
				w.(http.Flusher).Flush()
				rest = rest[n:]
			}
		case "gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = io.WriteString(zw, big)
			_ = zw.Close()
		}
	}))
	defer srv.Close()
	client := &http.Client{Transport: &writesTransport{next: http.DefaultTransport}}
	for _, answer := range []string{"chunked", "gzip"} {
		var rec recorded
		req, err := http.NewRequestWithContext(RecordingWrites(t.Context(), &rec), http.MethodPatch, srv.URL+"/apis/apps/v1/namespaces/default/deployments/"+answer, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ContentLength >= 0 {
			t.Errorf("%s: the answer's length is known (%d): the test shows nothing", answer, resp.ContentLength)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Errorf("%s: reading the answer: %v", answer, err)
		}
		if len(body) != len(big) || string(body) != big {
			t.Errorf("%s: the caller read %d bytes, want the answer's %d whole", answer, len(body), len(big))
		}
		if len(rec) != 0 {
			t.Errorf("%s: recorded %q, want nothing from an answer over the bound", answer, rec)
		}
	}
}

// The writer's managedFields entry is named as kube-apiserver names it:
// the request's fieldManager, or else its User-Agent up to the first "/",
// printable runes only, cut to 128 bytes; Apply for a server-side apply,
// Update for any other write; and the path's subresource.
func TestWritersEntry(t *testing.T) {
	const deployment = "https://k/apis/apps/v1/namespaces/default/deployments/d"
	long := strings.Repeat("m", maxFieldManager-1) + "é" // "é" is two bytes: it doesn't fit
	for _, tc := range []struct {
		url, userAgent, contentType string
		want                        ManagedEntry
	}{
		{deployment + "?fieldManager=memcached", "humus-kube", "application/apply-patch+yaml", ManagedEntry{"memcached", metav1.ManagedFieldsOperationApply, ""}},
		{deployment + "/status?fieldManager=memcached", "", "application/merge-patch+json", ManagedEntry{"memcached", metav1.ManagedFieldsOperationUpdate, "status"}},
		{deployment + "/scale", "kubectl/v1.37.2 (linux/amd64)", "application/json", ManagedEntry{"kubectl", metav1.ManagedFieldsOperationUpdate, "scale"}},
		{deployment, "my\tclient", "application/json", ManagedEntry{"myclient", metav1.ManagedFieldsOperationUpdate, ""}},
		{deployment, long, "application/json", ManagedEntry{long[:maxFieldManager-1], metav1.ManagedFieldsOperationUpdate, ""}},
	} {
		r, err := http.NewRequest(http.MethodPatch, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("User-Agent", tc.userAgent)
		r.Header.Set("Content-Type", tc.contentType)
		if got := writersEntry(r); got != tc.want {
			t.Errorf("writersEntry(%s, User-Agent %q, %s) = %+v, want %+v", tc.url, tc.userAgent, tc.contentType, got, tc.want)
		}
	}
	if maxFieldManager != metav1validation.FieldManagerMaxLength {
		t.Errorf("maxFieldManager = %d, and the API server's FieldManagerMaxLength %d", maxFieldManager, metav1validation.FieldManagerMaxLength)
	}
}

// deletesRecorded is a WriteRecorder of deployments that says what it
// recorded of a delete too.
type deletesRecorded []string

func (r *deletesRecorded) Owns(gr schema.GroupResource) bool { return gr == deploymentsGR }

func (r *deletesRecorded) RecordWrite(gr schema.GroupResource, namespace, name string, a Answer) {
	s := namespace + "/" + name + " rv=" + a.ResourceVersion
	if a.Deleted {
		s += " deleted uid=" + a.UID
	}
	*r = append(*r, s)
}

// The transport's own recorder (Config.Writes, a Client's ledger) records
// every write of what it Owns, with no recorder in the context, and a
// DELETE's answer: the object gone (its UID, from the object or from the
// Status answered), or kept for its finalizers, which is an update (issue
// 44, point 2: deletes weren't recorded, nor writes outside a reconcile's
// context).
func TestTheTransportsRecorderRecordsEveryWriteAndDelete(t *testing.T) {
	srv := writeAnswers(t, map[string]answer{
		"d":       {jsonType, `{"metadata":{"name":"d","namespace":"default","resourceVersion":"7"}}`},
		"gone":    {jsonType, `{"metadata":{"name":"gone","namespace":"default","uid":"u-gone","resourceVersion":"8"}}`},
		"status":  {jsonType, `{"kind":"Status","apiVersion":"v1","status":"Success","details":{"name":"status","group":"apps","kind":"deployments","uid":"u-status"}}`},
		"kept":    {jsonType, `{"metadata":{"name":"kept","namespace":"default","uid":"u-kept","resourceVersion":"9","deletionTimestamp":"2026-12-06T00:00:00Z"}}`},
		"ignored": {jsonType, `{"metadata":{"name":"ignored","resourceVersion":"10"}}`},
	})
	var all deletesRecorded
	client := &http.Client{Transport: &writesTransport{next: http.DefaultTransport, all: &all}}
	for _, w := range []struct{ method, path string }{
		{http.MethodPatch, "/apis/apps/v1/namespaces/default/deployments/d"},
		{http.MethodDelete, "/apis/apps/v1/namespaces/default/deployments/gone"},
		{http.MethodDelete, "/apis/apps/v1/namespaces/default/deployments/status"},
		{http.MethodDelete, "/apis/apps/v1/namespaces/default/deployments/kept"},
		{http.MethodDelete, "/apis/apps/v1/namespaces/default/deployments"}, // a deletecollection
		{http.MethodPatch, "/api/v1/namespaces/default/configmaps/ignored"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), w.method, srv.URL+w.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	want := deletesRecorded{
		"default/d rv=7",
		"default/gone rv=8 deleted uid=u-gone",
		"default/status rv= deleted uid=u-status",
		"default/kept rv=9",
	}
	if !slices.Equal(all, want) {
		t.Errorf("recorded %q, want %q", all, want)
	}
}
