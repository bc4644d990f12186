package control

import "time"

// Settings are a Controller's settings, as kube.Settings gives them,
// checked and defaulted by the face before the engine sees them.
type Settings struct {
	Name               string
	Namespace          string
	LabelSelector      string
	FieldSelector      string
	Workers            int
	Resync             time.Duration
	RetryBaseDelay     time.Duration
	RetryMaxDelay      time.Duration
	ReconcileTimeout   time.Duration
	LowPriorityMaxWait time.Duration
	Shards             int
	ShardBy            ShardKey
	LeaderElection     LeaderElection
}

// LeaderElection is the Lease's settings, as kube.LeaderElection.
type LeaderElection struct {
	Namespace     string
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// ShardKey is the field of an object whose hash puts it in a shard, as
// kube.ShardKey.
type ShardKey string

// The shard keys, as kube's.
const (
	ShardByUID       ShardKey = "uid"
	ShardByNamespace ShardKey = "namespace"
)

// Scope is whether the controller's objects are namespaced, as
// kube.Scope.
type Scope string

// The scopes, as kube's.
const (
	Namespaced Scope = "Namespaced"
	Cluster    Scope = "Cluster"
)
