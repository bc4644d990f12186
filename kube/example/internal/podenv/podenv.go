// Package podenv is the examples' shared pod plumbing: what every example
// controller reads from its Host to run in a pod, or outside a cluster from
// a kubeconfig. It is internal to the examples, so an operator author who
// copies an example copies this package with it.
//
// humus and kube read no environment variable and no file themselves:
// where the API server is, who the controller is, and how it is set up are
// the App's to say, and podenv is how the examples say it.
//
//   - [ReadConnection] reads the kube.Connection: from the kubeconfig
//     KUBECONFIG names or, in a pod, from what the kubelet provides.
//   - [Controller] reads the kube.Settings every example has, POD_NAMESPACE,
//     POD_NAME, WORKERS and SHARDS, and [ProbesAddr] reads PROBES_ADDR, both inside
//     an App's config.Struct.
//   - [Checked] and [Text] make a kube Check function a config.Parse parser,
//     so a bad value is named by the variable it came from.
//
// Every missing or invalid value is named by its variable or file, and
// reported with the others: Controller and ProbesAddr record theirs in the
// config.Resolver, and ReadConnection joins its own in one error.
package podenv

import (
	"strconv"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/kube"
)

// Controller is kube.DefaultSettings with the controller's name, and what
// r reads from h's environment:
//
//   - POD_NAMESPACE and POD_NAME, required, are the Lease's namespace and
//     this replica's identity in it, which the pod's spec sets from the
//     downward API;
//   - WORKERS is how many objects are reconciled at once, 1 unless set;
//   - SHARDS is how many shards the objects are divided into, among the
//     replicas, 1 unless set (kube's Scaling out).
//
// Each is checked with kube's own Check function as it is read.
// Settings.Namespace is left "", every namespace: an App that can be
// limited to one reads its own variable for it.
func Controller(r *config.Resolver, h humus.Host, name string) kube.Settings {
	env := func(name string) config.Source { return config.Env(h, name) }
	ks := kube.DefaultSettings()
	ks.Name = name
	ks.Workers = config.Parse(r, config.Default(env("WORKERS"), strconv.Itoa(ks.Workers)), Checked(strconv.Atoi, kube.CheckWorkers))
	ks.Shards = config.Parse(r, config.Default(env("SHARDS"), strconv.Itoa(ks.Shards)), Checked(strconv.Atoi, kube.CheckShards))
	ks.LeaderElection.Namespace = config.Parse(r, env("POD_NAMESPACE"), Checked(Text, kube.CheckNamespace))
	ks.LeaderElection.Identity = config.Parse(r, env("POD_NAME"), Checked(Text, kube.CheckIdentity))
	return ks
}

// ProbesAddr is PROBES_ADDR from h's environment, where the probes'
// Service serves /readyz and /livez, and the examples' /metrics, ":8081"
// unless set.
func ProbesAddr(r *config.Resolver, h humus.Host) string {
	return r.Get(config.Default(config.Env(h, "PROBES_ADDR"), ":8081"))
}

// Checked parses a value with parse, then checks it with check, one of
// kube's Check functions.
func Checked[T any](parse func(string) (T, error), check func(T) error) func(string) (T, error) {
	return func(s string) (T, error) {
		v, err := parse(s)
		if err != nil {
			return v, err
		}
		return v, check(v)
	}
}

// Text is a value as it is.
func Text(s string) (string, error) { return s, nil }
