package cache

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const testMemcachedJSON = `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached",` +
	`"metadata":{"name":"m","namespace":"ns","uid":"u-1","resourceVersion":"11","finalizers":["cache.example.com/finalizer"],` +
	`"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"cache.example.com/v1alpha1","time":"2026-01-02T03:04:05Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}},` +
	`{"manager":"ctrl","operation":"Apply","apiVersion":"cache.example.com/v1alpha1","time":"2026-01-02T03:04:07Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{}},"subresource":"status"}]},` +
	`"spec":{"size":3,"image":"memcached:1.6"},"status":{"readyReplicas":2}}`

// objectsServer is an API server of one Memcached for restObjects: each
// request is handed to answer, after the test has seen it.
func objectsServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, body []byte)) restObjects {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		answer(w, r, body)
	}))
	t.Cleanup(srv.Close)
	rc, err := NewObjectsREST(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return restObjects{rest: rc, gvr: schema.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"}, namespace: "ns"}
}

// wantRequest fails the test unless r is method on path with query.
func wantRequest(t *testing.T, r *http.Request, method, path string, query url.Values) {
	t.Helper()
	if r.Method != method || r.URL.Path != path || !reflect.DeepEqual(r.URL.Query(), query) {
		t.Errorf("request %s %s?%s, want %s %s?%s", r.Method, r.URL.Path, r.URL.RawQuery, method, path, query.Encode())
	}
}

// checkMemcached fails the test unless o is testMemcachedJSON as the cache
// keeps it: its metadata without managedFields, but their digests and
// newest time, and the rest of its JSON.
func checkMemcached(t *testing.T, o *Object) {
	t.Helper()
	var want struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(testMemcachedJSON), &want); err != nil {
		t.Fatal(err)
	}
	digests, newest := Digests(&want.ObjectMeta), want.ManagedFields[1].Time.Time
	want.ManagedFields = nil
	if o.TypeMeta != want.TypeMeta || !reflect.DeepEqual(o.ObjectMeta, want.ObjectMeta) {
		t.Errorf("cached %+v %+v, want %+v %+v", o.TypeMeta, o.ObjectMeta, want.TypeMeta, want.ObjectMeta)
	}
	if !reflect.DeepEqual(o.managed, digests) || !o.Written.Equal(newest) {
		t.Errorf("cached managedFields %v written %v, want %v and %v", o.managed, o.Written, digests, newest)
	}
	const rest = `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","spec":{"size":3,"image":"memcached:1.6"},"status":{"readyReplicas":2}}`
	if string(o.Raw) != rest {
		t.Errorf("cached JSON %s, want %s", o.Raw, rest)
	}
}

// A list is sent with its options and decoded into cachedObjects, each as
// the cache keeps it.
func TestObjectsListDecodesIntoTheCachesForm(t *testing.T) {
	objects := objectsServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		wantRequest(t, r, http.MethodGet, "/apis/cache.example.com/v1alpha1/namespaces/ns/memcacheds",
			url.Values{"labelSelector": {"a=b"}, "resourceVersion": {"0"}, "limit": {"500"}})
		w.Header().Set("Content-Type", "application/json")
		// The API server leaves a built-in resource's items' kind out.
		_, _ = io.WriteString(w, `{"apiVersion":"cache.example.com/v1alpha1","kind":"MemcachedList","metadata":{"resourceVersion":"12","continue":"c"},"items":[`+
			testMemcachedJSON+`,{"metadata":{"name":"k"},"spec":{"size":1}},{"metadata":{"name":"e"}}]}`)
	})
	got, err := objects.List(t.Context(), metav1.ListOptions{LabelSelector: "a=b", ResourceVersion: "0", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	list := got.(*List)
	if list.ResourceVersion != "12" || list.Continue != "c" || list.Kind != "MemcachedList" || len(list.Items) != 3 {
		t.Fatalf("list %+v %+v with %d items, want resourceVersion 12, continue c and 3 items", list.TypeMeta, list.ListMeta, len(list.Items))
	}
	checkMemcached(t, list.Items[0])
	for i, raw := range []string{
		`{"kind":"Memcached","apiVersion":"cache.example.com/v1alpha1","spec":{"size":1}}`,
		`{"kind":"Memcached","apiVersion":"cache.example.com/v1alpha1"}`,
	} {
		o := list.Items[i+1]
		if o.Kind != "Memcached" || o.APIVersion != "cache.example.com/v1alpha1" || string(o.Raw) != raw {
			t.Errorf("an item sent without its kind: cached %+v %s, want the list's kind and %s", o.TypeMeta, o.Raw, raw)
		}
	}
	cp := list.DeepCopyObject().(*List)
	checkMemcached(t, cp.Items[0])
	if &cp.Items[0].managed[0] == &list.Items[0].managed[0] {
		t.Error("a copy of the list shares its objects' managedFields digests' room")
	}
	cp.Items[0].Finalizers[0] = "changed"
	if list.Items[0].Finalizers[0] != "cache.example.com/finalizer" {
		t.Error("a copy of the list shares its objects' metadata")
	}
}

// A watch is sent with its options, and its events decoded: an object
// into a Object, a bookmark too, with its annotation, and an ERROR
// event's Status into a metav1.Status, as the reflector reads them.
func TestObjectsWatchDecodesEachEvent(t *testing.T) {
	objects := objectsServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		wantRequest(t, r, http.MethodGet, "/apis/cache.example.com/v1alpha1/namespaces/ns/memcacheds", url.Values{
			"watch": {"true"}, "resourceVersion": {"11"}, "allowWatchBookmarks": {"true"},
			"sendInitialEvents": {"true"}, "resourceVersionMatch": {"NotOlderThan"}, "timeoutSeconds": {"300"},
		})
		w.Header().Set("Content-Type", "application/json")
		for _, e := range []string{
			`{"type":"ADDED","object":` + testMemcachedJSON + `}`,
			`{"type":"BOOKMARK","object":{"kind":"Memcached","apiVersion":"cache.example.com/v1alpha1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
			`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 11 (12)","reason":"Expired","code":410}}`,
		} {
			_, _ = io.WriteString(w, e+"\n")
		}
	})
	w, err := objects.Watch(t.Context(), metav1.ListOptions{
		ResourceVersion: "11", AllowWatchBookmarks: true, SendInitialEvents: ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, TimeoutSeconds: ptr.To[int64](300),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var events []watch.Event
	for e := range w.ResultChan() {
		events = append(events, e)
	}
	if len(events) != 3 {
		t.Fatalf("%d events, want 3: %v", len(events), events)
	}
	if o, ok := events[0].Object.(*Object); !ok || events[0].Type != watch.Added {
		t.Errorf("first event %s %T, want ADDED *Object", events[0].Type, events[0].Object)
	} else {
		checkMemcached(t, o)
	}
	if o, ok := events[1].Object.(*Object); !ok || events[1].Type != watch.Bookmark ||
		o.ResourceVersion != "12" || o.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("second event %s %#v, want a BOOKMARK at 12 that ends the initial events", events[1].Type, events[1].Object)
	}
	if err := apierrors.FromObject(events[2].Object); events[2].Type != watch.Error || !apierrors.IsResourceExpired(err) {
		t.Errorf("third event %s %#v, want an ERROR that the resource version expired", events[2].Type, events[2].Object)
	}
}

// An apply is sent as the dynamic client sends it, and its answer read for
// the object's resourceVersion; a refused one is the API server's Status
// error, with its details, which the controller reads.
func TestObjectsApplyReturnsTheResourceVersion(t *testing.T) {
	const body = `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m","uid":"u-1"},"status":{"readyReplicas":3}}`
	var refuse atomic.Bool
	objects := objectsServer(t, func(w http.ResponseWriter, r *http.Request, got []byte) {
		wantRequest(t, r, http.MethodPatch, "/apis/cache.example.com/v1alpha1/namespaces/ns/memcacheds/m/status",
			url.Values{"fieldManager": {"ctrl"}, "force": {"true"}})
		if ct := r.Header.Get("Content-Type"); ct != "application/apply-patch+yaml" || string(got) != body {
			t.Errorf("apply %s %s, want application/apply-patch+yaml %s", ct, got, body)
		}
		w.Header().Set("Content-Type", "application/json")
		if refuse.Load() {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the object has been modified","reason":"Conflict","details":{"name":"m","group":"cache.example.com","kind":"memcacheds"},"code":409}`)
			return
		}
		_, _ = io.WriteString(w, `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m","resourceVersion":"13"},"status":{"readyReplicas":3}}`)
	})
	opts := metav1.PatchOptions{FieldManager: "ctrl", Force: ptr.To(true)}
	rv, err := objects.Apply(t.Context(), "m", []byte(body), opts, "status")
	if err != nil || rv != "13" {
		t.Errorf("Apply = %q, %v; want 13", rv, err)
	}
	refuse.Store(true)
	_, err = objects.Apply(t.Context(), "m", []byte(body), opts, "status")
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) || status.Status().Details == nil || status.Status().Details.Name != "m" {
		t.Errorf("a refused Apply's error %v, want the API server's Conflict naming m", err)
	}
}

// What the API server would never send is an error, never a panic.
func TestCachedCodecRefusesWhatIsNotAnObject(t *testing.T) {
	for _, data := range []string{``, `[]`, `"m"`, `{"kind"}`, `{"kind":"Memcached"`, `{"kind":"Memcached",}`, `{"metadata":{"name":7}}`, `{"spec":}`, `{"a":"b\"}`} {
		if o, _, err := (cachedCodec{}).Decode([]byte(data), nil, nil); err == nil {
			t.Errorf("decoding %s = %#v, want an error", data, o)
		}
	}
	for _, data := range []string{`[]`, `{"metadata":[]}`, `{"metadata":{"resourceVersion":7}}`} {
		if _, _, err := (cachedCodec{}).Decode([]byte(data), nil, &writtenObject{}); err == nil {
			t.Errorf("decoding an apply's answer %s: no error, want one", data)
		}
	}
	if _, _, err := (watchEventCodec{}).Decode([]byte(`{"type":"ADDED","object":{}}`), nil, &metav1.Status{}); err == nil {
		t.Error("a watch event decoded into a Status, want an error")
	}
}
