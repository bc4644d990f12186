package kube

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/z5labs/humus/kube/internal/control"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// LeaderElection is the Lease a controller's replicas elect their leader
// with. The Lease is named after Settings.Name; with Settings.Shards above
// 1, each shard has one, named Name-i-of-Shards, and these settings are
// each one's.
type LeaderElection struct {
	Namespace string // the Lease's namespace, such as the pod's
	Identity  string // this replica's name in the Lease, such as its pod's

	LeaseDuration time.Duration // how long a Lease lasts without renewal
	RenewDeadline time.Duration // how long the leader tries to renew
	RetryPeriod   time.Duration // how often a replica tries to take or renew
}

// Settings configures a Controller. Every field is a plain value: each
// one's default, range and check is on the field. NewController and
// NewKindController check them all, and DefaultSettings fills the defaults.
type Settings struct {
	// Name is the controller's field manager, and its Lease's name.
	// Required: a DNS-1123 subdomain of at most 128 characters, the API
	// server's limit for a field manager (CheckName).
	Name string

	// Namespace limits the controller to one namespace. "" means every
	// namespace, the default; otherwise a DNS-1123 label
	// (CheckWatchNamespace). It must be "" for a cluster-scoped resource.
	Namespace string

	// LabelSelector and FieldSelector limit the controller to the objects
	// they select, as Namespace limits it to one namespace: its resource is
	// listed and watched with them, so no other object is cached or
	// reconciled. An object that stops matching is gone to the
	// controller, as if deleted: it is neither reconciled nor finalized
	// again until it matches. Default "", every object; a label selector
	// such as "tier=web" (CheckLabelSelector), and a field selector of the
	// fields the API server can select the resource by, such as
	// "metadata.name!=skip" (CheckFieldSelector).
	LabelSelector string
	FieldSelector string

	// Workers is how many objects are reconciled at once, on a replica:
	// with shards, across the shards it holds. One object is never
	// reconciled twice at once. Default 1, from 1 to 1024 (CheckWorkers).
	Workers int

	// Resync reconciles every object again this often. Default 10h,
	// positive (CheckResync).
	Resync time.Duration

	// RetryBaseDelay and RetryMaxDelay bound the backoff of an object whose
	// reconcile failed: the delay doubles from the first to the second.
	// Defaults 5ms and 1000s, client-go's; both positive (CheckRetryDelay),
	// and RetryMaxDelay at least RetryBaseDelay. On top of each object's
	// backoff, retries overall are limited to 10 a second, bursting to 100.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration

	// ReconcileTimeout bounds each reconcile: the context the Reconciler
	// (or a Finalize's f) is handed ends this long after it is called, and
	// a reconcile that then returns an error is retried with backoff, as
	// an error is, its span and its outcome (timeout) saying so. The status
	// it returns is still applied. One that returns nil late has succeeded,
	// whenever it comes: its Result.After holds, and a Finalize's f that
	// cleaned up has its finalizer removed; the overrun is recorded (the
	// span event humus.kube.reconcile.overran and a WARN record, "reconcile
	// succeeded after its timeout"). A Reconciler that ignores its context
	// still holds its worker until it returns. Default 0: no bound, as
	// client-go and controller-runtime default; otherwise positive
	// (CheckReconcileTimeout).
	ReconcileTimeout time.Duration

	// LowPriorityMaxWait is how long a key queued at low priority (by the
	// initial list, a resync, a status another wrote, or as a new
	// leader's backlog) waits behind the keys changes queue before it is
	// aged up: while the oldest low key has waited this long, every other
	// key a worker takes is a low one, so a steady stream of changes
	// can't hold the backlog back forever, nor the backlog a change.
	// Default 1m: a cold start's or a failover's backlog of thousands of
	// objects is still reconciled after the changes made meanwhile, and a
	// key the changes hold back is reconciled about a minute late, not
	// never. Positive (CheckLowPriorityMaxWait).
	LowPriorityMaxWait time.Duration

	// Shards divides the objects among the replicas, by the hash of the
	// field ShardBy names, into this many ranges, each with a Lease of its
	// own: the replica that holds a shard's Lease lists, watches, caches and
	// reconciles that shard's objects only, asking the API server to send
	// no others. Replicas share the shards evenly. Default 1: one Lease,
	// named Name, whose holder reconciles every object while every replica
	// keeps its caches warm. At least 1 and at most 256 (CheckShards).
	// Scaling out, in the docs, says when to shard and what it costs.
	Shards int

	// ShardBy is the field whose hash puts an object in a shard:
	// ShardByUID, the default, or ShardByNamespace (CheckShardBy). With
	// ShardByNamespace the resource must be namespaced and Namespace "".
	ShardBy ShardKey

	// LeaderElection is the Lease. Its Namespace (a DNS-1123 label,
	// CheckNamespace) and Identity (not empty, CheckIdentity) are required.
	// Its durations default to kube-controller-manager's: LeaseDuration 15s,
	// longer than RenewDeadline; RenewDeadline 10s, longer than 1.2
	// RetryPeriods; RetryPeriod 2s, positive (CheckRetryPeriod).
	LeaderElection LeaderElection
}

// DefaultSettings returns Settings with every default filled in. Name and
// the Lease's Namespace and Identity have none, and must be set.
func DefaultSettings() Settings {
	return Settings{
		Workers:        1,
		Shards:         1,
		ShardBy:        ShardByUID,
		Resync:         10 * time.Hour,
		RetryBaseDelay: 5 * time.Millisecond,
		RetryMaxDelay:  1000 * time.Second,

		LowPriorityMaxWait: time.Minute,
		LeaderElection: LeaderElection{
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
	}
}

// jitterFactor is client-go's leader election jitter. The controller's
// elector doesn't jitter, but keeps client-go's check, which the proposal
// gives: RenewDeadline must be longer than this many RetryPeriods.
const jitterFactor = 1.2

// CheckName checks a controller's name: a DNS-1123 subdomain, as a Lease's
// name must be, of at most 128 characters, as a field manager's must be.
func CheckName(name string) error { return named("name", name, checkName(name)) }

// maxFieldManager is the longest field manager the API server takes:
// FieldManagerMaxLength in k8s.io/apimachinery/pkg/apis/meta/v1/validation,
// which ValidatePatchOptions, ValidateCreateOptions and
// ValidateUpdateOptions check for every write, so a longer Settings.Name
// would have every apply refused. It leaves room for the shards' Lease
// names, Name-i-of-Shards, within a DNS-1123 subdomain's 253 characters.
const maxFieldManager = 128

// CheckWatchNamespace checks the namespace a controller is limited to: "",
// for every namespace, or a DNS-1123 label.
func CheckWatchNamespace(ns string) error {
	return named("namespace", ns, checkWatchNamespace(ns))
}

// CheckNamespace checks the Lease's namespace: a DNS-1123 label.
func CheckNamespace(ns string) error { return named("namespace", ns, checkNamespace(ns)) }

// CheckIdentity checks a replica's identity in the Lease: not empty.
func CheckIdentity(id string) error { return named("identity", id, checkIdentity(id)) }

// CheckWorkers checks a worker count: from 1 to 1024.
func CheckWorkers(n int) error { return named("workers", n, checkWorkers(n)) }

// CheckShards checks a shard count: at least 1, at most 256.
func CheckShards(n int) error { return named("shards", n, checkShards(n)) }

// CheckShardBy checks what divides the objects into shards: ShardByUID or
// ShardByNamespace.
func CheckShardBy(k ShardKey) error { return named("shard key", k, checkShardBy(k)) }

// CheckResync checks a resync period: positive.
func CheckResync(d time.Duration) error { return named("resync", d, checkPositive(d)) }

// CheckRetryDelay checks a retry delay: positive.
func CheckRetryDelay(d time.Duration) error { return named("retry delay", d, checkPositive(d)) }

// CheckLowPriorityMaxWait checks how long a low-priority key waits before
// it is aged up: positive.
func CheckLowPriorityMaxWait(d time.Duration) error {
	return named("low priority max wait", d, checkPositive(d))
}

// CheckLeaseDuration checks the Lease's duration: positive.
func CheckLeaseDuration(d time.Duration) error { return named("lease duration", d, checkPositive(d)) }

// CheckRenewDeadline checks the Lease's renew deadline: positive.
func CheckRenewDeadline(d time.Duration) error { return named("renew deadline", d, checkPositive(d)) }

// CheckLabelSelector checks a label selector: "" or one that parses, such
// as "tier=web,env!=dev".
func CheckLabelSelector(s string) error {
	return named("label selector", s, checkLabelSelector(s))
}

// CheckFieldSelector checks a field selector: "" or one that parses, such
// as "metadata.name!=skip". Which fields a resource can be selected by is
// the API server's to say: Serve ends with its answer.
func CheckFieldSelector(s string) error {
	return named("field selector", s, checkFieldSelector(s))
}

func checkLabelSelector(s string) error {
	_, err := labels.Parse(s)
	return err
}

func checkFieldSelector(s string) error {
	_, err := fields.ParseSelector(s)
	return err
}

// CheckReconcileTimeout checks a reconcile's bound: 0, for none, or
// positive.
func CheckReconcileTimeout(d time.Duration) error {
	return named("reconcile timeout", d, checkNotNegative(d))
}

// CheckRetryPeriod checks the Lease's retry period: positive.
func CheckRetryPeriod(d time.Duration) error { return named("retry period", d, checkPositive(d)) }

func checkName(name string) error {
	if name == "" {
		return errors.New("is required")
	}
	if err := dns("a DNS-1123 subdomain", validation.IsDNS1123Subdomain(name)); err != nil {
		return err
	}
	if len(name) > maxFieldManager {
		return fmt.Errorf("is %d characters long: at most %d, since it is the controller's field manager, and the API server refuses every write whose field manager is longer", len(name), maxFieldManager)
	}
	return nil
}

func checkWatchNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	return checkNamespace(ns)
}

func checkNamespace(ns string) error {
	if ns == "" {
		return errors.New("is required")
	}
	return dns("a DNS-1123 label", validation.IsDNS1123Label(ns))
}

func checkIdentity(id string) error {
	if id == "" {
		return errors.New("is required")
	}
	return nil
}

func checkWorkers(n int) error {
	switch {
	case n < 1:
		return errors.New("must be at least 1")
	case n > maxWorkers:
		return fmt.Errorf("must be at most %d", maxWorkers)
	}
	return nil
}

// maxWorkers bounds Settings.Workers: each worker is a goroutine started
// when the replica leads, so a mistyped WORKERS of a billion would take
// the process's memory, and the API server's priority and fairness serves
// a client's requests a few at a time long before a thousand.
const maxWorkers = 1024

func checkShards(n int) error {
	if n < 1 || n > control.MaxShards {
		return fmt.Errorf("must be from 1 to %d", control.MaxShards)
	}
	return nil
}

func checkShardBy(k ShardKey) error {
	if k != ShardByUID && k != ShardByNamespace {
		return fmt.Errorf("must be %q or %q", ShardByUID, ShardByNamespace)
	}
	return nil
}

func checkNotNegative(d time.Duration) error {
	if d < 0 {
		return errors.New("must not be negative: 0 is none")
	}
	return nil
}

func checkPositive(d time.Duration) error {
	if d <= 0 {
		return errors.New("must be positive")
	}
	return nil
}

func dns(what string, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("must be %s: %s", what, strings.Join(problems, "; "))
}

// named prefixes problem with what it is about, and its value.
func named(what string, value any, problem error) error {
	if problem == nil {
		return nil
	}
	switch v := value.(type) {
	case string:
		value = fmt.Sprintf("%q", v)
	case ShardKey:
		value = fmt.Sprintf("%q", v)
	}
	return fmt.Errorf("kube: %s %v %w", what, value, problem)
}

// check returns one error naming every mistake in s, each by its field.
// scope is the controller's resource's scope.
func (s Settings) check(scope Scope) error {
	le := s.LeaderElection
	errs := []error{
		named("Settings.Name", s.Name, checkName(s.Name)),
		named("Settings.Namespace", s.Namespace, checkWatchNamespace(s.Namespace)),
		named("Settings.LabelSelector", s.LabelSelector, checkLabelSelector(s.LabelSelector)),
		named("Settings.FieldSelector", s.FieldSelector, checkFieldSelector(s.FieldSelector)),
		named("Settings.Workers", s.Workers, checkWorkers(s.Workers)),
		named("Settings.Shards", s.Shards, checkShards(s.Shards)),
		named("Settings.ShardBy", s.ShardBy, checkShardBy(s.ShardBy)),
		named("Settings.Resync", s.Resync, checkPositive(s.Resync)),
		named("Settings.RetryBaseDelay", s.RetryBaseDelay, checkPositive(s.RetryBaseDelay)),
		named("Settings.RetryMaxDelay", s.RetryMaxDelay, checkPositive(s.RetryMaxDelay)),
		named("Settings.ReconcileTimeout", s.ReconcileTimeout, checkNotNegative(s.ReconcileTimeout)),
		named("Settings.LowPriorityMaxWait", s.LowPriorityMaxWait, checkPositive(s.LowPriorityMaxWait)),
		named("Settings.LeaderElection.Namespace", le.Namespace, checkNamespace(le.Namespace)),
		named("Settings.LeaderElection.Identity", le.Identity, checkIdentity(le.Identity)),
		named("Settings.LeaderElection.RetryPeriod", le.RetryPeriod, checkPositive(le.RetryPeriod)),
	}
	if s.RetryBaseDelay > 0 && s.RetryMaxDelay > 0 && s.RetryMaxDelay < s.RetryBaseDelay {
		errs = append(errs, fmt.Errorf("kube: Settings.RetryMaxDelay %v must be at least Settings.RetryBaseDelay %v", s.RetryMaxDelay, s.RetryBaseDelay))
	}
	if le.LeaseDuration <= le.RenewDeadline {
		errs = append(errs, fmt.Errorf("kube: Settings.LeaderElection.LeaseDuration %v must be longer than RenewDeadline %v", le.LeaseDuration, le.RenewDeadline))
	}
	if float64(le.RenewDeadline) <= jitterFactor*float64(le.RetryPeriod) {
		errs = append(errs, fmt.Errorf("kube: Settings.LeaderElection.RenewDeadline %v must be longer than 1.2 RetryPeriods (%v)", le.RenewDeadline, time.Duration(jitterFactor*float64(le.RetryPeriod))))
	}
	if scope == Cluster && s.Namespace != "" {
		errs = append(errs, fmt.Errorf("kube: Settings.Namespace %q: a cluster-scoped resource can't be limited to a namespace", s.Namespace))
	}
	if s.Shards > 1 && s.ShardBy == ShardByNamespace {
		if scope == Cluster {
			errs = append(errs, fmt.Errorf("kube: Settings.ShardBy %q: a cluster-scoped resource's objects have no namespace", s.ShardBy))
		}
		if s.Namespace != "" {
			errs = append(errs, fmt.Errorf("kube: Settings.ShardBy %q with Settings.Namespace %q puts every object in one shard", s.ShardBy, s.Namespace))
		}
	}
	// A Name of at most 128 characters (checkName) leaves room for its
	// shards' Lease names, Name-255-of-256-by-namespace at most (152
	// characters), in a DNS-1123 subdomain's 253.
	return errors.Join(errs...)
}

// ShardKey is the field of an object whose hash puts it in a shard.
type ShardKey string

const (
	// ShardByUID divides the objects by their metadata.uid: evenly,
	// whatever their namespaces. An owned object belongs to the shard of
	// its controller owner's UID.
	ShardByUID ShardKey = "uid"
	// ShardByNamespace divides them by their metadata.namespace: every
	// object of a namespace in one shard, owned objects with their owners,
	// filtered by the API server too.
	ShardByNamespace ShardKey = "namespace"
)

// engine is s as the control loop takes it.
func (s Settings) engine() control.Settings {
	return control.Settings{
		Name:               s.Name,
		Namespace:          s.Namespace,
		LabelSelector:      s.LabelSelector,
		FieldSelector:      s.FieldSelector,
		Workers:            s.Workers,
		Resync:             s.Resync,
		RetryBaseDelay:     s.RetryBaseDelay,
		RetryMaxDelay:      s.RetryMaxDelay,
		ReconcileTimeout:   s.ReconcileTimeout,
		LowPriorityMaxWait: s.LowPriorityMaxWait,
		Shards:             s.Shards,
		ShardBy:            control.ShardKey(s.ShardBy),
		LeaderElection:     control.LeaderElection(s.LeaderElection),
	}
}
