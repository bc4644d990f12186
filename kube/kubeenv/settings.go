package kubeenv

import (
	"strconv"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/kube"
)

// Settings is kube.DefaultSettings with the controller's name, and what r
// reads from h's environment, each value checked with kube's own Check
// function as it is read, so a bad one is named by its variable:
//
//   - POD_NAMESPACE and POD_NAME, required, are the Lease's namespace and
//     this replica's identity in it, which the pod's spec sets from the
//     downward API (fieldRef metadata.namespace and metadata.name);
//   - WORKERS is how many objects are reconciled at once, 1 unless set;
//   - SHARDS is how many shards the objects are divided into among the
//     replicas, 1 unless set;
//   - RETRY_BASE_DELAY and RETRY_MAX_DELAY bound the backoff of an object
//     whose reconcile failed, kube's defaults (5ms, 1000s) unless set;
//     NewController checks the second is at least the first;
//   - RECONCILE_TIMEOUT bounds each reconcile, 0 (none) unless set;
//   - LOW_PRIORITY_MAX_WAIT is how long a key at low priority waits before
//     it is aged up, 1m unless set;
//   - LEASE_DURATION, RENEW_DEADLINE and RETRY_PERIOD are the Lease's
//     timings, kube's defaults (15s, 10s, 2s) unless set; NewController
//     checks them against each other.
//
// Each duration is read as time.ParseDuration reads it ("15s", "250ms").
// The log records' verbosity, LOG_VERBOSITY, is telemetry.Build's to read,
// as the LoggerProvider is its.
//
// Settings.Namespace and the selectors are left "", every object: which
// objects a controller handles is the App's to say, and an App that lets
// its Deployment limit them reads its own variable for each, checked as
// these are, with config.Checked and kube's Check function:
//
//	ks.Namespace = config.Parse(r, config.Env(h, "WATCH_NAMESPACE"), config.Checked(config.AsIs, kube.CheckWatchNamespace))
//	ks.LabelSelector = config.Parse(r, config.Default(config.Env(h, "LABEL_SELECTOR"), ""), config.Checked(config.AsIs, kube.CheckLabelSelector))
//
// Each call reads the variables again, and records each problem in r
// again: an App with several controllers reads Settings once and copies
// it for each, changing the Name, so a bad variable is named once:
//
//	web := kubeenv.Settings(r, h, "website-controller")
//	mirror := web
//	mirror.Name = "mirror-controller"
func Settings(r *config.Resolver, h humus.Host, name string) kube.Settings {
	env := func(name string) config.Source { return config.Env(h, name) }
	ks := kube.DefaultSettings()
	ks.Name = name
	ks.Workers = config.Parse(r, config.Default(env("WORKERS"), strconv.Itoa(ks.Workers)), config.Checked(strconv.Atoi, kube.CheckWorkers))
	ks.Shards = config.Parse(r, config.Default(env("SHARDS"), strconv.Itoa(ks.Shards)), config.Checked(strconv.Atoi, kube.CheckShards))
	ks.RetryBaseDelay = duration(r, env("RETRY_BASE_DELAY"), ks.RetryBaseDelay, kube.CheckRetryDelay)
	ks.RetryMaxDelay = duration(r, env("RETRY_MAX_DELAY"), ks.RetryMaxDelay, kube.CheckRetryDelay)
	ks.ReconcileTimeout = duration(r, env("RECONCILE_TIMEOUT"), ks.ReconcileTimeout, kube.CheckReconcileTimeout)
	ks.LowPriorityMaxWait = duration(r, env("LOW_PRIORITY_MAX_WAIT"), ks.LowPriorityMaxWait, kube.CheckLowPriorityMaxWait)
	le := &ks.LeaderElection
	le.LeaseDuration = duration(r, env("LEASE_DURATION"), le.LeaseDuration, kube.CheckLeaseDuration)
	le.RenewDeadline = duration(r, env("RENEW_DEADLINE"), le.RenewDeadline, kube.CheckRenewDeadline)
	le.RetryPeriod = duration(r, env("RETRY_PERIOD"), le.RetryPeriod, kube.CheckRetryPeriod)
	ks.LeaderElection.Namespace = config.Parse(r, env("POD_NAMESPACE"), config.Checked(config.AsIs, kube.CheckNamespace))
	ks.LeaderElection.Identity = config.Parse(r, env("POD_NAME"), config.Checked(config.AsIs, kube.CheckIdentity))
	return ks
}

// duration reads a duration from src, def unless it is set, checked with
// check.
func duration(r *config.Resolver, src config.Source, def time.Duration, check func(time.Duration) error) time.Duration {
	return config.Parse(r, config.Default(src, def.String()), config.Checked(time.ParseDuration, check))
}
