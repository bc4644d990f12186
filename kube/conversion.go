package kube

import (
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/internal/control"
	"github.com/z5labs/humus/kube/internal/review"
)

// Handler is the conversion webhook: an http.Handler answering the API
// server's apiextensions.k8s.io/v1 ConversionReviews for the resource,
// converting each object from its version to the one asked for through
// the hub, by the functions VersionOf was given. Serve it over HTTPS at
// Webhook's URL, or behind its Service, on every replica: the API server
// calls it for every read and write at another version than the stored
// one, the controller's own included, whichever replica holds the Lease.
//
// A conversion function's error, or its panic, recovered, fails the
// review: it is answered with a Failed result whose message names the
// function and the object, which the API server answers the request that
// needed it with. So is an object whose conversion changed its name,
// namespace, UID or kind, which the API server would refuse. The review
// of a request the handler can't read is answered 400, one larger than
// MaxConversionReviewBytes 413, and a method but POST 405.
//
// A review costs a small multiple of its body, whatever it holds: its
// objects are read one at a time, each converted and let go before the
// next is read, and nothing is set aside for the count of them it claims.
// The first object that fails fails the review; the rest are read, not
// converted. What a review holds is its answer, the converted objects,
// which may be at most twice MaxConversionReviewBytes, 64 MiB: a review
// whose conversions would outgrow it fails, saying so. Measured
// (BenchmarkConversionReviewHeap, kube/BENCHMARKS.md): a review of 32 MiB
// of 11 million empty objects peaks at 31 kB of heap, one of 32 MiB of
// settled objects at 2.6 times its size, one of tiny objects each answered
// larger at 4 times, garbage not yet collected included.
//
// Nothing is lost in a round trip: where a version can't hold a field of
// another, such as a field only the newer version has, the object
// converted to it carries the annotation <Group>/<version>, the spec and
// status it had at the other version, as JSON, and the conversion back
// restores each field lost from it that wasn't changed meanwhile. So an
// object written at v1beta1, read at v1alpha1, changed and written back,
// keeps the fields only v1beta1 has. An annotation that doesn't decode
// as the other version's spec and status, edited by hand, fails the
// conversion, naming it: remove it to read the object. RoundTrip checks
// all this for examples.
//
// Each review is a span, "convert <Kind>", with the review's UID, the
// child of the server's span in the request's context (webhook.Service's),
// and is recorded through t, under the module's scope:
//
//	humus.kube.conversion.duration  histogram, s: each review, by humus.kube.conversion.to and outcome
//	humus.kube.conversion.objects   counter: the objects converted, by from, to and outcome
//
// each with humus.kube.resource, and with a version the resource doesn't
// have recorded as "", so that what a review names can't grow the
// instruments without bound. The span and the instruments count every
// failure; its ERROR record, a panic's with its stack, naming the
// versions from and to, is written as a reconcile's failure record is (see
// the package doc's Telemetry): the first of each version pair and
// outcome at once; a later one only once a wait has passed since the last
// record, a wait doubling from a second to five minutes; and a failure
// within the wait only counted, by the next record, if the pair fails
// again after the wait (failures: those since the record before, itself
// included). So a conversion failing for
// every object of a list of 10,000, a review an object, writes a handful
// of records, not 10,000. Handler returns the error CRD would, or one
// creating the instruments.
func (v Versions[HubSpec, HubStatus]) Handler(t humus.Telemetry) (http.Handler, error) {
	if _, errs := v.build(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return review.NewHandler(t, v.Hub.Plural+"."+v.Hub.Group, v.Hub.Kind, newVersionSet(v))
}

// MaxConversionReviewBytes is the largest ConversionReview Handler reads:
// 32 MiB. The webhook's port answers anyone who reaches it, so what it
// reads is bounded, and the bound is far above what the API server sends.
// It sends one object a review for each object it reads from etcd or
// writes, and an object is at most the API server's request limit, 3 MiB
// (etcd's --max-request-bytes, 1.5 MiB, holds it lower still); a review
// of a list, which it may send, holds those of the list's objects that
// aren't at the version asked: 32 MiB is ten of the largest objects, or
// 500, a page of an informer's list, of 64 KiB. A larger review is
// answered 413, and the request that needed it fails.
const MaxConversionReviewBytes = review.MaxBytes

// versionSet converts objects between the versions of a Versions.
type versionSet[HubSpec, HubStatus any] struct {
	group, kind, hub string
	versions         map[string]*converter[HubSpec, HubStatus] // by apiVersion, group/version
}

func newVersionSet[HubSpec, HubStatus any](v Versions[HubSpec, HubStatus]) *versionSet[HubSpec, HubStatus] {
	s := &versionSet[HubSpec, HubStatus]{group: v.Hub.Group, kind: v.Hub.Kind, hub: v.Hub.Version, versions: map[string]*converter[HubSpec, HubStatus]{}}
	for _, e := range v.entries() {
		s.versions[v.Hub.Group+"/"+e.resource.Version] = e.conv
	}
	return s
}

// Known is apiVersion when it is a version of the resource, and "" when
// not, so that what a review names can't grow the failureLog's keys, or
// the instruments' attribute sets, without bound: the webhook's port
// answers anyone who reaches it.
func (s *versionSet[HubSpec, HubStatus]) Known(apiVersion string) string {
	if _, ok := s.versions[apiVersion]; ok {
		return apiVersion
	}
	return ""
}

// Convert converts raw, an object at the apiVersion from, to the
// apiVersion to, through the hub.
//
// A panic anywhere in it, such as in a spec type's own UnmarshalJSON or
// MarshalJSON, not only in a conversion function, is recovered as a
// *conversionPanic: the review fails, as for any panic, and the webhook
// goes on.
func (s *versionSet[HubSpec, HubStatus]) Convert(raw []byte, from, to string) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &review.Panic{Name: "decoding or encoding " + s.kind + " between " + from + " and " + to, PV: control.PanicValue{Value: r, Stack: debug.Stack()}}
		}
	}()
	if from == to {
		return raw, nil
	}
	src, ok := s.versions[from]
	if !ok {
		return nil, fmt.Errorf("%s: no such version of %s", from, s.kind)
	}
	dst, ok := s.versions[to]
	if !ok {
		return nil, fmt.Errorf("%s: no such version of %s", to, s.kind)
	}
	hub, err := src.up(raw, s.group, s.hub)
	if err != nil {
		return nil, err
	}
	return dst.down(hub, s.group, s.hub)
}
