package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/health"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/telemetry"
)

// Init builds the App: the Namespace controller, and the probes' Service,
// whose /readyz is healthy once the controller's caches have synced and
// which, with BuildTelemetry's Telemetry, serves its metrics at /metrics.
func Init(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
	set, err := readSettings(ctx, s)
	if err != nil {
		return nil, err
	}
	client, err := kube.NewClient(s, set.conn)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(client.Config())
	if err != nil {
		return nil, fmt.Errorf("app: the clientset: %w", err)
	}
	networkPolicies := networkingv1.SchemeGroupVersion.WithResource("networkpolicies")
	configMaps := corev1.SchemeGroupVersion.WithResource("configmaps")
	ctrl, err := kube.NewKindController(s, client, set.controller, Namespaces, DefaultDeny{Kube: kc},
		kube.Owns(networkPolicies),
		kube.Owns(configMaps),
		// The Reconciler applies both in each namespace.
		kube.Writes(networkPolicies, kube.Apply),
		kube.Writes(configMaps, kube.Apply),
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
	svcs := []humus.Service{ctrl, probes}
	return svcs, nil
}
