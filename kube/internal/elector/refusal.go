package elector

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// request is a kind of request of the Lease, whose refusals check counts
// apart from the others'.
type request int

const (
	reading request = iota
	creating
	updating // a take of a Lease that exists, or a renewal
	requests // how many kinds
)

// check notes an answer of the API server's to a request of the Lease of
// kind req that no retry mends: a 403; a 400, 405, 406, 413, 415 or 422, a
// request the API server refuses as it is; and a 404 to a create, the
// Lease's namespace missing. (A 404 to a read or an update is the Lease
// missing, which a create mends.) It ends the campaign with the answer, as
// client-go's elector never does: it logs and retries forever, every
// replica Ready and none of them working. A 403 ends it only once 403s
// have come for the grace (see Refusal), counted for each kind of request
// apart: only a success of the same kind resets it, so a read that
// succeeds before each take refused (get allowed, update not) doesn't keep
// the take's 403 from becoming final.
func (e *Elector) check(err error, req request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	bad := Incurable(err, req == creating)
	switch {
	case err == nil && e.lastRefusedBy == req:
		e.lastRefused = nil
	case bad:
		e.lastRefused, e.lastRefusedBy = fmt.Errorf("kube: the Lease %s: %w", e.Describe(), err), req
	}
	if e.denied != nil || !e.refusals[req].Final(err, bad) {
		return
	}
	e.denied = e.lastRefused
	close(e.refused)
}

// Refused is closed once the API server has given an answer no retry
// mends: DeniedErr says which.
func (e *Elector) Refused() <-chan struct{} { return e.refused }

// DeniedErr is the answer no retry mends that closed Refused, naming the
// Lease.
func (e *Elector) DeniedErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.denied
}

// RefusedErr is the last answer no retry mends, naming the Lease, unless
// a request of the same kind has succeeded since; or nil.
func (e *Elector) RefusedErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastRefused
}

// Refusal tells an answer no retry mends from one a restarted API server
// gives for its first seconds: it serves before its authorizer has loaded
// RBAC, and refuses with a 403 meanwhile (seen for 6 s on a loaded
// machine, in the fault suite). So a 403 is final once 403s, with no
// success between and none more than Grace after the last, have come for
// Grace; any other refusal at once. A Refusal counts the answers to one
// kind of request: a success of another kind says nothing of this one.
type Refusal struct {
	Grace time.Duration
	since time.Time // the first 403 of the run, zero: none
	last  time.Time // the last 403
}

// Final reports whether err, the answer to a request, ends what made it;
// incurable says whether it is an answer no retry mends. A 403 more than
// Grace after the last one starts the grace again: the requests of a kind
// may be far apart (a standby takes only a free Lease), and two restarts
// of the API server are not one refusal.
func (r *Refusal) Final(err error, incurable bool) bool {
	switch {
	case err == nil:
		r.since = time.Time{}
		return false
	case !incurable:
		return false
	case !apierrors.IsForbidden(err):
		return true
	}
	now := time.Now()
	if r.since.IsZero() || now.Sub(r.last) > r.Grace {
		r.since = now
	}
	r.last = now
	return now.Sub(r.since) >= r.Grace
}

// Incurable reports whether err is an answer to a request of a Lease
// (creating: a Create) that no retry mends: see check.
func Incurable(err error, creating bool) bool {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return false
	}
	switch status.Status().Code {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusMethodNotAllowed, http.StatusNotAcceptable,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	case http.StatusNotFound:
		return creating
	}
	return false
}
