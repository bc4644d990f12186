package app

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
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
	rec := Reconciler{Kube: appsV1{apps}, Events: events}
	ctrl, err := kube.NewController(s, client, set.controller, Memcached, rec,
		kube.Owns(appsv1.SchemeGroupVersion.WithResource("deployments")),
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
