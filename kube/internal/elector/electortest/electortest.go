// Package electortest makes client-go's fake clientset keep a Lease's
// resourceVersion as the API server does, for the tests of the elector and
// of the controller that leads with it:
//
//   - each create or update of a Lease stores a new resourceVersion, and
//     answers with it;
//   - an update whose resourceVersion isn't the stored one is a conflict,
//     and changes nothing.
package electortest

import (
	"errors"
	"strconv"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// CheckVersions makes c do what the real API server does with a Lease's
// resourceVersion, which client-go's fake tracker doesn't: an update whose
// resourceVersion isn't the stored one is a conflict, and each write
// stores a new one.
func CheckVersions(c *fake.Clientset) {
	var mu sync.Mutex
	next := 0
	c.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		var l *coordinationv1.Lease
		switch a.GetVerb() {
		case "create":
			l = a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		case "update":
			l = a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
			stored, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), l.Name)
			if err != nil {
				return true, nil, err
			}
			if rv := stored.(*coordinationv1.Lease).ResourceVersion; l.ResourceVersion != rv {
				return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), l.Name, errors.New("the object has been modified"))
			}
		default:
			return false, nil, nil
		}
		next++
		l.ResourceVersion = strconv.Itoa(next)
		var err error
		if a.GetVerb() == "create" {
			err = c.Tracker().Create(a.GetResource(), l, a.GetNamespace())
		} else {
			err = c.Tracker().Update(a.GetResource(), l, a.GetNamespace())
		}
		if err != nil {
			return true, nil, err
		}
		return true, l.DeepCopy(), nil
	})
}
