package control

import (
	"context"
	"sync"

	"github.com/z5labs/humus/kube/internal/cache"

	toolscache "k8s.io/client-go/tools/cache"
)

// informing runs the replica's informers, from step 2 until Serve returns.
type informing struct {
	ctx     context.Context // the informers run until it ends, at the latest
	running sync.WaitGroup  // the informers, and the watch's probes
	watch   *servedWatch    // sees their list and watch errors
}

// start starts informers, each until run or the informing ends, and waits
// for their caches, and those of the shared informers' users, to sync
// until syncing ends: it reports whether they synced.
func (inf *informing) start(run, syncing context.Context, informers []toolscache.SharedIndexInformer, shared ...*cache.User) bool {
	synced := make([]toolscache.InformerSynced, 0, len(informers)+len(shared))
	for _, i := range informers {
		inf.running.Go(func() { i.RunWithContext(run) })
		synced = append(synced, i.HasSynced)
	}
	for _, u := range shared {
		synced = append(synced, u.Synced)
	}
	return toolscache.WaitForNamedCacheSyncWithContext(syncing, synced...)
}
