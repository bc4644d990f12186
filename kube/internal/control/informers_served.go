package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/z5labs/humus/kube/internal/cache"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// Whether the resources the informers list and watch are served, and may
// be listed and watched: checkServed, once, at Serve's step 1; and while
// the controller runs, servedWatch, on the informers' list and watch
// errors and on the rights probe's lists, which ends Serve once a resource
// has answered NotFound or Forbidden for unservedGrace.

// How long a controller waits on the API server before it gives up.
const (
	// startRetry bounds how long step 1 retries a transient error, such
	// as a refused connection, a 429 or a 5xx, before it ends Serve: long
	// enough for a rolling upgrade of the API server, short enough that a
	// controller that can't start says so.
	startRetry = time.Minute

	retryFirst = 500 * time.Millisecond
	retryMax   = 8 * time.Second
)

// checkServed lists the controller's resource, and each it owns, once, with
// a limit of 1, so a resource that isn't served, or may not be listed, ends
// Serve loudly, rather than leaving an informer to retry its list forever
// and only log. A transient error is retried with backoff for startRetry.
func (c *Controller) checkServed(ctx context.Context) error {
	for i := range c.watched {
		delay, deadline := retryFirst, time.Now().Add(startRetry)
		for {
			_, err := c.list(ctx, i, metav1.ListOptions{Limit: 1})
			if err == nil {
				break
			}
			if !transient(err) || time.Now().Add(delay).After(deadline) {
				return err
			}
			c.tel.log.WarnContext(ctx, "the API server is unavailable: retrying", "error", err.Error(), "after", delay)
			if !sleep(ctx, delay) {
				return err
			}
			delay = min(2*delay, retryMax)
		}
	}
	return nil
}

// list lists the i-th resource once, with opts and the resource's
// selectors: the controller's own through the dynamic client, any other
// through the metadata client. It returns the list's resourceVersion.
func (c *Controller) list(ctx context.Context, i int, opts metav1.ListOptions) (string, error) {
	k := c.watched[i]
	gvr := k.GVR
	opts.LabelSelector, opts.FieldSelector = cache.AndSelector(opts.LabelSelector, k.Labels), cache.AndSelector(opts.FieldSelector, k.Fields)
	var list metav1.ListInterface
	var err error
	if i == 0 {
		list, err = c.API.Dynamic.Resource(gvr).Namespace(k.Namespace).List(ctx, opts)
	} else {
		list, err = c.API.Metadata.Resource(gvr).Namespace(k.Namespace).List(ctx, opts)
	}
	if err != nil {
		return "", fmt.Errorf("kube: listing %s: %w", gvr, err)
	}
	return list.GetResourceVersion(), nil
}

// ProbeName is the one name the rights probe lists: the API server reads
// a list of one name by its key, where a list of a namespace, even with a
// limit of 1, goes through every object of it (at 100,000 Memcacheds and
// their Deployments, 0.6% of kube-apiserver's CPU, the lists of two
// resources every rightsProbe, a cost that grows with the objects). It
// authorizes the list as a list of the resource, of that name: the same
// answer as for the informer's list unless a role names its objects one
// by one (resourceNames), which no informer's list passes, as the
// controller's start finds.
const ProbeName = "humus-kube-rights-probe"

// probeList is the rights probe's list: of probeName, in the controller's
// namespace. A controller of every namespace names one too when its
// resource is namespaced, as the objects it owns are then:
// the API server reads a list of every namespace by its key only when its
// selector names the namespace.
func (c *Controller) probeList(i int) metav1.ListOptions {
	selector := fields.OneTermEqualSelector("metadata.name", ProbeName)
	scope := c.Scope // an owned resource's is taken to be its owner's
	if r := i - 1 - len(c.owned); r >= 0 {
		scope = c.reads[r].Scope
	}
	if c.watched[i].Namespace == "" && scope == Namespaced {
		selector = fields.AndSelectors(selector, fields.OneTermEqualSelector("metadata.namespace", metav1.NamespaceDefault))
	}
	return metav1.ListOptions{FieldSelector: selector.String(), Limit: 1}
}

// listAndWatch lists the i-th resource, of probeName, and opens a watch of
// it from the list's resourceVersion, as its informer does, and stops it
// at once: whether the API server lets this replica list and watch it. A
// watch without a resourceVersion would begin with every object there is
// (the API server makes and sends them until the watch stops); from the
// list's, it begins with none.
func (c *Controller) listAndWatch(ctx context.Context, i int) error {
	rv, err := c.list(ctx, i, c.probeList(i))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	k, opts := c.watched[i], metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: new(int64(1))}
	gvr := k.GVR
	var w watch.Interface
	if i == 0 {
		w, err = c.API.Dynamic.Resource(gvr).Namespace(k.Namespace).Watch(ctx, opts)
	} else {
		w, err = c.API.Metadata.Resource(gvr).Namespace(k.Namespace).Watch(ctx, opts)
	}
	if err != nil {
		return fmt.Errorf("kube: watching %s: %w", gvr, err)
	}
	w.Stop()
	return nil
}

// transient reports whether err may pass by itself: a 429, a 5xx, or no
// answer at all, such as a refused connection.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	return true
}

func newServedWatch(c *Controller, ctx context.Context, fail context.CancelCauseFunc, running *sync.WaitGroup) *servedWatch {
	return &servedWatch{
		resources: len(c.watched), listAndWatch: c.listAndWatch,
		ctx: ctx, fail: fail, running: running, checking: map[int]bool{},
	}
}
