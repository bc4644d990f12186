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
	"github.com/z5labs/humus/kube/example/internal/podtel"
)

// Init builds the App: the Namespace controller, and the probes' Service,
// whose /readyz is healthy once the controller's caches have synced.
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
	ctrl, err := kube.NewKindController(s, client, set.controller, Namespaces, DefaultDeny{Kube: kc},
		kube.Owns(networkingv1.SchemeGroupVersion.WithResource("networkpolicies")),
		kube.Owns(corev1.SchemeGroupVersion.WithResource("configmaps")),
	)
	if err != nil {
		return nil, err
	}
	probes := health.NewService(s, set.probesAddr, health.Readiness(ctrl.Synced()))
	svcs := []humus.Service{ctrl, probes}
	// BuildTelemetry's MeterProvider carries the handler of its metrics;
	// another Telemetry, such as a test's, has none to serve.
	if metrics, ok := podtel.Handler(s.Telemetry); ok {
		svcs = append(svcs, podtel.NewMetricsService(s, set.metricsAddr, metrics))
	}
	return svcs, nil
}
