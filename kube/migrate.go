package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/z5labs/humus/kube/internal/control"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Migration is how far Migrate has come.
type Migration struct {
	// Rewritten counts the objects Migrate wrote at the storage version,
	// which were stored at another; Stored those it found stored at it
	// already, whose write the API server skipped, and those written or
	// deleted by someone else meanwhile, which need no write.
	Rewritten, Stored int

	// Remaining is about how many objects are left to look at, as the API
	// server estimates it; -1 when it doesn't say.
	Remaining int64

	// Done is true once every object is stored at the storage version and
	// the CRD's status.storedVersions says so.
	Done bool
}

// crdsResource is the CustomResourceDefinitions' resource.
var crdsResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// migratePage is how many objects Migrate lists at a time.
const migratePage = 500

// Migrate moves every object of the resource to the storage version, after
// Storage changed: it rewrites each object the API server has stored at
// another version, then brings the CRD's status.storedVersions down to
// Storage alone, which is what lets a version be removed from the CRD.
//
// It lists the objects at Storage, in every namespace, a page at a time,
// and writes each back unchanged: the API server stores it at Storage, or,
// for one stored there already, skips the write. An object changed or
// deleted since it was listed needs no write: whoever changed it wrote it
// at Storage. progress, when not nil, is called after each page, and
// once at the end, with Done.
//
// It is idempotent and resumable: run again, after an error or an
// interruption, it writes only what is still stored at another version,
// and returns at once when storedVersions is Storage alone. It refuses to
// run while the CRD in the cluster stores at another version than
// Storage: apply the CRD first. Only after every object is written does it
// update storedVersions, so an object stored at an old version is never
// left unaccounted for.
//
// d reaches the API server with rights to list and update the resource's
// objects in every namespace, and to get the CRD and update its status
// (customresourcedefinitions/status), such as a dynamic client of
// Client.Config, in a Job or a command of its own, run once the pods that
// serve the conversion webhook are ready. Not in the controller's Init:
// Init runs before any of the App's Services, the webhook's included, and
// each rewrite of an object stored at another version is converted by the
// webhook, so on a first install, or a restart of every replica, there is
// none to answer, Init fails, and the pods crash-loop. A page whose
// continue token expires meanwhile (a pass longer than etcd's compaction
// interval) goes on with the token the API server offers for the rest.
func (v Versions[HubSpec, HubStatus]) Migrate(ctx context.Context, d dynamic.Interface, progress func(Migration)) error {
	if _, errs := v.build(); len(errs) > 0 {
		return fmt.Errorf("kube: Migrate: %w", errors.Join(errs...))
	}
	name := v.Hub.Plural + "." + v.Hub.Group
	crd, err := d.Resource(crdsResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kube: Migrate: getting the CRD %s: %w", name, err)
	}
	if err := storesAt(crd, v.Storage); err != nil {
		return fmt.Errorf("kube: Migrate: %w", err)
	}
	stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	report := func(m Migration) {
		if progress != nil {
			progress(m)
		}
	}
	if slices.Equal(stored, []string{v.Storage}) {
		report(Migration{Remaining: 0, Done: true})
		return nil
	}

	m, err := v.rewriteAll(ctx, d, report)
	if err != nil {
		return err
	}
	if err := v.setStoredVersions(ctx, d, crd); err != nil {
		return err
	}
	m.Remaining, m.Done = 0, true
	report(m)
	return nil
}

// rewriteAll writes every object of the resource back at Storage, a page
// at a time, calling report after each page but the last.
func (v Versions[HubSpec, HubStatus]) rewriteAll(ctx context.Context, d dynamic.Interface, report func(Migration)) (Migration, error) {
	name := v.Hub.Plural + "." + v.Hub.Group
	objects := d.Resource(schema.GroupVersionResource{Group: v.Hub.Group, Version: v.Storage, Resource: v.Hub.Plural})
	var m Migration
	opts := metav1.ListOptions{Limit: migratePage}
	for {
		list, err := objects.List(ctx, opts)
		if next, ok := expiredContinue(err); ok && opts.Continue != "" {
			// The page's continue token outlived etcd's compaction: the
			// API server offers one that lists the rest from now, which
			// misses nothing a migration needs (an object created since is
			// created at Storage), where starting over would rewrite the
			// pages done again, and compact away again on a long pass.
			opts.Continue = next
			continue
		}
		if err != nil {
			return m, fmt.Errorf("kube: Migrate: listing the %s at %s: %w", name, v.Storage, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			ri := dynamic.ResourceInterface(objects)
			if ns := u.GetNamespace(); ns != "" {
				ri = objects.Namespace(ns)
			}
			out, err := ri.Update(ctx, u, metav1.UpdateOptions{})
			switch {
			case apierrors.IsConflict(err), apierrors.IsNotFound(err):
				m.Stored++ // written or deleted since: at Storage, or gone
			case err != nil:
				return m, fmt.Errorf("kube: Migrate: rewriting %s %s at %s: %w", v.Hub.Kind, control.Key(u), v.Storage, err)
			case out.GetResourceVersion() == u.GetResourceVersion():
				m.Stored++ // the API server skipped the write: stored at Storage
			default:
				m.Rewritten++
			}
		}
		m.Remaining = -1
		if list.GetRemainingItemCount() != nil {
			m.Remaining = *list.GetRemainingItemCount()
		}
		opts.Continue = list.GetContinue()
		if opts.Continue == "" {
			break
		}
		report(m)
	}

	return m, nil
}

// expiredContinue is the continue token a 410 Gone offers for the rest of
// a list whose continue token expired, if err is one that offers it.
func expiredContinue(err error) (string, bool) {
	var status apierrors.APIStatus
	if !apierrors.IsResourceExpired(err) || !errors.As(err, &status) {
		return "", false
	}
	next := status.Status().Continue
	return next, next != ""
}

// setStoredVersions sets the CRD's status.storedVersions to Storage alone,
// on the CRD as it is now, again after a conflict.
func (v Versions[HubSpec, HubStatus]) setStoredVersions(ctx context.Context, d dynamic.Interface, crd *unstructured.Unstructured) error {
	name := crd.GetName()
	for {
		if err := unstructured.SetNestedStringSlice(crd.Object, []string{v.Storage}, "status", "storedVersions"); err != nil {
			return fmt.Errorf("kube: Migrate: the CRD %s: %w", name, err)
		}
		_, err := d.Resource(crdsResource).UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("kube: Migrate: setting the CRD %s's status.storedVersions to [%s]: %w", name, v.Storage, err)
		}
		if crd, err = d.Resource(crdsResource).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("kube: Migrate: getting the CRD %s: %w", name, err)
		}
		if err := storesAt(crd, v.Storage); err != nil {
			return fmt.Errorf("kube: Migrate: %w", err)
		}
	}
	return nil
}

// storesAt says what is wrong when the CRD crd doesn't store at version.
func storesAt(crd *unstructured.Unstructured, version string) error {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, cv := range versions {
		cvm, _ := cv.(map[string]any)
		if storage, _ := cvm["storage"].(bool); storage {
			if n, _ := cvm["name"].(string); n != version {
				return fmt.Errorf("the CRD %s stores at %s, not at Storage %s: apply the CRD of Storage %s first", crd.GetName(), n, version, version)
			}
			return nil
		}
	}
	return fmt.Errorf("the CRD %s has no storage version", crd.GetName())
}
