package control

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/z5labs/humus/kube/internal/cache"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/z5labs/humus/health"
)

// Config is what a Controller is built from: its settings, its
// objects' resource and Go type, its parts, and what it runs on.
type Config struct {
	Settings  Settings
	GVR       schema.GroupVersionResource
	Group     string // the objects' API group, for owner references
	Kind      string
	Scope     Scope
	Type      Type
	Finalizer string      // "" without Finalize
	Owned     []cache.Key // each owned resource, as the controller watches it
	Reads     []*Source
	Relations []*Relation
	Cache     *cache.Shared // the Client's
	API       API
	Telemetry *telemetry
}

// New returns the Controller cfg describes.
func New(cfg Config) *Controller {
	settings, gvr := cfg.Settings, cfg.GVR
	watched := []cache.Key{{GVR: gvr, Namespace: settings.Namespace, Labels: settings.LabelSelector, Fields: settings.FieldSelector}}
	watched = append(watched, cfg.Owned...)
	owned := make([]schema.GroupVersionResource, len(cfg.Owned))
	for i, o := range cfg.Owned {
		owned[i] = o.GVR
	}
	written := slices.Clone(owned)
	for _, r := range cfg.Reads {
		watched = append(watched, r.Entry.Key())
		written = append(written, r.Entry.Key().GVR)
	}
	for i, rel := range cfg.Relations {
		rel.name = relationName(i)
	}
	work, cancel := context.WithCancel(context.Background())
	ctrl := &Controller{
		name:       settings.Name,
		settings:   settings,
		gvr:        gvr,
		Group:      cfg.Group,
		Kind:       cfg.Kind,
		Scope:      cfg.Scope,
		objType:    cfg.Type,
		Finalizer:  cfg.Finalizer,
		owned:      owned,
		reads:      cfg.Reads,
		Relations:  cfg.Relations,
		watched:    watched,
		cache:      cfg.Cache,
		OwnWrites:  NewOwnedWrites(written),
		Versions:   WrittenVersions{Manager: settings.Name},
		processID:  strconv.FormatUint(rand.Uint64(), 36),
		API:        cfg.API,
		tel:        cfg.Telemetry,
		retry:      newRetryLimiter(settings),
		Ready:      health.NewBinary(fmt.Errorf("kube: controller %s: its caches haven't synced", settings.Name)),
		crew:       newCrew(settings.Workers),
		stop:       make(chan struct{}),
		work:       work,
		cancelWork: cancel,
		Done:       make(chan struct{}),
	}
	ctrl.Leader = newLeader(ctrl)
	return ctrl
}
