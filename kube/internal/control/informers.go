package control

import (
	"fmt"

	"github.com/z5labs/humus/kube/internal/cache"

	toolscache "k8s.io/client-go/tools/cache"
)

// The informers a controller runs, from Serve's step 2 until it returns:
// informing (informing.go), which starts them and waits for their caches;
// the informer of the controller's own resource (ownInformer) and its
// handlers (handle); and its joins of the Client's shared informers
// (kube/internal/cache) of each resource it Owns or reads. Whether the
// resources they list and watch are served is checked in
// informers_served.go, and watched while they run in servedwatch.go.

// ownInformer is the informer of the controller's own resource, through
// its objects' REST client (clients.objects), limited to
// Settings.Namespace and its selectors, with an index for each
// References.
func (c *Controller) ownInformer() toolscache.SharedIndexInformer {
	res := c.API.Objects(c.gvr, c.settings.Namespace)
	list, watch := cache.Selecting(c.watched[0], res.List, res.Watch)
	lw := toolscache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watch}
	return cache.NewInformer(lw, c.API.Dynamic, c.gvr, &cache.Object{}, c.settings.Resync, c.Indexers())
}

// joinOwned joins the shared informer of each resource the controller
// owns, in Settings.Namespace, with its selectors, queueing their owners
// on w.
func (c *Controller) joinOwned(w *Work, watch *servedWatch) ([]*cache.User, error) {
	var users []*cache.User
	for i, gvr := range c.owned {
		e := c.cache.Entry(c.watched[1+i], false)
		u, err := e.Join(c.API.Clients, c.tel.logr, c.OwnerKeys(w, gvr.GroupResource()), watch.check(1+i))
		if err != nil {
			leaveAll(users)
			return nil, err
		}
		users = append(users, u)
	}
	return users, nil
}

// joinReads joins the shared informer of each resource the controller
// reads, and adds each Related's and References' handler.
func (c *Controller) joinReads(watch *servedWatch) ([]*cache.User, error) {
	var users []*cache.User
	for i, r := range c.reads {
		u, err := r.Entry.Join(c.API.Clients, c.tel.logr, nil, watch.check(1+len(c.owned)+i))
		if err != nil {
			leaveAll(users)
			return nil, err
		}
		users = append(users, u)
	}
	for _, rel := range c.Relations {
		u, err := rel.Source.Entry.Join(c.API.Clients, c.tel.logr, c.RelatedKeys(rel), nil)
		if err != nil {
			leaveAll(users)
			return nil, err
		}
		users = append(users, u)
	}
	return users, nil
}

// leaveAll ends each of users' use of its informer.
func leaveAll(users []*cache.User) {
	for _, u := range users {
		u.Leave()
	}
}

// handle gives informers, the resource's first and then each owned
// resource's, their event handlers, queueing keys on w, their watch error
// handlers, seen by watch, and each owned resource's the transform of
// what its cache keeps; the resource's objects come decoded into the
// cache's form (clients.objects).
func (c *Controller) handle(informers []toolscache.SharedIndexInformer, w *Work, watch *servedWatch) error {
	handlers := []toolscache.ResourceEventHandler{c.ObjectKeys(w)}
	for _, gvr := range c.owned {
		handlers = append(handlers, c.OwnerKeys(w, gvr.GroupResource()))
	}
	for i, inf := range informers {
		logger := c.tel.logr
		if _, err := inf.AddEventHandlerWithOptions(handlers[i], toolscache.HandlerOptions{Logger: &logger}); err != nil {
			return fmt.Errorf("kube: adding an event handler: %w", err)
		}
		if err := inf.SetWatchErrorHandlerWithContext(watch.handler(i)); err != nil {
			return fmt.Errorf("kube: setting a watch error handler: %w", err)
		}
		if i == 0 {
			continue // its objects are decoded into the cache's form
		}
		if err := inf.SetTransform(cache.OwnedMetadata); err != nil {
			return fmt.Errorf("kube: setting a transform: %w", err)
		}
	}
	return nil
}
