package clustertest

import (
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// halves are the shard selectors of the lower and the upper half of the
// 64-bit FNV-1a hash space of metadata.uid.
var halves = [2]string{
	"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
	"shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
}

// TestClusterFeatureGates checks that FeatureGates turns on an alpha
// gate of kube-apiserver: without ShardedListAndWatch a shard selector is
// ignored; with it each half of the hash space lists exactly the
// ConfigMaps whose uid hashes into it, echoing the selector; and once the
// test that turned it on is over, the selector is ignored again.
func TestClusterFeatureGates(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	client := adminClient(t, c)
	const n = 20
	for i := range n {
		createConfigMap(t, client, ns, "cm-"+strconv.Itoa(i), nil)
	}
	wantUnsharded(t, client, ns, n)
	t.Run("ShardedListAndWatch", func(t *testing.T) {
		c.FeatureGates(t, "ShardedListAndWatch=true")
		wantSharded(t, client, ns, n)
	})
	// The subtest's cleanup restarted kube-apiserver without the gate.
	wantUnsharded(t, client, ns, n)
}

// wantUnsharded checks that each half's shard selector, ignored, lists
// all n ConfigMaps in ns.
func wantUnsharded(t testing.TB, client kubernetes.Interface, ns string, n int) {
	t.Helper()
	for _, sel := range halves {
		if got := listShard(t, client, ns, sel); len(got.Items) != n {
			t.Errorf("without the gate, %s lists %d ConfigMaps, want all %d", sel, len(got.Items), n)
		}
	}
}

// wantSharded checks that the halves' lists split the n ConfigMaps in ns
// by their uid's hash, and echo their selectors.
func wantSharded(t testing.TB, client kubernetes.Interface, ns string, n int) {
	t.Helper()
	seen := map[string]bool{}
	for half, sel := range halves {
		list := listShard(t, client, ns, sel)
		if list.ShardInfo == nil || list.ShardInfo.Selector != sel {
			t.Errorf("the list of %s has shardInfo %+v, want its selector", sel, list.ShardInfo)
		}
		for _, cm := range list.Items {
			if seen[cm.Name] {
				t.Errorf("ConfigMap %s is in both halves", cm.Name)
			}
			seen[cm.Name] = true
			if want := uidHalf(cm.UID); want != half {
				t.Errorf("ConfigMap %s (uid %s) is in half %d, want %d", cm.Name, cm.UID, half, want)
			}
		}
	}
	if len(seen) != n {
		t.Errorf("the halves list %d ConfigMaps between them, want %d: %v", len(seen), n, slices.Sorted(maps.Keys(seen)))
	}
}

// listShard lists the ConfigMaps in ns with shard selector sel.
func listShard(t testing.TB, client kubernetes.Interface, ns, sel string) *corev1.ConfigMapList {
	t.Helper()
	list, err := client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{ShardSelector: sel})
	if err != nil {
		t.Fatalf("listing ConfigMaps in %s with %s: %v", ns, sel, err)
	}
	return list
}

// uidHalf is the half of the hash space, 0 lower or 1 upper, that uid's
// 64-bit FNV-1a hash falls in.
func uidHalf(uid types.UID) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return int(h.Sum64() >> 63)
}
