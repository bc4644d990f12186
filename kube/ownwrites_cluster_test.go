package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
)

// racer is the deployer, which applies the Deployment on every reconcile,
// but for one reconcile, once the Memcached is annotated race: then
// another client writes the Deployment's status just before the apply,
// which changes nothing, so the API server answers it with the other
// client's version, which the informer hasn't brought yet.
type racer struct {
	deployer
	admin kubernetes.Interface
	raced chan struct{}
}

func (r *racer) Reconcile(ctx context.Context, m Object[cacheSpec, cacheStatus]) (Result[cacheStatus], error) {
	if m.Annotations["race"] == "1" {
		select {
		case <-r.raced:
		default:
			status := []byte(`{"status":{"observedGeneration":1,"unavailableReplicas":7}}`)
			if _, err := r.admin.AppsV1().Deployments(m.Namespace).Patch(context.WithoutCancel(ctx), m.Name, types.MergePatchType, status,
				metav1.PatchOptions{FieldManager: "another-client"}, "status"); err != nil {
				return Result[cacheStatus]{}, err
			}
			close(r.raced)
		}
	}
	return r.deployer.Reconcile(ctx, m)
}

// A Reconciler's apply that changes nothing is answered with the stored
// Deployment, at the version another client's status write made just
// before: that write's event still reconciles the owner, which would
// otherwise keep what it read before it (issue 22, point 2). Before the
// fix, the answer's version was recorded as the reconcile's own, and the
// owner was reconciled no more.
func TestClusterANoOpApplyDoesNotSwallowAnotherClientsChange(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c, clusterCaches)
	gvr := clusterCaches.GVR()
	ns := c.Namespace(t)
	token := c.ServiceAccount(t, ns, "memcached-controller", controllerRBAC(gvr.Group, gvr.Resource, ns)...)
	setup, client := clientAs(t, c, humustest.NewTelemetry(), token)
	adminKube := kubernetes.NewForConfigOrDie(c.AdminConfig())
	rec := &racer{deployer: deployer{kube: kubernetes.NewForConfigOrDie(client.Config())}, admin: adminKube, raced: make(chan struct{})}
	s := testSettings()
	s.Namespace = ns
	s.LeaderElection.Namespace = ns
	ctrl, err := NewController(setup, client, s, clusterCaches, rec, Owns(deployments))
	if err != nil {
		t.Fatal(err)
	}
	stop := served(t, ctrl)
	admin := dynamic.NewForConfigOrDie(c.AdminConfig())
	createCache(t, admin, gvr, ns, "m", 2)
	clustertest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		return readyReplicasAre(ctx, admin, ns, "m", 2)
	})
	time.Sleep(2 * time.Second) // a second reconcile would show
	if got := rec.calls.Get("m"); got != 1 {
		t.Fatalf("reconciles before the race = %d, want 1: the Deployment's creation is the reconcile's own", got)
	}

	annotate := []byte(`{"metadata":{"annotations":{"race":"1"}}}`)
	if _, err := admin.Resource(gvr).Namespace(ns).Patch(t.Context(), "m", types.MergePatchType, annotate, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.raced:
	case <-time.After(10 * time.Second):
		t.Fatal("the annotation wasn't reconciled")
	}
	// The race's reconcile, then the one the other client's status queues.
	clustertest.Eventually(t, 5*time.Second, func(context.Context) error {
		if got := rec.calls.Get("m"); got < 3 {
			return fmt.Errorf("reconciles = %d, want 3: the race's, and one for the other client's status of the Deployment", got)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if got := rec.calls.Get("m"); got != 3 {
		t.Errorf("reconciles = %d, want 3: the last apply changed nothing, and nothing else changed", got)
	}
	if err := stop(); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}
