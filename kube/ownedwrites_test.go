package kube

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// recorded is a writeRecorder of Deployments that keeps what it is told.
type recorded []string

func (r *recorded) owns(gr schema.GroupResource) bool { return gr == deploymentsGR }

func (r *recorded) recordWrite(gr schema.GroupResource, namespace, name, rv string) {
	*r = append(*r, gr.String()+" "+namespace+"/"+name+" "+rv)
}

// The transport records the resourceVersion of each write a reconcile's
// context carries a recorder for, whatever its verb, from a JSON answer or
// a protobuf one (client-go's clientsets ask for protobuf), and hands its
// caller the answer whole; a read, a write without a recorder, a write to
// a resource the recorder doesn't own, a refused write or an answer it
// can't read records nothing.
func TestTheTransportRecordsAReconcilesWrites(t *testing.T) {
	const jsonAnswer = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"default","name":"d","resourceVersion":"42"},"spec":{"replicas":1}}`
	var pb bytes.Buffer
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", ResourceVersion: "43", Labels: map[string]string{"app": "d"}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1))}}
	d.APIVersion, d.Kind = "apps/v1", "Deployment"
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(d, &pb); err != nil {
		t.Fatal(err)
	}
	answers := map[string]struct{ contentType, body string }{
		"d":        {"application/json", jsonAnswer},
		"refused":  {"application/json", `{"kind":"Status","metadata":{"resourceVersion":"44"}}`},
		"protobuf": {"application/vnd.kubernetes.protobuf", pb.String()},
		"garbled":  {"application/vnd.kubernetes.protobuf", "k8s\x00\x0a\xff"},
		"yaml":     {"application/yaml", "metadata: {name: d, resourceVersion: '45'}"},
	}
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
	defer srv.Close()
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
			ctx = recordingWrites(ctx, &rec)
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

// The event that brings a reconcile's own write to an owned object queues
// nothing, whether the write created it or changed it; any other version's
// event, another resource's, or one once the writes are forgotten, queues
// its owner.
func TestTheEventOfAReconcilesWriteToAnOwnedObjectQueuesNothing(t *testing.T) {
	owned := func(rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", ResourceVersion: rv,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "m", Controller: new(true)}}}}
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	configMaps := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name   string
		writes []string
		steps  func(w *ownedWrites, h func(event, rv string))
		queued int
	}{
		{"created by the reconcile", []string{"5"}, func(_ *ownedWrites, h func(string, string)) { h("add", "5") }, 0},
		{"changed by the reconcile", []string{"5"}, func(_ *ownedWrites, h func(string, string)) { h("update", "5") }, 0},
		{"changed twice by the reconcile", []string{"5", "6"}, func(_ *ownedWrites, h func(string, string)) {
			h("update", "5")
			h("update", "6")
		}, 0},
		{"someone else's change, then the reconcile's", []string{"5"}, func(_ *ownedWrites, h func(string, string)) {
			h("update", "4")
			h("update", "5")
		}, 1},
		{"the reconcile's change, then someone else's", []string{"5"}, func(_ *ownedWrites, h func(string, string)) {
			h("update", "5")
			h("update", "6")
		}, 1},
		{"a write to a resource it doesn't own", nil, func(w *ownedWrites, h func(string, string)) {
			w.recordWrite(configMaps, "default", "d", "5")
			h("update", "5")
		}, 1},
		{"its deletion", []string{"5"}, func(_ *ownedWrites, h func(string, string)) { h("delete", "5") }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &countingQueue{queue: newQueue("test", nil)}
			defer q.ShutDown()
			sh := testShard(q)
			c := &Controller{kind: "Memcached", group: "cache.example.com", ownWrites: newOwnedWrites([]schema.GroupVersionResource{deployments})}
			for _, rv := range tc.writes {
				c.ownWrites.recordWrite(deploymentsGR, "default", "d", rv)
			}
			h := c.ownerKeys(sh, deploymentsGR)
			tc.steps(c.ownWrites, func(event, rv string) {
				switch event {
				case "add":
					h.OnAdd(owned(rv), false)
				case "update":
					h.OnUpdate(owned("1"), owned(rv))
				case "delete":
					h.OnDelete(owned(rv))
				}
			})
			if got := len(q.added); got != tc.queued {
				t.Errorf("owners queued = %d, want %d", got, tc.queued)
			}
		})
	}
}
