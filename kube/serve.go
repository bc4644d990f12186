package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

var errNotServing = errors.New("kube: the controller isn't serving")

// Serve runs the controller until its context is done, and then returns
// nil once the reconciles in flight have finished and the Lease is
// released. It returns an error naming the resource when the resource
// isn't served, such as when its CRD isn't installed, and
// ErrLostLeadership when the replica loses the Lease.
//
// Every replica lists and watches, and keeps its caches warm; only the
// Lease's holder reconciles, with Settings.Workers workers.
func (c *Controller) Serve(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return fmt.Errorf("kube: controller %s: Serve was called twice", c.name)
	}
	defer close(c.done)
	if c.clients.closeIdle != nil {
		defer c.clients.closeIdle()
	}
	defer c.synced.MarkUnhealthy(errNotServing)

	ctx = klog.NewContext(ctx, c.tel.logr)
	stopping, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-c.stop:
		case <-stopping.Done():
		}
		stop()
	}()

	// 1. Check the resource is served.
	if err := c.checkServed(stopping); err != nil {
		if stopping.Err() != nil {
			return nil
		}
		return err
	}

	// 2. Start the informers. They run until Serve returns, after the
	// Lease is released, so a new leader's caches stay warm meanwhile.
	q := newQueue(c.name, c.settings, c.tel.queueMetrics, c.tel.logr)
	defer q.ShutDown()
	informers, err := c.informers(q)
	if err != nil {
		return err
	}
	informing, stopInformers := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), c.tel.logr))
	var running sync.WaitGroup
	defer running.Wait()
	defer stopInformers()
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		running.Go(func() { inf.RunWithContext(informing) })
		synced = append(synced, inf.HasSynced)
	}

	// 3. Wait for the caches to sync.
	if !cache.WaitForNamedCacheSyncWithContext(stopping, synced...) {
		return nil // shutdown began first
	}
	c.synced.MarkHealthy()

	// 4 and 5. Campaign for the Lease, and reconcile while holding it.
	return c.lead(ctx, stopping, q, informers[0].GetIndexer())
}

// checkServed lists the resource once, with a limit of 1, so a resource
// that isn't served ends Serve loudly, rather than leaving an informer to
// retry its list forever and only log.
func (c *Controller) checkServed(ctx context.Context) error {
	_, err := c.clients.dynamic.Resource(c.gvr).Namespace(c.settings.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("kube: listing %s: %w", c.gvr, err)
	}
	return nil
}

// informers returns the resource's informer first, through the dynamic
// client, and one for each owned resource, through the metadata client,
// all limited to Settings.Namespace, with their event handlers queueing
// keys on q.
func (c *Controller) informers(q queue) ([]cache.SharedIndexInformer, error) {
	ns, resync := c.settings.Namespace, c.settings.Resync
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	own := dynamicinformer.NewFilteredDynamicInformer(c.clients.dynamic, c.gvr, ns, resync, indexers, nil).Informer()
	infs := []cache.SharedIndexInformer{own}
	handlers := []cache.ResourceEventHandler{c.objectEvents(q)}
	for _, gvr := range c.owned {
		// An owned resource's resync would only repeat the owner's.
		infs = append(infs, metadatainformer.NewFilteredMetadataInformer(c.clients.metadata, gvr, ns, 0, cache.Indexers{}, nil).Informer())
		handlers = append(handlers, c.ownedEvents(q))
	}
	for i, inf := range infs {
		logger := c.tel.logr
		if _, err := inf.AddEventHandlerWithOptions(handlers[i], cache.HandlerOptions{Logger: &logger}); err != nil {
			return nil, fmt.Errorf("kube: adding an event handler: %w", err)
		}
	}
	return infs, nil
}

// lead campaigns for the Lease and, once it holds it, runs the workers
// until shutdown begins (stopping is done) or the Lease is lost.
func (c *Controller) lead(ctx, stopping context.Context, q queue, objects cache.Indexer) error {
	le := c.settings.LeaderElection
	leading := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: c.name},
			Client:     c.clients.leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
		},
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
		// The Lease is released only after the reconciles in flight have
		// finished: the workers are stopped before campaigning is.
		ReleaseOnCancel: true,
		Name:            c.name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("kube: controller %s: leader election: %w", c.name, err)
	}
	campaigning, stopCampaigning := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), c.tel.logr))
	defer stopCampaigning()
	campaigned := make(chan struct{})
	go func() {
		defer close(campaigned)
		elector.Run(campaigning)
	}()
	release := func() {
		stopCampaigning()
		<-campaigned
	}

	select {
	case <-leading:
	case <-stopping.Done():
		release()
		return nil
	case <-campaigned:
		// Run returns before leading only when its context is done.
		return ErrLostLeadership
	}

	var workers sync.WaitGroup
	work := klog.NewContext(c.work, c.tel.logr)
	for range c.settings.Workers {
		workers.Go(func() { c.worker(work, q, objects) })
	}
	stopWorkers := func() {
		c.stopTaking(q)
		workers.Wait()
	}

	select {
	case <-stopping.Done():
		stopWorkers()
		release()
		return nil
	case <-campaigned:
		c.cancelWork()
		stopWorkers()
		return ErrLostLeadership
	}
}
