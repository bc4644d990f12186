package kube

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/control"
)

// Two controllers in one App, on one Client: a Website's and a
// ConfigMap's, each failing to reconcile its object team-a/app-settings,
// the Website's reading ConfigMaps through the Client's shared informer.
// Each record a controller writes, its own and client-go's, names the
// controller and its resource; the shared informer's name its resource.
func TestTwoControllersRecordsNameTheirControllerAndResource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, siteKinds,
			siteObject("team-a", "app-settings", "c1"),
			configMapObject("team-a", "app-settings", "one", nil),
			configMapObject("team-a", "c1", "two", nil),
		)
		client := testClient(t, fakeSetup(tel))
		cms := Read(client, configMapKind, Selector{})
		web, mirror := testSettings(), testSettings()
		web.Name, mirror.Name = "website-controller", "mirror-controller"
		web.RetryBaseDelay, mirror.RetryBaseDelay = time.Second, time.Second

		siteFails := ReconcilerFunc[siteSpec, siteStatus](func(ctx context.Context, w website) (Result[siteStatus], error) {
			return Result[siteStatus]{}, errors.New("the content can't be served")
		})
		setup := fakeSetup(tel)
		sc, err := NewController(setup, client, web, sites, siteFails, Reads(cms))
		sc = built(t, f, sc, err)
		mirrorFails := KindReconcilerFunc[corev1.ConfigMap](func(ctx context.Context, cm corev1.ConfigMap) (time.Duration, error) {
			return 0, errors.New("the namespace team-b isn't found")
		})
		mc, err := NewKindController(setup, client, mirror, configMapKind, mirrorFails)
		mc = built(t, f, mc, err)
		stopSites, stopMirror := served(t, sc), served(t, mc)
		settle(10 * time.Second)
		if err := stopSites(); err != nil {
			t.Errorf("the Website controller's Serve = %v, want nil", err)
		}
		if err := stopMirror(); err != nil {
			t.Errorf("the ConfigMap controller's Serve = %v, want nil", err)
		}

		checkRecordsNameTheirControllerAndResource(t, tel, map[string]string{
			"website-controller": "websites.web.example.com",
			"mirror-controller":  "configmaps",
		})
	})
}

// checkRecordsNameTheirControllerAndResource checks that every record of
// tel names a resource: a controller's record, its own and client-go's,
// names the controller and its resource, in resources, and tells its
// failures of team-a/app-settings apart from the other's; the shared
// informer of ConfigMaps, which the Website controller started, names
// ConfigMaps and no controller.
func checkRecordsNameTheirControllerAndResource(t *testing.T, tel *humustest.Telemetry, resources map[string]string) {
	t.Helper()
	byController := map[string]map[string]int{} // a controller's records by body
	var shared []string
	for _, r := range tel.Records() {
		attrs, body := recordAttrs(r), r.Body().AsString()
		name, ok := attrs[control.AttrController]
		if !ok {
			if attrs[control.AttrResource] != "configmaps" {
				t.Errorf("the record %q %v names no controller, and isn't the shared informer's of configmaps", body, attrs)
			}
			shared = append(shared, body)
			continue
		}
		if want, known := resources[name]; !known || attrs[control.AttrResource] != want {
			t.Errorf("the record %q of %s names the resource %q, want %q", body, name, attrs[control.AttrResource], want)
		}
		if body == "reconcile failed" && (attrs[control.AttrNamespace] != "team-a" || attrs[control.AttrObjectName] != "app-settings") {
			continue
		}
		if byController[name] == nil {
			byController[name] = map[string]int{}
		}
		byController[name][body]++
	}
	for name := range resources {
		for _, body := range []string{
			"Waiting for caches to sync", "Caches are synced", // the cache sync's
			"Attempting to acquire leader lease...", "Successfully acquired lease", // leader election's
			"Caches populated", // the reflector's, of its own resource
			"reconcile failed", // its own, of team-a/app-settings
		} {
			if byController[name][body] == 0 {
				t.Errorf("no record %q names %s; its records: %v", body, name, byController[name])
			}
		}
	}
	if !slices.Contains(shared, "Caches populated") {
		t.Errorf("the shared informer's records = %q, want its reflector's Caches populated, naming no controller", shared)
	}
}
