package kube

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
)

var deploymentsGR = schema.GroupResource{Group: "apps", Resource: "deployments"}

// storedDeployment is the JSON the API server answers for Deployment
// default/d at resourceVersion rv, with the managedFields entries given as
// manager, operation, subresource and time, each owning fields fields.
func storedDeployment(rv string, replicas int, entries ...metav1.ManagedFieldsEntry) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d", UID: "u-d", ResourceVersion: rv,
		ManagedFields:   entries,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "m", UID: "u-m", Controller: new(true)}}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(replicas))}}
	d.APIVersion, d.Kind = "apps/v1", "Deployment"
	return d
}

// managedEntry is a managedFields entry of manager's, at second sec.
func managedEntry(manager string, op metav1.ManagedFieldsOperationType, subresource string, sec int64, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "apps/v1", Subresource: subresource,
		Time: new(metav1.NewTime(time.Unix(sec, 0))), FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

// applyAnswered applies Deployment default/d with a reconcile's context,
// through a Client's transport, to a test server that answers code and
// answer, and returns the Controller whose ownWrites recorded it.
func applyAnswered(t *testing.T, code int, answer *appsv1.Deployment) *control.Controller {
	t.Helper()
	body, err := json.Marshal(answer)
	if err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPatch || r.URL.Query().Get("fieldManager") != "memcached" {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write(body)
	})
	client := newTestClient(t, &humus.Setup{Host: humustest.NewHost().Host()}, Connection{
		Server: "localhost:" + srv.Port(),
		TLS:    &tls.Config{RootCAs: srv.pki.roots},
	})
	cs, err := kubernetes.NewForConfig(client.Config())
	if err != nil {
		t.Fatal(err)
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	c := &control.Controller{Kind: "Memcached", Group: "cache.example.com", OwnWrites: control.NewOwnedWrites([]schema.GroupVersionResource{deployments})}
	ctx := control.RecordingWrites(t.Context(), c.OwnWrites)
	apply := appsv1apply.Deployment("d", "default").WithSpec(appsv1apply.DeploymentSpec().WithReplicas(1))
	got, err := cs.AppsV1().Deployments("default").Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "memcached", Force: true})
	if err != nil {
		t.Fatalf("the apply: %v", err)
	}
	if got.ResourceVersion != answer.ResourceVersion {
		t.Fatalf("the apply's answer has resourceVersion %q, want %q", got.ResourceVersion, answer.ResourceVersion)
	}
	return c
}

// noOpCase is an answer of the API server's to a reconcile's apply, and
// the informer's event of its version after it.
type noOpCase struct {
	name     string
	code     int                // the API server's answer to the apply
	answer   *appsv1.Deployment // and its object
	old, new *appsv1.Deployment // the informer's event after the answer; old nil: an add
	queued   int
}

// noOpCases are TestAWriteThatChangesNothingRecordsNoVersion's cases.
func noOpCases() []noOpCase {
	const (
		specFields   = `{"f:spec":{"f:replicas":{}}}`
		statusFields = `{"f:status":{"f:replicas":{}}}`
	)
	ours := func(sec int64) metav1.ManagedFieldsEntry {
		return managedEntry("memcached", metav1.ManagedFieldsOperationApply, "", sec, specFields)
	}
	kcm := func(sec int64) metav1.ManagedFieldsEntry {
		return managedEntry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", sec, statusFields)
	}
	return []noOpCase{
		{
			// Another client wrote version 5 (the status); the informer
			// hasn't seen it yet when the apply, which changes nothing, is
			// answered with it.
			name:   "a no-op answered with another client's version",
			code:   http.StatusOK,
			answer: storedDeployment("5", 1, ours(100), kcm(200)),
			old:    storedDeployment("4", 1, ours(100), kcm(150)),
			new:    storedDeployment("5", 1, ours(100), kcm(200)),
			queued: 1,
		},
		{
			name:   "a change",
			code:   http.StatusOK,
			answer: storedDeployment("6", 2, ours(300), kcm(200)),
			old:    storedDeployment("5", 1, ours(100), kcm(200)),
			new:    storedDeployment("6", 2, ours(300), kcm(200)),
			queued: 0,
		},
		{
			// Server-side apply that takes a field another manager set to
			// the same value changes only managedFields, and not its time.
			name:   "a change of the fields owned alone",
			code:   http.StatusOK,
			answer: storedDeployment("6", 1, managedEntry("memcached", metav1.ManagedFieldsOperationApply, "", 100, `{"f:spec":{"f:paused":{},"f:replicas":{}}}`), kcm(200)),
			old:    storedDeployment("5", 1, ours(100), kcm(200)),
			new:    storedDeployment("6", 1, managedEntry("memcached", metav1.ManagedFieldsOperationApply, "", 100, `{"f:spec":{"f:paused":{},"f:replicas":{}}}`), kcm(200)),
			queued: 0,
		},
		{
			// A relist folded another client's status write into the
			// event of the reconcile's change: the other client's entry
			// changed too.
			name:   "a change with another client's folded into its event",
			code:   http.StatusOK,
			answer: storedDeployment("6", 2, ours(300), kcm(200)),
			old:    storedDeployment("4", 1, ours(100), kcm(150)),
			new:    storedDeployment("6", 2, ours(300), kcm(200)),
			queued: 1,
		},
		{
			name:   "a creation",
			code:   http.StatusCreated,
			answer: storedDeployment("7", 1, ours(100)),
			new:    storedDeployment("7", 1, ours(100)),
			queued: 0,
		},
		{
			// An apply answered 200 for an object the informer hadn't seen:
			// it can't be told from another's creation.
			name:   "a no-op of an object the cache hasn't seen",
			code:   http.StatusOK,
			answer: storedDeployment("7", 1, ours(100)),
			new:    storedDeployment("7", 1, ours(100)),
			queued: 1,
		},
	}
}

// A reconcile's write that the API server answers without writing (a
// no-op: kube-apiserver's store writes nothing when the bytes are equal,
// and answers the stored object) is no write of the reconcile's: its
// answer's resourceVersion can be one another client wrote, whose event
// must still queue the owner. Each case drives the answer through the
// Client's transport, as the API server gives it, then the informer's
// event of that version.
func TestAWriteThatChangesNothingRecordsNoVersion(t *testing.T) {
	for _, tc := range noOpCases() {
		t.Run(tc.name, func(t *testing.T) {
			c := applyAnswered(t, tc.code, tc.answer)
			q := &countingQueue{Queue: control.NewQueue("test", time.Minute, nil)}
			defer q.ShutDown()
			h := c.OwnerKeys(testWork(q), deploymentsGR)
			cached := func(d *appsv1.Deployment) any {
				md := &metav1.PartialObjectMetadata{TypeMeta: d.TypeMeta, ObjectMeta: d.ObjectMeta}
				obj, err := cache.OwnedMetadata(md)
				if err != nil {
					t.Fatal(err)
				}
				return obj
			}
			if tc.old == nil {
				h.OnAdd(cached(tc.new), false)
			} else {
				h.OnUpdate(cached(tc.old), cached(tc.new))
			}
			if n := len(q.added); n != tc.queued {
				t.Errorf("owners queued by the event of version %s = %d, want %d", tc.new.ResourceVersion, n, tc.queued)
			}
		})
	}
}
