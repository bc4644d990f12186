package kube

import (
	"reflect"

	"github.com/z5labs/humus/kube/internal/cache"
	"github.com/z5labs/humus/kube/internal/control"

	"k8s.io/apimachinery/pkg/types"
)

// Related reconciles the controller's objects that keys names when an
// object of r changes: keys is called with the object before and after
// each change (on its creation, the object; on its deletion, its last
// state), and every object either names is reconciled, so a reference
// that moves away reconciles its old referrer too. An object of the
// controller's resource is named by its namespace and name, its
// namespace "" when the resource is cluster-scoped.
//
// A related change queues as a change of the controller's own object
// does: at normal priority, ahead of a cold start's backlog. The
// controller's own writes to r's objects, made through a clientset built
// from Client.Config with the context Reconcile is handed, queue nothing,
// as those to the resources it owns don't. The objects r holds when the
// controller starts queue nothing either: every object of the
// controller's is reconciled at its start anyway. A panic in keys is
// recovered and recorded, and maps the change to nothing.
//
// Related reads r: NewController checks r as Reads does.
func Related[R any](r *Reader[R], keys func(obj R) []types.NamespacedName) Part {
	return related{r: r.reader, mapper: func(u *cache.Object) ([]types.NamespacedName, error) {
		var obj R
		if err := control.Decode(u, &obj); err != nil {
			return nil, err
		}
		return keys(obj), nil
	}}
}

// References reconciles each of the controller's objects when an object
// of r it refers to changes, is created or is deleted: refs, a function
// of the controller's own object, names the objects of r it refers to,
// such as the ConfigMap a Website's spec names. The controller keeps an
// index of its objects by what refs returns, updated as they change, so a
// related change finds its referrers without a scan: every Website
// naming a ConfigMap is reconciled when it changes. A reference changed
// to another object follows the new one from then on. T is the
// Controller's object type, as Finalize's is: NewController checks it.
//
// A panic in refs, or an object that can't be decoded into T, is
// recovered and recorded once for that object, which is then indexed by
// nothing until it changes. Related's other promises hold for References
// too.
func References[R, T any](r *Reader[R], refs func(obj T) []types.NamespacedName) Part {
	return related{r: r.reader, typ: reflect.TypeFor[T](), index: func(u *cache.Object) ([]types.NamespacedName, error) {
		var obj T
		if err := control.Decode(u, &obj); err != nil {
			return nil, err
		}
		return refs(obj), nil
	}}
}

type related struct {
	r *reader
	// mapper maps a related object to the controller's keys (Related), or
	// index maps a controller's object to the related objects it names
	// (References), of type typ.
	mapper func(u *cache.Object) ([]types.NamespacedName, error)
	index  func(u *cache.Object) ([]types.NamespacedName, error)
	typ    reflect.Type
}

func (related) part() {}
