package app_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/example/internal/apptest"
	"github.com/z5labs/humus/kube/example/memcached/app"
)

// A Reconciler is a function of a plain Object: a test builds one, and
// reads what it applied back from client-go's fake clientset, whose
// field-managed tracker applies typed objects as the API server does.

func memcached() kube.Object[app.MemcachedSpec, app.MemcachedStatus] {
	return kube.Object[app.MemcachedSpec, app.MemcachedStatus]{
		TypeMeta: metav1.TypeMeta{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "sessions", UID: "0b5d6a2e-6f1c-4f6e-9b1a-3c2d1e0f9a8b", Generation: 2,
		},
		Spec: app.MemcachedSpec{Size: 2, Image: "memcached:1.6.26-alpine3.19"},
	}
}

func TestReconcileAppliesADeploymentTheMemcachedControls(t *testing.T) {
	kc := kubefake.NewClientset()
	m := memcached()

	res, err := app.Reconciler{Kube: kc}.Reconcile(context.Background(), m)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}

	d, err := kc.AppsV1().Deployments("shop").Get(context.Background(), "sessions", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Deployment: %v", err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	if c := d.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != m.Spec.Image {
		t.Errorf("containers = %+v, want one running %s", c, m.Spec.Image)
	}
	owner := metav1.GetControllerOf(d)
	if owner == nil || owner.Kind != "Memcached" || owner.APIVersion != "cache.example.com/v1alpha1" ||
		owner.Name != "sessions" || owner.UID != m.UID || owner.BlockOwnerDeletion == nil || !*owner.BlockOwnerDeletion {
		t.Errorf("controller owner reference = %+v, want the Memcached's, blocking its deletion", owner)
	}
	if !apptest.ManagedBy(d.ManagedFields, app.Name, metav1.ManagedFieldsOperationApply, "") {
		t.Errorf("managed fields = %+v, want %s's Apply", d.ManagedFields, app.Name)
	}

	if res.After != 0 {
		t.Errorf("After = %v, want 0: a change to the Deployment reconciles it again", res.After)
	}
	available := condition(t, res, "Available")
	if available.Status != metav1.ConditionTrue || available.Reason != "DeploymentApplied" || available.ObservedGeneration != 2 {
		t.Errorf("Available = %+v, want True, DeploymentApplied, for generation 2", available)
	}
}

func TestReconcileReportsAFailedApplyAsAConditionAndAnError(t *testing.T) {
	kc := kubefake.NewClientset()
	refused := errors.New("admission webhook denied the request")
	kc.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, refused
	})
	m := memcached()
	m.Status.Conditions = []metav1.Condition{{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "AsExpected"}}

	res, err := app.Reconciler{Kube: kc}.Reconcile(context.Background(), m)

	if !errors.Is(err, refused) {
		t.Errorf("Reconcile's error = %v, want the apply's", err)
	}
	available := condition(t, res, "Available")
	if available.Status != metav1.ConditionUnknown || available.Reason != "ApplyFailed" || available.Message != refused.Error() {
		t.Errorf("Available = %+v, want Unknown, ApplyFailed, with the apply's error", available)
	}
	if meta.FindStatusCondition(res.Status.Conditions, "Degraded") == nil {
		t.Errorf("conditions = %+v: the other conditions are gone", res.Status.Conditions)
	}
}

func TestFinalizeRecordsAnEvent(t *testing.T) {
	kc := kubefake.NewClientset()
	m := memcached()

	if err := (app.Reconciler{Kube: kc, Instance: "memcached-controller-7d9f-x2k4q"}).Finalize(context.Background(), m); err != nil {
		t.Fatalf("Finalize: %v", err)
	}

	events, err := kc.EventsV1().Events("shop").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 {
		t.Fatalf("events = %+v, want one", events.Items)
	}
	e := events.Items[0]
	if e.Reason != "Finalized" || e.Regarding.UID != m.UID || e.ReportingController != app.Name ||
		e.ReportingInstance != "memcached-controller-7d9f-x2k4q" || e.EventTime.IsZero() {
		t.Errorf("event = %+v, want Finalized, about the Memcached, from this replica, with its time", e)
	}
}

// A namespace being deleted takes no new Event: Finalize then records
// none and returns nil, or the Memcached would keep its namespace forever.
// Any other refusal is an error, which keeps the finalizer and retries.
func TestFinalizeInANamespaceBeingDeletedRecordsNoEvent(t *testing.T) {
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "sessions.1",
		errors.New("unable to create new content in namespace shop because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace shop is being terminated"}}
	for _, tc := range []struct {
		name    string
		refusal error
		wantErr bool
	}{
		{"namespace terminating", terminating, false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "sessions.1", errors.New("RBAC")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := kubefake.NewClientset()
			kc.PrependReactor("create", "events", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.refusal
			})
			err := app.Reconciler{Kube: kc, Instance: "memcached-controller-7d9f-x2k4q"}.Finalize(context.Background(), memcached())
			if (err != nil) != tc.wantErr {
				t.Errorf("Finalize = %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}

func condition(t *testing.T, res kube.Result[app.MemcachedStatus], typ string) metav1.Condition {
	t.Helper()
	if res.Status == nil {
		t.Fatal("Result.Status is nil, want the status with its conditions")
	}
	c := meta.FindStatusCondition(res.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("conditions = %+v, want one of type %s", res.Status.Conditions, typ)
	}
	return *c
}
