package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
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
	rec := &events{}
	m := memcached()

	res, err := app.Reconciler{Kube: kc, Deployments: cached{kc}, Events: rec}.Reconcile(context.Background(), m)
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
	if !clustertest.ManagedBy(d.ManagedFields, app.Name, metav1.ManagedFieldsOperationApply, "") {
		t.Errorf("managed fields = %+v, want %s's Apply", d.ManagedFields, app.Name)
	}

	if res.After != 0 {
		t.Errorf("After = %v, want 0: a change to the Deployment reconciles it again", res.After)
	}
	available := condition(t, res, "Available")
	if available.Status != metav1.ConditionTrue || available.Reason != "DeploymentApplied" || available.ObservedGeneration != 2 {
		t.Errorf("Available = %+v, want True, DeploymentApplied, for generation 2", available)
	}
	want := kube.Event{
		Regarding: sessions,
		Related:   &corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "sessions", UID: d.UID},
		Type:      kube.Normal, Reason: "DeploymentCreated", Action: "Create", Note: "Created Deployment sessions",
	}
	if got := rec.recorded; len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("events = %+v, want one, %+v", got, want)
	}
}

// A Deployment that already has what the Reconciler would apply is read,
// and not written: a controller's restart, which reconciles every
// Memcached, writes nothing for those that are as they should be.
func TestReconcileDoesNotApplyADeploymentThatIsUpToDate(t *testing.T) {
	kc := kubefake.NewClientset()
	m := memcached()
	if _, err := (app.Reconciler{Kube: kc, Deployments: cached{kc}}).Reconcile(context.Background(), m); err != nil {
		t.Fatalf("the first Reconcile: %v", err)
	}
	// Its pods running, as the deployment controller would report them,
	// and a label of someone else's, which an apply would keep too.
	d, err := kc.AppsV1().Deployments("shop").Get(context.Background(), "sessions", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Labels["team"] = "storefront"
	if d, err = kc.AppsV1().Deployments("shop").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.Status.ReadyReplicas = 2
	if _, err := kc.AppsV1().Deployments("shop").UpdateStatus(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc.ClearActions()
	rec := &events{}

	res, err := app.Reconciler{Kube: kc, Deployments: cached{kc}, Events: rec}.Reconcile(context.Background(), m)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}

	if verbs := verbs(kc); len(verbs) != 0 {
		t.Errorf("requests = %q, want none: the Deployment is read from the cache, and is up to date", verbs)
	}
	if res.Status == nil || res.Status.ReadyReplicas != 2 {
		t.Errorf("status = %+v, want the ReadyReplicas the read Deployment has, 2", res.Status)
	}
	available := condition(t, res, "Available")
	if available.Status != metav1.ConditionTrue || available.Reason != "DeploymentApplied" {
		t.Errorf("Available = %+v, want True, DeploymentApplied", available)
	}
	if got := rec.recorded; len(got) != 0 {
		t.Errorf("events = %+v, want none: nothing was created", got)
	}
}

// A Deployment that differs from what the Reconciler would apply in any of
// its fields is applied again, and put back.
func TestReconcileAppliesADeploymentThatDiffers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(d *appsv1.Deployment)
	}{
		{"a hand-made scale", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) }},
		{"another image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "memcached:1.6.21" }},
		{"a renamed container", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "cache" }},
		{"a pod label changed", func(d *appsv1.Deployment) { d.Spec.Template.Labels["memcached"] = "carts" }},
		{"no owner", func(d *appsv1.Deployment) { d.OwnerReferences = nil }},
		{"another owner", func(d *appsv1.Deployment) { d.OwnerReferences[0].UID = "5f0c1d7e-0000-4000-8000-000000000000" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := kubefake.NewClientset()
			m := memcached()
			if _, err := (app.Reconciler{Kube: kc, Deployments: cached{kc}}).Reconcile(context.Background(), m); err != nil {
				t.Fatalf("the first Reconcile: %v", err)
			}
			d, err := kc.AppsV1().Deployments("shop").Get(context.Background(), "sessions", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tc.change(d)
			if _, err := kc.AppsV1().Deployments("shop").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			kc.ClearActions()
			rec := &events{}

			if _, err := (app.Reconciler{Kube: kc, Deployments: cached{kc}, Events: rec}).Reconcile(context.Background(), m); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}

			if verbs := verbs(kc); !slices.Equal(verbs, []string{"patch deployments"}) {
				t.Errorf("requests = %q, want the Deployment's apply only: it is read from the cache", verbs)
			}
			d, err = kc.AppsV1().Deployments("shop").Get(context.Background(), "sessions", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c := d.Spec.Template.Spec.Containers; *d.Spec.Replicas != 2 || c[len(c)-1].Image != m.Spec.Image ||
				d.Spec.Template.Labels["memcached"] != "sessions" || metav1.GetControllerOf(d) == nil {
				t.Errorf("the Deployment = %+v, want it put back", d.Spec)
			}
			if got := rec.recorded; len(got) != 1 || got[0].Reason != "DeploymentReapplied" || got[0].Related == nil || got[0].Related.Name != "sessions" {
				t.Errorf("events = %+v, want one, DeploymentReapplied, about the Deployment too: it was there already", got)
			}
		})
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
	rec := &events{}

	res, err := app.Reconciler{Kube: kc, Deployments: cached{kc}, Events: rec}.Reconcile(context.Background(), m)

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
	if got := rec.recorded; len(got) != 0 {
		t.Errorf("events = %+v, want none: nothing was created", got)
	}
}

func TestReconcileReportsAFailedGetAsAConditionAndAnError(t *testing.T) {
	kc := kubefake.NewClientset()
	// As kube.Reader.Get fails when the cache hasn't brought the
	// reconcile's own last write in time.
	unavailable := apierrors.NewServiceUnavailable("the cache hasn't brought this reconcile's own write")

	res, err := app.Reconciler{Kube: kc, Deployments: failing{unavailable}}.Reconcile(context.Background(), memcached())

	if !errors.Is(err, unavailable) {
		t.Errorf("Reconcile's error = %v, want the get's", err)
	}
	available := condition(t, res, "Available")
	if available.Status != metav1.ConditionUnknown || available.Reason != "GetFailed" {
		t.Errorf("Available = %+v, want Unknown, GetFailed", available)
	}
	if verbs := verbs(kc); len(verbs) != 0 {
		t.Errorf("requests = %q, want none: nothing to apply from", verbs)
	}
}

func TestFinalizeRecordsAnEvent(t *testing.T) {
	rec := &events{}

	if err := (app.Reconciler{Kube: kubefake.NewClientset(), Events: rec}).Finalize(context.Background(), memcached()); err != nil {
		t.Fatalf("Finalize: %v", err)
	}

	want := kube.Event{
		Regarding: sessions, Type: kube.Normal, Reason: "Finalized", Action: "Finalize",
		Note: "The Memcached is finalized; the garbage collector deletes its Deployment.",
	}
	if got := rec.recorded; len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("events = %+v, want %+v", got, want)
	}
}

// cached reads kc's Deployments as the controller's cache hands them to
// the Reconciler: without a request, and only what app.Deployment decodes
// (kube.ReadTrimmed keeps no more).
type cached struct{ kc *kubefake.Clientset }

func (c cached) Get(_ context.Context, namespace, name string) (app.Deployment, error) {
	var d app.Deployment
	obj, err := c.kc.Tracker().Get(app.Deployments.GVR, namespace, name)
	if err != nil {
		return d, err
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return d, err
	}
	err = json.Unmarshal(data, &d)
	return d, err
}

// failing is a cache of Deployments whose every read fails with err.
type failing struct{ err error }

func (f failing) Get(context.Context, string, string) (app.Deployment, error) {
	return app.Deployment{}, f.err
}

// events records the Events a Reconciler records, as a kube.Recorder
// would be handed them.
type events struct{ recorded []kube.Event }

func (e *events) Record(_ context.Context, ev kube.Event) { e.recorded = append(e.recorded, ev) }

// sessions is the reference to memcached() that its Events hold.
var sessions = corev1.ObjectReference{
	APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Namespace: "shop", Name: "sessions",
	UID: "0b5d6a2e-6f1c-4f6e-9b1a-3c2d1e0f9a8b",
}

// verbs are the requests made with kc, such as "get deployments".
func verbs(kc *kubefake.Clientset) []string {
	var got []string
	for _, a := range kc.Actions() {
		got = append(got, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return got
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
