package kube_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
)

// The rights an App needs are derived from what its controllers declare:
// its resource, the finalizer, the status, what it owns and reads, and,
// with Writes, what its Reconciler writes itself. A golden test writes
// them to deploy/rbac.yaml.
func ExampleMarshalRBAC() {
	s := &humus.Setup{Host: humustest.NewHost().Host()} // Init's Setup
	client, err := kube.NewClient(s, kube.Connection{Server: "10.96.0.1:443", TLS: &tls.Config{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	settings := kube.DefaultSettings()
	settings.Name = "memcached-controller"
	settings.LeaderElection.Namespace = "memcached-system" // the pods'
	settings.LeaderElection.Identity = "memcached-controller-0"

	deployments := appsv1.SchemeGroupVersion.WithResource("deployments")
	reconcile := kube.ReconcilerFunc[MemcachedSpec, MemcachedStatus](func(context.Context, kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Result[MemcachedStatus], error) {
		return kube.Result[MemcachedStatus]{}, nil // applies the Deployment
	})
	ctrl, err := kube.NewController(s, client, settings, Memcached, reconcile,
		kube.Owns(deployments),
		kube.Writes(deployments, kube.Apply),
		kube.Finalize("cache.example.com/finalizer", func(context.Context, kube.Object[MemcachedSpec, MemcachedStatus]) error { return nil }),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	events, err := kube.NewRecorder(s, client, "memcached-controller", "memcached-controller-0")
	if err != nil {
		fmt.Println(err)
		return
	}

	yaml, err := kube.MarshalRBAC("memcached-controller", "memcached-system", ctrl, events)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The ServiceAccount, the ClusterRole and its binding, then the Role
	// of the Lease, in memcached-system, and its binding: the second.
	fmt.Print(strings.Split(string(yaml), "---\n")[1])
	// Output:
	// apiVersion: rbac.authorization.k8s.io/v1
	// kind: ClusterRole
	// metadata:
	//   name: memcached-controller
	// rules:
	// # list, watch: controller memcached-controller's resource, listed and watched
	// # patch: kube.Finalize("cache.example.com/finalizer"), its finalizer applied
	// - apiGroups: [cache.example.com]
	//   resources: [memcacheds]
	//   verbs: [list, watch, patch]
	// # patch: controller memcached-controller's status, applied
	// - apiGroups: [cache.example.com]
	//   resources: [memcacheds/status]
	//   verbs: [patch]
	// # list, watch: kube.Owns(deployments.apps)
	// # create, patch: kube.Writes(deployments.apps, kube.Apply)
	// - apiGroups: [apps]
	//   resources: [deployments]
	//   verbs: [list, watch, create, patch]
	// # create, patch: kube.Recorder, its Events and their series
	// - apiGroups: [events.k8s.io]
	//   resources: [events]
	//   verbs: [create, patch]
}
