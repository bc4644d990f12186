package kube_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
)

var namespaces = kube.Kind[corev1.Namespace]{GVR: corev1.SchemeGroupVersion.WithResource("namespaces"), Kind: "Namespace", Scope: kube.Cluster}

var configMaps = kube.Kind[corev1.ConfigMap]{GVR: corev1.SchemeGroupVersion.WithResource("configmaps"), Kind: "ConfigMap", Scope: kube.Namespaced}

// rbacApp is a Setup, a Client and Settings for a controller named name
// whose pods run in memcached-system.
func rbacApp(t *testing.T, name string) (*humus.Setup, *kube.Client, kube.Settings) {
	t.Helper()
	s := &humus.Setup{Host: humustest.NewHost().Host()}
	client, err := kube.NewClient(s, kube.Connection{Server: "10.96.0.1:443", TLS: &tls.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	set := kube.DefaultSettings()
	set.Name = name
	set.LeaderElection.Namespace = "memcached-system"
	set.LeaderElection.Identity = "replica-0"
	return s, client, set
}

func noopKind[T any](context.Context, T) (time.Duration, error) { return 0, nil }

// A controller of one namespace needs a Role there, and nothing
// cluster-wide: its Recorder's Events too. A Kind without Finalize is
// never patched, and has no status to apply.
func TestMarshalRBACOfOneNamespaceIsRolesOnly(t *testing.T) {
	s, client, set := rbacApp(t, "copier")
	set.Namespace = "shop"
	cms := kube.Read(client, configMaps, kube.Selector{Namespace: "shop"})
	ctrl, err := kube.NewKindController(s, client, set, configMaps, kube.KindReconcilerFunc[corev1.ConfigMap](noopKind[corev1.ConfigMap]),
		kube.Reads(cms),
		kube.Writes(configMaps.GVR, kube.Apply, kube.Delete),
	)
	if err != nil {
		t.Fatal(err)
	}
	events, err := kube.NewRecorder(s, client, "copier", "replica-0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := kube.MarshalRBAC("copier", "memcached-system", ctrl, events)
	if err != nil {
		t.Fatal(err)
	}
	y := string(got)
	if strings.Contains(y, "ClusterRole") {
		t.Errorf("a controller of one namespace got a ClusterRole:\n%s", y)
	}
	for _, want := range []string{
		"kind: Role\nmetadata:\n  name: copier\n  namespace: shop\nrules:\n",
		"# list, watch: controller copier's resource, listed and watched\n" +
			"# list, watch: kube.Reads(a Reader of configmaps)\n" +
			"# create, patch, delete: kube.Writes(configmaps, kube.Apply, kube.Delete)\n" +
			"- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [list, watch, create, patch, delete]\n",
		"# create, patch: kube.Recorder, its Events and their series\n- apiGroups: [events.k8s.io]\n",
		"kind: RoleBinding\nmetadata:\n  name: copier\n  namespace: shop\n",
		"kind: Role\nmetadata:\n  name: copier\n  namespace: memcached-system\nrules:\n",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("the manifest has no\n%s\nin\n%s", want, y)
		}
	}
	if strings.Contains(y, "configmaps/status") {
		t.Errorf("a Kind's controller was granted its status:\n%s", y)
	}
}

// A sharded controller's Lease rule names the shards' Leases, and a
// Service holding the controller (a Services method, as
// webhook.Service.Before's has) is looked into.
func TestMarshalRBACOfShardsThroughAServiceHoldingThem(t *testing.T) {
	s, client, set := rbacApp(t, "namespaces")
	set.Shards = 4
	ctrl, err := kube.NewKindController(s, client, set, namespaces, kube.KindReconcilerFunc[corev1.Namespace](noopKind[corev1.Namespace]))
	if err != nil {
		t.Fatal(err)
	}
	got, err := kube.MarshalRBAC("namespaces", "memcached-system", holding{ctrl})
	if err != nil {
		t.Fatal(err)
	}
	y := string(got)
	for _, want := range []string{
		"# list, watch: controller namespaces's resource, listed and watched\n- apiGroups: [\"\"]\n  resources: [namespaces]\n  verbs: [list, watch]\n",
		"# get, create, update: controller namespaces's shards' Leases namespaces-0-of-4 to namespaces-3-of-4, taken and renewed\n",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("the manifest has no\n%s\nin\n%s", want, y)
		}
	}
}

// holding is a Service that holds others, as webhook.Service.Before's
// does.
type holding []humus.Service

func (h holding) Services() []humus.Service    { return h }
func (holding) Serve(context.Context) error    { return nil }
func (holding) Shutdown(context.Context) error { return nil }

func TestMarshalRBACAndWritesNameEveryMistake(t *testing.T) {
	s, client, set := rbacApp(t, "copier")
	_, err := kube.NewKindController(s, client, set, configMaps, kube.KindReconcilerFunc[corev1.ConfigMap](noopKind[corev1.ConfigMap]),
		kube.Writes(configMaps.GVR),
		kube.Writes(schema.GroupVersionResource{Resource: "secrets"}, "get"),
	)
	for _, want := range []string{
		"kube: Writes(/v1, Resource=configmaps): no Write is given: Apply, Create, Update, Patch, Delete or DeleteCollection",
		"kube: Writes(/, Resource=secrets): the GVR has no Version",
		`"get" is not a Write`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewKindController: %v, want an error naming %q", err, want)
		}
	}
	_, err = kube.MarshalRBAC("Copier", "", holding{})
	for _, want := range []string{
		`kube: MarshalRBAC: the ServiceAccount "Copier"`,
		`kube: MarshalRBAC: the namespace ""`,
		"kube: MarshalRBAC: the Services hold no Controller and no Recorder",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("MarshalRBAC: %v, want an error naming %q", err, want)
		}
	}
}
