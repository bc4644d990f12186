package app

import (
	"context"
	"errors"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/kubeenv"
)

// settings is everything the App reads from its Host.
type settings struct {
	conn       kube.Connection
	controller kube.Settings
	probesAddr string // where the probes' Service listens, and serves /metrics
}

// readSettings reads the App's settings from its Host's environment and
// files, and returns every missing or invalid value in one error, each
// named by its variable or file:
//
//   - the Connection, as kubeenv.Connection reads it: from the
//     kubeconfig KUBECONFIG names, or in a pod from KUBERNETES_SERVICE_HOST,
//     KUBERNETES_SERVICE_PORT and the service account's CA and token;
//   - POD_NAMESPACE, POD_NAME, WORKERS, SHARDS, the retry delays, the
//     reconcile timeout and the Lease's timings, as kubeenv.Settings reads
//     them;
//   - PROBES_ADDR, this App's own, where the probes and BuildTelemetry's
//     metrics are served, ":8081" unless set;
//   - WATCH_NAMESPACE, this App's own, limits the controller to one
//     namespace; unset, it watches every namespace.
//
// Each setting is checked with kube's own Check function as it is read, so
// a bad one is named by the variable it came from.
func readSettings(ctx context.Context, s *humus.Setup) (settings, error) {
	conn, connErr := kubeenv.Connection(ctx, s.Host)

	set, setErr := config.Struct(func(r *config.Resolver) settings {
		ks := kubeenv.Settings(r, s.Host, Name)
		ks.Namespace = config.Parse(r, config.Default(config.Env(s.Host, "WATCH_NAMESPACE"), ""), config.Checked(config.AsIs, kube.CheckWatchNamespace))
		return settings{
			controller: ks,
			probesAddr: r.Get(config.Default(config.Env(s.Host, "PROBES_ADDR"), ":8081")),
		}
	}).Read(ctx)

	if err := errors.Join(connErr, setErr); err != nil {
		return settings{}, err
	}
	set.conn = conn
	return set, nil
}
