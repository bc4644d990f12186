package control

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"

	"k8s.io/klog/v2"

	"github.com/z5labs/humus/kube/internal/elector"
)

// ErrLostLeadership is kube.ErrLostLeadership.
var ErrLostLeadership = errors.New("kube: lost the lease")

// OneLease leads on the controller's one Lease, named Settings.Name: every
// replica keeps caches of every object warm, and the Lease's holder
// reconciles them, in one term of leading.
type OneLease struct {
	c *Controller
	// blocked, when set, reports whether a held Lease that covers some of
	// the objects keeps this replica from the one Lease: a shard's, during
	// a rollout from shards back to one (shardLeasesHeld). gaveBack is
	// logged when it finds one just after taking the one Lease, and gives
	// it back.
	blocked  func(ctx context.Context) bool
	gaveBack string

	W atomic.Pointer[Work] // from the start of its informers
}

func (l *OneLease) each(f func(*Work)) {
	if w := l.W.Load(); w != nil {
		f(w)
	}
}

// serve runs steps 2 to 5 on the one Lease.
func (l *OneLease) serve(ctx, stopping context.Context, inf *informing) error {
	c := l.c
	w := c.NewWork(nil)
	defer w.Q.ShutDown()
	defer w.Later.Stop()

	// 2 and 3. Start the informers, of every object, the resource's own
	// and the shared ones of the resources it owns, and wait for the
	// caches to sync.
	own := c.ownInformer()
	if err := c.handle([]toolscache.SharedIndexInformer{own}, w, inf.watch); err != nil {
		return err
	}
	w.Store = own.GetIndexer()
	l.W.Store(w)
	owned, err := c.joinOwned(w, inf.watch)
	if err != nil {
		return err
	}
	defer leaveAll(owned)
	if !inf.start(inf.ctx, stopping, []toolscache.SharedIndexInformer{own}, owned...) {
		return nil // shutdown began, or a resource stopped being served
	}
	c.Ready.MarkHealthy()

	// 4 and 5. Campaign for the Lease, and reconcile while holding it.
	return l.lead(ctx, stopping, w)
}

// lead campaigns for the Lease and, once it holds it, runs a term of
// leading on w until shutdown begins (stopping is done) or the Lease can no
// longer be proven. A Lease this replica is forbidden to read or write
// ends Serve with the API server's answer.
func (l *OneLease) lead(ctx, stopping context.Context, w *Work) error {
	c := l.c
	leading := make(chan struct{})
	campaigning, stopCampaigning := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), c.tel.logr))
	var el *elector.Elector
	cfg := c.electorConfig(c.name)
	cfg.Blocked, cfg.GiveBack = l.blocked, func() {
		el.Log().Info(l.gaveBack)
		c.release(el)
	}
	el = elector.New(cfg)
	campaigned := make(chan struct{})
	go func() {
		defer close(campaigned)
		el.Campaign(campaigning, leading)
	}()
	defer func() {
		stopCampaigning()
		<-campaigned
	}()

	select {
	case <-leading:
	case <-stopping.Done():
		return nil
	case <-el.Refused():
		return el.DeniedErr()
	}

	t := c.newTerm(ctx, el, w, campaigned, stopCampaigning)
	defer t.close()
	t.lead()
	if !t.serve(stopping.Done(), nil) {
		return nil
	}
	if !t.lose() {
		c.tel.log.ErrorContext(ctx, "a reconcile ignored its cancelled context: Serve returns without it", "lease", el.Describe())
	}
	if refused := el.RefusedErr(); refused != nil {
		// The renewals were refused: say which request, as Serve does for
		// a Lease it may not take.
		return fmt.Errorf("%w: %w", ErrLostLeadership, refused)
	}
	return ErrLostLeadership
}

// electorConfig is this replica's elector on the Lease named name, in the
// Lease's namespace.
func (c *Controller) electorConfig(name string) elector.Config {
	le := c.settings.LeaderElection
	return elector.Config{
		Leases:        c.API.Leases.Leases(le.Namespace),
		Namespace:     le.Namespace,
		Name:          name,
		Identity:      le.Identity,
		Process:       c.processID,
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
		Grace:         UnservedGrace,
		Log:           c.tel.logr.WithValues("lock", le.Namespace+"/"+name),
	}
}

// release gives the Lease up on shutdown, once the workers have stopped, so
// the next replica takes over without waiting out LeaseDuration: only while
// this replica is still its holder (elector.Release). It gives up after
// RenewDeadline, or when Shutdown's context ends.
func (c *Controller) release(el *elector.Elector) {
	ctx, cancel := context.WithTimeout(klog.NewContext(c.work, c.tel.logr), c.settings.LeaderElection.RenewDeadline)
	defer cancel()
	if err := el.Release(ctx); err != nil {
		c.tel.log.WarnContext(ctx, "releasing the lease", "lease", el.Describe(), "error", err.Error())
	}
}
