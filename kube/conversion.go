package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/z5labs/humus"
)

// The attributes of a conversion's telemetry, besides humus.kube.resource.
const (
	attrConvFrom    = "humus.kube.conversion.from"    // the version an object was at
	attrConvTo      = "humus.kube.conversion.to"      // the version it was asked at
	attrConvOutcome = "humus.kube.conversion.outcome" // success, error or panic
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
	t = t.Resolved()
	h := &conversionHandler[HubSpec, HubStatus]{
		versionSet: newVersionSet(v),
		resource:   attribute.String(attrResource, v.Hub.Plural+"."+v.Hub.Group),
		tracer:     t.TracerProvider.Tracer(scope),
		failures:   newFailureLog(),
	}
	h.log = slog.New(otelslog.NewHandler(scope, otelslog.WithLoggerProvider(t.LoggerProvider))).With(attrResource, v.Hub.Plural+"."+v.Hub.Group)
	m := t.MeterProvider.Meter(scope)
	var err error
	var errs []error
	h.duration, err = m.Float64Histogram("humus.kube.conversion.duration", metric.WithUnit("s"),
		metric.WithDescription("How long each ConversionReview took to answer, by the version asked for and its outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		errs = append(errs, fmt.Errorf("kube: creating the instrument humus.kube.conversion.duration: %w", err))
	}
	h.objects, err = m.Int64Counter("humus.kube.conversion.objects", metric.WithUnit("{object}"),
		metric.WithDescription("Objects converted, by the version each was at, the version asked for, and the outcome."))
	if err != nil {
		errs = append(errs, fmt.Errorf("kube: creating the instrument humus.kube.conversion.objects: %w", err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return h, nil
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
const MaxConversionReviewBytes = 32 << 20

// tooLarge is the answer to a review over MaxConversionReviewBytes.
const tooLarge = "the ConversionReview is larger than 32 MiB (kube.MaxConversionReviewBytes), the most the conversion webhook reads"

type conversionHandler[HubSpec, HubStatus any] struct {
	*versionSet[HubSpec, HubStatus]
	resource attribute.KeyValue
	tracer   trace.Tracer
	log      *slog.Logger
	failures *failureLog // of version pairs and outcomes
	duration metric.Float64Histogram
	objects  metric.Int64Counter
}

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

func (h *conversionHandler[HubSpec, HubStatus]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "a ConversionReview is POSTed", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		http.Error(w, fmt.Sprintf("Content-Type %q: a ConversionReview is application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return
	}
	if r.ContentLength > MaxConversionReviewBytes {
		http.Error(w, tooLarge, http.StatusRequestEntityTooLarge)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxConversionReviewBytes)).Decode(&review); err != nil {
		var big *http.MaxBytesError
		if errors.As(err, &big) {
			http.Error(w, tooLarge, http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "decoding the ConversionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		http.Error(w, "the ConversionReview has no request", http.StatusBadRequest)
		return
	}
	// What the caller names goes into spans, records and messages: bounded,
	// as the API server's own are (no version of it is longer).
	review.Request.DesiredAPIVersion = clip(review.Request.DesiredAPIVersion)
	review.Request.UID = types.UID(clip(string(review.Request.UID)))
	answer := encodeReview(h.review(r.Context(), review.Request))
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer) // the API server gone: nothing to tell
}

// encodeReview is the ConversionReview answering with resp, encoded. Its
// converted objects are written as they are, compact JSON of
// json.Marshal's: encoding/json would scan each twice more, to check and
// to compact it, which costs a tenth of a review.
func encodeReview(resp *apiextensionsv1.ConversionResponse) []byte {
	uid, _ := json.Marshal(resp.UID)
	result, _ := json.Marshal(resp.Result) // a Status of strings marshals
	size := 128 + len(uid) + len(result)
	for _, o := range resp.ConvertedObjects {
		size += len(o.Raw) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","response":{"uid":`...)
	b = append(b, uid...)
	if len(resp.ConvertedObjects) > 0 {
		b = append(b, `,"convertedObjects":[`...)
		for i, o := range resp.ConvertedObjects {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, o.Raw...)
		}
		b = append(b, ']')
	}
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, "}}\n"...)
}

// review converts req's objects, and records it.
func (h *conversionHandler[HubSpec, HubStatus]) review(ctx context.Context, req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	start := time.Now()
	to := req.DesiredAPIVersion
	ctx, span := h.tracer.Start(ctx, "convert "+h.kind, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(start),
		trace.WithAttributes(h.resource, attribute.String(attrConvTo, to), attribute.Int("humus.kube.conversion.objects", len(req.Objects)),
			attribute.String("humus.kube.conversion.uid", string(req.UID))))
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	outcome := success
	converted, from, err := h.convertAll(ctx, req, to)
	if err != nil {
		var p *conversionPanic
		outcome = failure
		if errors.As(err, &p) {
			outcome = panicked
		}
		h.failed(ctx, span, from, to, outcome, p, err)
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		resp.ConvertedObjects = converted
		resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	}
	end := time.Now()
	span.End(trace.WithTimestamp(end))
	h.duration.Record(context.WithoutCancel(ctx), end.Sub(start).Seconds(), metric.WithAttributes(h.resource,
		attribute.String(attrConvTo, h.known(to)), attribute.String(attrConvOutcome, string(outcome))))
	return resp
}

// failed records a failed review on its span, and as an ERROR record,
// with a panic's stack when p is one, as the failureLog of its version
// pair and outcome allows: a conversion that fails for every object fails
// a review an object, and a list of 10,000 would otherwise write 10,000
// records of one mistake. The record counts the failures it stands for.
func (h *conversionHandler[HubSpec, HubStatus]) failed(ctx context.Context, span trace.Span, from, to string, outcome outcome, p *conversionPanic, err error) {
	span.SetStatus(codes.Error, err.Error())
	var typ, msg, stack string
	if p != nil {
		typ, msg, stack = fmt.Sprintf("%T", p.pv.value), fmt.Sprint(p.pv.value), string(p.pv.stack)
		if e, ok := p.pv.value.(error); ok {
			msg = e.Error()
		}
		span.AddEvent("exception", trace.WithAttributes(
			attribute.String(attrExcType, typ),
			attribute.String(attrExcMessage, msg),
			attribute.String(attrExcStacktrace, stack),
		))
	} else {
		span.RecordError(err)
	}

	n, ok := h.failures.failed(h.known(from)+" to "+h.known(to)+" "+string(outcome), time.Now())
	if !ok {
		return
	}
	attrs := []any{slog.String(attrConvFrom, from), slog.String(attrConvTo, to), slog.String("error", err.Error()), slog.Int(attrFailures, n)}
	if p == nil {
		h.log.ErrorContext(ctx, "conversion failed", attrs...)
		return
	}
	h.log.ErrorContext(ctx, "conversion panicked", append(attrs,
		slog.String(attrExcType, typ), slog.String(attrExcMessage, msg), slog.String(attrExcStacktrace, stack))...)
}

// known is apiVersion when it is a version of the resource, and "" when
// not, so that what a review names can't grow the failureLog's keys, or
// the instruments' attribute sets, without bound: the webhook's port
// answers anyone who reaches it.
func (s *versionSet[HubSpec, HubStatus]) known(apiVersion string) string {
	if _, ok := s.versions[apiVersion]; ok {
		return apiVersion
	}
	return ""
}

// convertAll converts each of req's objects to the version to, and counts
// them by the versions and the outcome; it stops at the first that fails,
// which fails them all, and returns the version that object was at.
func (h *conversionHandler[HubSpec, HubStatus]) convertAll(ctx context.Context, req *apiextensionsv1.ConversionRequest, to string) (out []runtime.RawExtension, from string, err error) {
	if _, ok := h.versions[to]; !ok {
		return nil, "", fmt.Errorf("kube: converting %s to %s: no such version of %s", h.kind, to, h.kind)
	}
	out = make([]runtime.RawExtension, 0, len(req.Objects))
	for i, raw := range req.Objects {
		// Only what names the object: its managedFields, decoded, would
		// cost as much as the conversion.
		var id struct {
			APIVersion string `json:"apiVersion"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(raw.Raw, &id) // a mistake is the decode's, below
		id.APIVersion = clip(id.APIVersion)
		b, err := h.convert(raw.Raw, id.APIVersion, to)
		o := success
		if err != nil {
			o = failure
			var p *conversionPanic
			if errors.As(err, &p) {
				o = panicked
			}
		}
		h.objects.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(h.resource,
			attribute.String(attrConvFrom, h.known(id.APIVersion)), attribute.String(attrConvTo, to), attribute.String(attrConvOutcome, string(o))))
		if err != nil {
			name := clip(id.Metadata.Name)
			if id.Metadata.Namespace != "" {
				name = clip(id.Metadata.Namespace) + "/" + name
			}
			return nil, id.APIVersion, fmt.Errorf("kube: converting %s %s (objects[%d]) from %s to %s: %w", h.kind, name, i, id.APIVersion, to, err)
		}
		out = append(out, runtime.RawExtension{Raw: b})
	}
	return out, "", nil
}

// convert converts raw, an object at the apiVersion from, to the
// apiVersion to, through the hub.
func (s *versionSet[HubSpec, HubStatus]) convert(raw []byte, from, to string) ([]byte, error) {
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

// maxShown is the most of a string a review names that the handler puts
// in a span, a record or a message: 253 bytes, the longest name the API
// server takes. The webhook's port answers anyone who reaches it, and one
// review of 32 MiB could otherwise put most of it in one span.
const maxShown = 253

// clip is s, or its first maxShown bytes, cut at a character's start, and
// an ellipsis.
func clip(s string) string {
	if len(s) <= maxShown {
		return s
	}
	n := maxShown
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
