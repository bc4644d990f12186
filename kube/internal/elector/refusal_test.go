package elector

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// 403s, with no success between, are final once they have come for the
// grace; one that comes more than the grace after the last starts it
// again: two restarts of the API server, far apart, refuse a standby's
// rare takes, and are not one refusal.
func TestA403IsFinalOnlyOnce403sHaveComeForTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		denied := apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "m", errors.New("no"))
		r := Refusal{Grace: 10 * time.Second}
		for range 5 {
			if r.Final(denied, true) {
				t.Fatal("a 403 is final before the grace")
			}
			time.Sleep(2 * time.Second)
		}
		if !r.Final(denied, true) {
			t.Fatal("403s every 2s for 10s aren't final")
		}

		r = Refusal{Grace: 10 * time.Second}
		r.Final(denied, true)
		time.Sleep(11 * time.Second)
		if r.Final(denied, true) {
			t.Error("a 403 11s after the last, with none between, is final at once")
		}
		time.Sleep(9 * time.Second)
		if r.Final(denied, true) {
			t.Error("a 403 9s into a new run of them is final")
		}

		r = Refusal{Grace: 10 * time.Second}
		r.Final(denied, true)
		time.Sleep(6 * time.Second)
		r.Final(nil, false)
		time.Sleep(6 * time.Second)
		if r.Final(denied, true) {
			t.Error("a success between didn't start the grace again")
		}
		if !r.Final(apierrors.NewBadRequest("no"), true) {
			t.Error("a 400 isn't final at once")
		}
	})
}
