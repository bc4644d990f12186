package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
		{"a name of 128 characters", CheckName(strings.Repeat("m", 128)), ""},
		// The API server refuses a field manager over 128 characters, and the
		// name is the field manager of every apply (issue 22, point 4).
		{"a name of 129 characters", CheckName(strings.Repeat("m", 129)), `kube: name "` + strings.Repeat("m", 129) + `" must be at most 128 characters: the API server's limit on a field manager, which the name is`},
		{"every namespace", CheckWatchNamespace(""), ""},
		{"a watch namespace", CheckWatchNamespace("team-a"), ""},
		{"a dotted watch namespace", CheckWatchNamespace("team.a"), `kube: namespace "team.a" must be a DNS-1123 label`},
		{"a Lease namespace", CheckNamespace("kube-system"), ""},
		{"no Lease namespace", CheckNamespace(""), `kube: namespace "" is required`},
		{"an identity", CheckIdentity("memcached-7d9f"), ""},
		{"no identity", CheckIdentity(""), `kube: identity "" is required`},
		{"one worker", CheckWorkers(1), ""},
		{"no workers", CheckWorkers(0), "kube: workers 0 must be at least 1"},
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
		LeaderElection: LeaderElection{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
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

func TestAShardedControllersNameLeavesRoomForItsLeases(t *testing.T) {
	setup := &humus.Setup{Host: humustest.NewHost().Host()}
	s := testSettings()
	s.Name, s.Shards = strings.Repeat("a", 128), 256 // its last Lease: Name-255-of-256, 139 characters
	if _, err := NewController(setup, testClient(t, setup), s, caches, readyReplicas(&counter{})); err != nil {
		t.Errorf("a Name of 128 characters with 256 shards: %v", err)
	}
	s.Name = strings.Repeat("a", 129)
	_, err := NewController(setup, testClient(t, setup), s, caches, readyReplicas(&counter{}))
	wantMistakes(t, err, fmt.Sprintf(`kube: Settings.Name %q must be at most 128 characters: the API server's limit on a field manager, which the name is`, s.Name))
}
