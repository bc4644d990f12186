package app

import (
	"context"
	"fmt"

	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/health"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/telemetry"
)

// Init builds the App: the Memcached controller, the probes' Service, whose
// /readyz is healthy once the controller's caches have synced and which,
// with BuildTelemetry's Telemetry, serves its metrics at /metrics, and the
// kube.Recorder that writes the controller's Events.
// Everything outside the process, the API server included, is reached
// through s.Host, and everything recorded goes to s.Telemetry.
func Init(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
	set, err := readSettings(ctx, s)
	if err != nil {
		return nil, err
	}
	client, err := kube.NewClient(s, set.conn)
	if err != nil {
		return nil, err
	}
	// The apps/v1 client the Reconciler applies Deployments with shares
	// the Client's transport: its dialler, credentials and telemetry; so
	// does the Recorder. It is that group's client, not the whole
	// clientset, which would link every group's into the binary.
	apps, err := appsv1client.NewForConfig(client.Config())
	if err != nil {
		return nil, fmt.Errorf("app: the apps/v1 client: %w", err)
	}
	// The Events are the controller's, reported by this replica, POD_NAME,
	// as its Lease is.
	events, err := kube.NewRecorder(s, client, Name, set.controller.LeaderElection.Identity)
	if err != nil {
		return nil, err
	}
	// The Reconciler reads the Deployments from the cache Owns keeps of
	// them (one list and one watch, in the controller's namespace), trimmed
	// to what it reads, Deployment, rather than GETting each from the API
	// server: a request an object fewer on every start, relist and resync.
	deployments := kube.ReadTrimmed(client, Deployments, kube.Selector{Namespace: set.controller.Namespace})
	rec := Reconciler{Kube: appsV1{apps}, Deployments: deployments, Events: events}
	ctrl, err := kube.NewController(s, client, set.controller, Memcached, rec,
		kube.Owns(Deployments.GVR),
		kube.Reads(deployments),
		kube.Writes(Deployments.GVR, kube.Apply), // the Reconciler applies them
		kube.Finalize(Finalizer, rec.Finalize),
	)
	if err != nil {
		return nil, err
	}
	opts := []health.Option{health.Readiness(ctrl.Synced())}
	// BuildTelemetry's metrics are served at /metrics beside the probes;
	// another Telemetry, such as a test's, has none to serve.
	if metrics, ok := telemetry.MetricsHandler(s.Telemetry); ok {
		opts = append(opts, health.Handle("GET /metrics", metrics))
	}
	probes := health.NewService(s, set.probesAddr, opts...)
	svcs := []humus.Service{ctrl, probes, events}
	return svcs, nil
}
