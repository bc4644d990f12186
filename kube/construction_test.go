package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
)

func TestCheckFunctionsNameTheValueAndTheProblem(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"a name", CheckName("memcached-controller"), ""},
		{"no name", CheckName(""), `kube: name "" is required`},
		{"a name with capitals", CheckName("Memcached"), `kube: name "Memcached" must be a DNS-1123 subdomain: a lowercase RFC 1123 subdomain`},
		{"a name of 128 characters", CheckName(strings.Repeat("a", 128)), ""},
		{"a name of 129 characters", CheckName(strings.Repeat("a", 129)), fmt.Sprintf("kube: name %q is 129 characters long: at most 128, since it is the controller's field manager, and the API server refuses every write whose field manager is longer", strings.Repeat("a", 129))},
		{"a name of 254 characters", CheckName(strings.Repeat("a", 254)), fmt.Sprintf("kube: name %q must be a DNS-1123 subdomain: must be no more than 253 characters", strings.Repeat("a", 254))},
		{"every namespace", CheckWatchNamespace(""), ""},
		{"a watch namespace", CheckWatchNamespace("team-a"), ""},
		{"a dotted watch namespace", CheckWatchNamespace("team.a"), `kube: namespace "team.a" must be a DNS-1123 label`},
		{"a Lease namespace", CheckNamespace("kube-system"), ""},
		{"no Lease namespace", CheckNamespace(""), `kube: namespace "" is required`},
		{"an identity", CheckIdentity("memcached-7d9f"), ""},
		{"no identity", CheckIdentity(""), `kube: identity "" is required`},
		{"one worker", CheckWorkers(1), ""},
		{"no workers", CheckWorkers(0), "kube: workers 0 must be at least 1"},
		{"1024 workers", CheckWorkers(1024), ""},
		{"a billion workers", CheckWorkers(1e9), "kube: workers 1000000000 must be at most 1024"},
		{"one shard", CheckShards(1), ""},
		{"256 shards", CheckShards(256), ""},
		{"no shards", CheckShards(0), "kube: shards 0 must be from 1 to 256"},
		{"257 shards", CheckShards(257), "kube: shards 257 must be from 1 to 256"},
		{"by UID", CheckShardBy(ShardByUID), ""},
		{"by namespace", CheckShardBy(ShardByNamespace), ""},
		{"by name", CheckShardBy("name"), `kube: shard key "name" must be "uid" or "namespace"`},
		{"a resync", CheckResync(time.Hour), ""},
		{"no resync", CheckResync(0), "kube: resync 0s must be positive"},
		{"a retry delay", CheckRetryDelay(5 * time.Millisecond), ""},
		{"a negative retry delay", CheckRetryDelay(-time.Second), "kube: retry delay -1s must be positive"},
		{"a low priority max wait", CheckLowPriorityMaxWait(time.Minute), ""},
		{"no low priority max wait", CheckLowPriorityMaxWait(0), "kube: low priority max wait 0s must be positive"},
		{"a retry period", CheckRetryPeriod(2 * time.Second), ""},
		{"no retry period", CheckRetryPeriod(0), "kube: retry period 0s must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.want == "" && tc.err != nil:
				t.Errorf("got %v, want nil", tc.err)
			case tc.want != "" && (tc.err == nil || !strings.HasPrefix(tc.err.Error(), tc.want)):
				t.Errorf("got %v, want an error starting %q", tc.err, tc.want)
			}
		})
	}
}

func TestDefaultSettingsAreTheTables(t *testing.T) {
	s := DefaultSettings()
	want := Settings{
		Workers: 1, Shards: 1, ShardBy: ShardByUID, Resync: 10 * time.Hour, RetryBaseDelay: 5 * time.Millisecond, RetryMaxDelay: 1000 * time.Second,
		LowPriorityMaxWait: time.Minute,
		LeaderElection:     LeaderElection{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
	}
	if s != want {
		t.Errorf("DefaultSettings() = %+v, want %+v", s, want)
	}
}

// errorLines returns err's lines: errors.Join puts one mistake on each.
func errorLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// wantMistakes checks that err names every one of want, each on a line of
// its own, and nothing else.
func wantMistakes(t *testing.T, err error, want ...string) {
	t.Helper()
	lines := errorLines(err)
	for _, w := range want {
		found := false
		for _, l := range lines {
			if strings.Contains(l, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("the error doesn't name %q; it is:\n%v", w, err)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("the error has %d mistakes, want %d:\n%v", len(lines), len(want), err)
	}
}

func TestNewControllerNamesEveryMistakeAtOnce(t *testing.T) {
	setup := &humus.Setup{Host: humustest.NewHost().Host()}
	bad := Settings{
		Name:           "Memcached_Controller",
		Namespace:      "team.a",
		Workers:        0,
		Shards:         0,
		ShardBy:        "Uid",
		Resync:         0,
		RetryBaseDelay: 2 * time.Second,
		RetryMaxDelay:  time.Second,
		LeaderElection: LeaderElection{
			Namespace:     "",
			Identity:      "",
			LeaseDuration: 10 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   9 * time.Second,
		},
	}
	r := caches
	r.Group = ""
	wrongFinalizer := Finalize("cache.example.com/finalizer", func(context.Context, corev1.Namespace) error { return nil })
	_, err := NewController(setup, testClient(t, setup), bad, r, readyReplicas(&counter{}),
		wrongFinalizer, Owns(schema.GroupVersionResource{Group: "apps"}), nil)
	wantMistakes(t, err,
		`kube: Resource[kube.cacheSpec, kube.cacheStatus]: missing Group`,
		`kube: Settings.Name "Memcached_Controller" must be a DNS-1123 subdomain`,
		`kube: Settings.Namespace "team.a" must be a DNS-1123 label`,
		`kube: Settings.Workers 0 must be at least 1`,
		`kube: Settings.Shards 0 must be from 1 to 256`,
		`kube: Settings.ShardBy "Uid" must be "uid" or "namespace"`,
		`kube: Settings.Resync 0s must be positive`,
		`kube: Settings.LowPriorityMaxWait 0s must be positive`,
		`kube: Settings.RetryMaxDelay 1s must be at least Settings.RetryBaseDelay 2s`,
		`kube: Settings.LeaderElection.Namespace "" is required`,
		`kube: Settings.LeaderElection.Identity "" is required`,
		`kube: Settings.LeaderElection.LeaseDuration 10s must be longer than RenewDeadline 10s`,
		`kube: Settings.LeaderElection.RenewDeadline 10s must be longer than 1.2 RetryPeriods (10.8s)`,
		`kube: Finalize("cache.example.com/finalizer"): f takes a v1.Namespace, and the controller's objects are kube.Object[`,
		`kube: Owns(apps/, Resource=): the GVR has no Version and no Resource`,
		`kube: part 2 is nil`,
	)
}

func TestNewKindControllerNamesEveryMistakeAtOnce(t *testing.T) {
	setup := &humus.Setup{Host: humustest.NewHost().Host()}
	s := testSettings()
	s.Namespace = "team-a"
	type notAnObject struct{ Name string }
	_, err := NewKindController(setup, testClient(t, setup), s,
		Kind[notAnObject]{GVR: schema.GroupVersionResource{Resource: "things"}, Scope: Cluster},
		KindReconcilerFunc[notAnObject](func(context.Context, notAnObject) (time.Duration, error) { return 0, nil }),
		Finalize("example.com/x", func(context.Context, notAnObject) error { return nil }),
		Finalize("example.com/y", func(context.Context, notAnObject) error { return nil }),
	)
	wantMistakes(t, err,
		`kube: Kind.GVR /, Resource=things: the GVR has no Version`,
		`kube: Kind.Kind is required`,
		`isn't a metav1.Object`,
		`kube: Settings.Namespace "team-a": a cluster-scoped resource can't be limited to a namespace`,
		`kube: Finalize("example.com/y") is a second finalizer; a controller has one, "example.com/x"`,
	)

	_, err = NewKindController(setup, testClient(t, setup), testSettings(),
		Kind[corev1.Namespace]{GVR: namespacesGVR, Kind: "Namespace", Scope: "Global"},
		KindReconcilerFunc[corev1.Namespace](func(context.Context, corev1.Namespace) (time.Duration, error) { return 0, nil }))
	wantMistakes(t, err, `kube: Kind.Scope "Global" is neither Namespaced nor Cluster`)
}

func TestNewKindControllerTakesTheCoreGroup(t *testing.T) {
	setup := &humus.Setup{Host: humustest.NewHost().Host()}
	_, err := NewKindController(setup, testClient(t, setup), testSettings(), namespaces,
		KindReconcilerFunc[corev1.Namespace](func(context.Context, corev1.Namespace) (time.Duration, error) { return 0, nil }),
		Owns(configMaps))
	if err != nil {
		t.Errorf("a Kind of the core group: %v", err)
	}
}

func TestAClusterScopedResourceCantBeLimitedToANamespace(t *testing.T) {
	setup := &humus.Setup{Host: humustest.NewHost().Host()}
	r := caches
	r.Scope = Cluster
	s := testSettings()
	s.Namespace = "default"
	_, err := NewController(setup, testClient(t, setup), s, r, readyReplicas(&counter{}))
	wantMistakes(t, err, `kube: Settings.Namespace "default": a cluster-scoped resource can't be limited to a namespace`)
}

func TestShardingByNamespaceNeedsNamespacesToDivide(t *testing.T) {
	setup := &humus.Setup{Host: humustest.NewHost().Host()}
	r := caches
	r.Scope = Cluster
	s := testSettings()
	s.Shards, s.ShardBy = 4, ShardByNamespace
	_, err := NewController(setup, testClient(t, setup), s, r, readyReplicas(&counter{}))
	wantMistakes(t, err, `kube: Settings.ShardBy "namespace": a cluster-scoped resource's objects have no namespace`)

	s.Namespace = "team-a"
	_, err = NewController(setup, testClient(t, setup), s, caches, readyReplicas(&counter{}))
	wantMistakes(t, err, `kube: Settings.ShardBy "namespace" with Settings.Namespace "team-a" puts every object in one shard`)

	s.Shards = 1 // one shard: nothing to divide, nothing wrong
	if _, err := NewController(setup, testClient(t, setup), s, caches, readyReplicas(&counter{})); err != nil {
		t.Fatal(err)
	}
}

// A Name of 129 to 253 characters was accepted, and then every apply was
// refused: the API server takes a field manager of at most 128.
func TestAControllersNameIsAFieldManagerOfAtMost128Characters(t *testing.T) {
	if maxFieldManager != metav1validation.FieldManagerMaxLength {
		t.Errorf("maxFieldManager = %d, and the API server's FieldManagerMaxLength %d", maxFieldManager, metav1validation.FieldManagerMaxLength)
	}
	setup := &humus.Setup{Host: humustest.NewHost().Host()}
	s := testSettings()
	s.Name, s.Shards = strings.Repeat("a", 200), 256
	_, err := NewController(setup, testClient(t, setup), s, caches, readyReplicas(&counter{}))
	wantMistakes(t, err, fmt.Sprintf(`kube: Settings.Name %q is 200 characters long: at most 128, since it is the controller's field manager`, s.Name))

	// The longest name leaves room for its shards' Lease names.
	s.Name = strings.Repeat("a", 128)
	if _, err := NewController(setup, testClient(t, setup), s, caches, readyReplicas(&counter{})); err != nil {
		t.Errorf("a Name of 128 characters with 256 shards: %v", err)
	}
}

// A finalizer's name without a domain was accepted: the API server only
// warns of one on a custom resource's object.
func TestAFinalizersNameIsDomainQualified(t *testing.T) {
	setup := &humus.Setup{Host: humustest.NewHost().Host()}
	fin := func(name string) Part {
		return Finalize(name, func(context.Context, Object[cacheSpec, cacheStatus]) error { return nil })
	}
	for _, tc := range []struct{ name, want string }{
		{"cache.example.com/finalizer", ""},
		{"example.com/a.b_c-d", ""},
		{"x-k8s.io/finalizer", ""},
		{"finalizer", `kube: Finalize("finalizer"): the name must be domain-qualified, such as example.com/finalizer, as the API server prefers a finalizer name to be, to avoid accidental conflicts with other finalizer writers`},
		{"cache.example.com", `kube: Finalize("cache.example.com"): the name must be domain-qualified, such as example.com/finalizer`},
		{"kubernetes.io/pv-protection", `kube: Finalize("kubernetes.io/pv-protection"): the name's prefix kubernetes.io is in kubernetes.io, which Kubernetes keeps for its own finalizers: use a domain of your own`},
		{"node.kubernetes.io/x", `kube: Finalize("node.kubernetes.io/x"): the name's prefix node.kubernetes.io is in kubernetes.io, which Kubernetes keeps for its own finalizers`},
		{"gateway.networking.k8s.io/x", `kube: Finalize("gateway.networking.k8s.io/x"): the name's prefix gateway.networking.k8s.io is in k8s.io, which Kubernetes keeps for its own finalizers`},
		{"Example.com/x", `kube: Finalize("Example.com/x"): the name must be a qualified name, such as example.com/finalizer: prefix part a lowercase RFC 1123 subdomain`},
		{"example.com/", `kube: Finalize("example.com/"): the name must be a qualified name, such as example.com/finalizer: name part must be non-empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewController(setup, testClient(t, setup), testSettings(), caches, readyReplicas(&counter{}), fin(tc.name))
			if tc.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			wantMistakes(t, err, tc.want)
		})
	}

	// Every mistake at once: the finalizer's with the rest.
	s := testSettings()
	s.Name = strings.Repeat("b", 129)
	_, err := NewController(setup, testClient(t, setup), s, caches, readyReplicas(&counter{}), fin("cleanup"))
	wantMistakes(t, err,
		fmt.Sprintf(`kube: Settings.Name %q is 129 characters long`, s.Name),
		`kube: Finalize("cleanup"): the name must be domain-qualified`,
	)
}
