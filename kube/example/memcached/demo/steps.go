package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/memcached/app"
)

// The demo's steps, in the order run takes them. Each tells what it does
// with term.step, checks that it happened against the API server within
// its time limit, and tells what happened with term.say.

// startControlPlane starts the control plane in the demo's folder and
// connects to it as its admin.
func (d *demo) startControlPlane(ctx context.Context) error {
	d.term.step("Starting a control plane of its own: etcd, kube-apiserver and kube-controller-manager, " +
		"built from Kubernetes' source if they are missing, into the folder HUMUS_CONTROLPLANE names (make sets .bin/controlplane) or your user cache folder (a cold build takes 13 to 18 minutes on two cores).")
	c, err := clustertest.Launch(ctx, d.dir, d.term.prefixed("    "))
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	d.c = c
	d.term.say("kube-apiserver is ready at https://%s. It has no scheduler and no kubelet, so no pod ever runs: "+
		"what you see is what the controller writes, and what the API server and the garbage collector do with it.", c.Server())
	if d.kc, err = kubernetes.NewForConfig(c.AdminConfig()); err != nil {
		return err
	}
	if d.dyn, err = dynamic.NewForConfig(c.AdminConfig()); err != nil {
		return err
	}
	d.memcacheds = d.dyn.Resource(app.Memcached.GVR()).Namespace(ns)
	d.deployments = d.kc.AppsV1().Deployments(ns)
	d.leases = d.kc.CoordinationV1().Leases(ns)
	return nil
}

// applyCRD applies the Memcached CRD and waits until memcacheds are
// served.
func (d *demo) applyCRD(ctx context.Context) error {
	d.term.step("Applying the Memcached CRD, %s.", crdFile)
	crd, err := readYAML(filepath.Join(d.root, crdFile))
	if err != nil {
		return err
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := d.dyn.Resource(crdGVR).Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: manager, Force: true}); err != nil {
		return fmt.Errorf("applying the CRD: %w", err)
	}
	err = await(ctx, d.term, crdTimeout, "the CRD to be established and memcacheds served", func(ctx context.Context) error {
		_, err := d.memcacheds.List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	if err != nil {
		return err
	}
	d.term.say("The API server serves %s now.", app.Memcached.GVR())
	return nil
}

// awaitLeading waits until the controller answers ready, its caches
// synced, and holds its Lease.
func (d *demo) awaitLeading(ctx context.Context) error {
	err := await(ctx, d.term, readyTimeout, "the controller's /readyz to answer ok", func(ctx context.Context) error {
		if err := d.ctrl.running(); err != nil {
			return permanent{err}
		}
		return get(ctx, "http://"+d.probes+"/readyz")
	})
	if err != nil {
		return err
	}
	err = await(ctx, d.term, stepTimeout, "the controller to hold its Lease", func(ctx context.Context) error {
		l, err := d.leases.Get(ctx, app.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := l.Spec.HolderIdentity; h == nil || *h != podName {
			return fmt.Errorf("the Lease's holder is %q", deref(h))
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.term.say("Its caches have synced (/readyz says ok), and it leads: it holds the Lease %s/%s.", ns, app.Name)
	return nil
}

// applySample applies the sample Memcached and waits for the Deployment
// the controller makes of it.
func (d *demo) applySample(ctx context.Context) error {
	d.term.step("Applying the sample Memcached, %s: size 2, and no image, which the CRD's default fills in.", sampleFile)
	sample, err := readYAML(filepath.Join(d.root, sampleFile))
	if err != nil {
		return err
	}
	d.name = sample.GetName()
	applied, err := d.memcacheds.Apply(ctx, d.name, sample, metav1.ApplyOptions{FieldManager: manager, Force: true})
	if err != nil {
		return fmt.Errorf("applying the sample: %w", err)
	}
	d.uid = applied.GetUID()
	return await(ctx, d.term, stepTimeout, "a Deployment the Memcached controls", func(ctx context.Context) error {
		dep, err := d.deployments.Get(ctx, d.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		owner := metav1.GetControllerOf(dep)
		if owner == nil || owner.UID != d.uid || owner.Kind != "Memcached" {
			return fmt.Errorf("the Deployment's controller owner reference is %+v, want the Memcached %s", owner, d.uid)
		}
		if r := dep.Spec.Replicas; r == nil || *r != 2 {
			return fmt.Errorf("the Deployment has %v replicas, want 2", r)
		}
		d.term.say("The controller applied Deployment %s/%s: %d replicas of %s. Its controller owner reference is the Memcached "+
			"(%s %s, uid %s), so a change to it reconciles the Memcached, and the garbage collector deletes it with the Memcached. "+
			"It stays at 0 of 2 ready: no pod runs here.",
			ns, d.name, *dep.Spec.Replicas, dep.Spec.Template.Spec.Containers[0].Image, owner.Kind, owner.Name, owner.UID)
		return nil
	})
}

// awaitAvailable waits for the Memcached's status to say Available for
// its generation.
func (d *demo) awaitAvailable(ctx context.Context) error {
	return await(ctx, d.term, stepTimeout, "the Memcached's status to say Available", func(ctx context.Context) error {
		m, err := getMemcached(ctx, d.memcacheds, d.name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, "Available")
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != m.Generation {
			return fmt.Errorf("the conditions are %+v, want Available True for generation %d", m.Status.Conditions, m.Generation)
		}
		d.term.say("The Memcached's status says Available %s, reason %s, for its generation %d: the controller applied the status its "+
			"Reconciler returned. It also put its finalizer, %s, on the Memcached.", c.Status, c.Reason, m.Generation, strings.Join(m.Finalizers, ", "))
		return nil
	})
}

// scaleByHand scales the Deployment to 3 and waits for the controller
// to put it back to the Memcached's 2.
func (d *demo) scaleByHand(ctx context.Context) error {
	d.term.step("Scaling the Deployment to 3 by hand, through its scale subresource, as kubectl scale does. The Memcached says 2.")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := d.deployments.GetScale(ctx, d.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = 3
		_, err = d.deployments.UpdateScale(ctx, d.name, scale, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("scaling the Deployment: %w", err)
	}
	scaled := time.Now()
	err = await(ctx, d.term, undoTimeout, "the controller to put the Deployment back to 2 replicas", func(ctx context.Context) error {
		dep, err := d.deployments.Get(ctx, d.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r := dep.Spec.Replicas; r == nil || *r != 2 {
			return fmt.Errorf("the Deployment has %d replicas", deref(r))
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.term.say("Undone in %s: the change to a Deployment it owns woke the controller, which applied the Memcached's 2 again.",
		time.Since(scaled).Round(time.Millisecond))
	return nil
}

// deleteMemcached deletes the Memcached and waits until its finalizer
// has let it go.
func (d *demo) deleteMemcached(ctx context.Context) error {
	d.term.step("Deleting the Memcached. Its finalizer keeps it until the controller has run Finalize and removed it.")
	if err := d.memcacheds.Delete(ctx, d.name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the Memcached: %w", err)
	}
	err := await(ctx, d.term, stepTimeout, "the Memcached to be finalized and gone", func(ctx context.Context) error {
		_, err := d.memcacheds.Get(ctx, d.name, metav1.GetOptions{})
		return clustertest.Gone("the Memcached", err)
	})
	if err != nil {
		return err
	}
	d.term.say("The Memcached is gone: the controller ran Finalize and removed its finalizer, and only then could the API server delete it.")
	return nil
}

// tellFinalizedEvent tells of the Event the controller recorded about
// the Memcached's Finalize, or that there was none. The Events are
// written in the background, so one may come a moment later, or, if the
// controller can't write it, not at all: it is told of, not awaited, and
// this step never fails.
func (d *demo) tellFinalizedEvent(ctx context.Context) error {
	err := await(ctx, nil, eventsTimeout, "", func(ctx context.Context) error {
		events, err := d.kc.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.UID == d.uid && e.Reason == "Finalized" {
				d.term.say("The controller recorded an Event about it: %s %s, %q.", e.Type, e.Reason, e.Note)
				return nil
			}
		}
		return errors.New("no Event yet")
	})
	if err != nil {
		d.term.say("No Finalized Event about it within %s: the controller records its Events in the background, and may drop one it can't write.", eventsTimeout)
	}
	return nil
}

// awaitGarbageCollection waits for the garbage collector to delete the
// Deployment the Memcached owned.
func (d *demo) awaitGarbageCollection(ctx context.Context) error {
	d.term.step("Waiting for the garbage collector to delete the Deployment, which the Memcached owned. It learns of a new CRD's " +
		"resources at its next discovery, every 30s, so this can take 30 to 60 seconds.")
	err := awaitReminding(ctx, d.term, gcTimeout, "the garbage collector to delete the Deployment", func(ctx context.Context) error {
		_, err := d.deployments.Get(ctx, d.name, metav1.GetOptions{})
		return clustertest.Gone("the Deployment", err)
	})
	if err != nil {
		return err
	}
	d.term.say("The Deployment is gone.")
	return nil
}

// getMemcached is the Memcached named name, as the API server holds it.
func getMemcached(ctx context.Context, memcacheds dynamic.ResourceInterface, name string) (memcachedObject, error) {
	var m memcachedObject
	u, err := memcacheds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return m, err
	}
	return m, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
