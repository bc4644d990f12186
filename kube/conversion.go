package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	rv := &reviewRun[HubSpec, HubStatus]{h: h, ctx: r.Context()}
	err := rv.read(json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxConversionReviewBytes)))
	if err != nil {
		rv.abandon(err)
		var big *http.MaxBytesError
		if errors.As(err, &big) {
			http.Error(w, tooLarge, http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "decoding the ConversionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !rv.request {
		http.Error(w, "the ConversionReview has no request", http.StatusBadRequest)
		return
	}
	rv.finish()
	rv.answer(w)
}

// reviewRun is one ConversionReview, read and converted an object at a
// time: the review's objects are never all decoded at once, nor is room
// made for them by the count the caller sends. Each is decoded into one
// buffer, reused, converted, and its conversion appended to the answer;
// from the first failure on, the rest are read, to answer the review
// whole, but not converted. So what a review costs is its largest object
// and its answer, not a slice header and a copy of each of its objects:
// a review of 32 MiB of empty objects held 1.7 GB.
type reviewRun[HubSpec, HubStatus any] struct {
	h   *conversionHandler[HubSpec, HubStatus]
	ctx context.Context

	request bool   // the review has a request
	uid     string // clipped
	to      string // clipped
	toSeen  bool
	objects bool // request.objects is read

	started bool
	start   time.Time
	span    trace.Span

	n         int              // objects read
	raw       json.RawMessage  // the object being read; its buffer reused
	out       answerBuffer     // the converted objects so far, comma-separated
	succeeded map[string]int64 // objects converted, by the version each was at (known)
	err       error            // the first failure, which fails the review
	from      string           // the version the failed object was at
	p         *conversionPanic // the failure, when a panic
}

// read reads the review from dec, converting its objects as they come.
// An error is the review's, which is answered 400, or 413.
//
// The API server writes request.uid and request.desiredAPIVersion before
// request.objects, so the objects are converted as they are read; a
// review that names the objects first has them held, as they came, until
// the version asked for is read.
func (rv *reviewRun[HubSpec, HubStatus]) read(dec *json.Decoder) error {
	if err := reviewDelim(dec, '{', "a ConversionReview"); err != nil {
		return err
	}
	var seen bool
	for dec.More() {
		key, err := reviewKey(dec)
		if err != nil {
			return err
		}
		if !strings.EqualFold(key, "request") {
			if err := skipReviewValue(dec); err != nil {
				return err
			}
			continue
		}
		if seen {
			return errors.New("the ConversionReview names request twice")
		}
		seen = true
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case nil: // null: no request
		case json.Delim('{'):
			rv.request = true
			if err := rv.readRequest(dec); err != nil {
				return err
			}
		default:
			return fmt.Errorf("the ConversionReview's request is %v, not an object", tok)
		}
	}
	_, err := dec.Token() // the '}' More saw
	return err
}

// readRequest reads request's members, its '{' read.
func (rv *reviewRun[HubSpec, HubStatus]) readRequest(dec *json.Decoder) error {
	var held json.RawMessage // objects named before the version asked for
	for dec.More() {
		key, err := reviewKey(dec)
		if err != nil {
			return err
		}
		switch {
		case strings.EqualFold(key, "uid"):
			var uid string
			if err := dec.Decode(&uid); err != nil {
				return err
			}
			rv.uid = clip(uid)
		case strings.EqualFold(key, "desiredAPIVersion"):
			if rv.toSeen {
				return errors.New("the ConversionReview names request.desiredAPIVersion twice")
			}
			var to string
			if err := dec.Decode(&to); err != nil {
				return err
			}
			rv.to, rv.toSeen = clip(to), true
		case strings.EqualFold(key, "objects"):
			if rv.objects || held != nil {
				return errors.New("the ConversionReview names request.objects twice")
			}
			if !rv.toSeen {
				if err := dec.Decode(&held); err != nil {
					return err
				}
				continue
			}
			if err := rv.readObjects(dec); err != nil {
				return err
			}
		default:
			if err := skipReviewValue(dec); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the '}' More saw
		return err
	}
	if held != nil {
		d := json.NewDecoder(bytes.NewReader(held))
		held = nil // the decoder's buffer holds what is left of it
		if err := rv.readObjects(d); err != nil {
			return err
		}
	}
	return nil
}

// readObjects reads request.objects, an array or null, converting each
// object as it is read.
func (rv *reviewRun[HubSpec, HubStatus]) readObjects(dec *json.Decoder) error {
	rv.objects = true
	rv.begin()
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return err
	}
	if tok != json.Delim('[') {
		return fmt.Errorf("the ConversionReview's request.objects is %v, not an array", tok)
	}
	for dec.More() {
		if err := dec.Decode(&rv.raw); err != nil { // reuses raw's buffer
			return err
		}
		rv.object(rv.raw)
	}
	_, err = dec.Token() // the ']' More saw
	return err
}

// reviewDelim reads the delimiter d from dec.
func reviewDelim(dec *json.Decoder, d json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("%s is %v, not an object", what, tok)
	}
	return nil
}

// reviewKey reads an object's key from dec.
func reviewKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	k, _ := tok.(string) // dec refuses anything else where a key is
	return k, nil
}

// skipReviewValue reads the next value from dec and lets it go, a token at a time,
// so a member the handler doesn't read costs no more than its largest
// string.
func skipReviewValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// begin starts the review's span and clock, once: when its objects are
// reached, or at its end when it has none.
func (rv *reviewRun[HubSpec, HubStatus]) begin() {
	if rv.started {
		return
	}
	h := rv.h
	rv.started, rv.start = true, time.Now()
	rv.ctx, rv.span = h.tracer.Start(rv.ctx, "convert "+h.kind, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(rv.start),
		trace.WithAttributes(h.resource, attribute.String(attrConvTo, rv.to)))
	rv.succeeded = map[string]int64{}
	if _, ok := h.versions[rv.to]; !ok {
		rv.err = fmt.Errorf("kube: converting %s to %s: no such version of %s", h.kind, rv.to, h.kind)
	}
}

// object converts raw, the review's next object, unless one before it
// failed; raw is reused once object returns.
func (rv *reviewRun[HubSpec, HubStatus]) object(raw []byte) {
	i := rv.n
	rv.n++
	if rv.err != nil {
		return
	}
	h := rv.h
	// Only what names the object: its managedFields, decoded, would
	// cost as much as the conversion.
	var id struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &id) // a mistake is the decode's, below
	from := clip(id.APIVersion)
	b, err := h.convert(raw, from, rv.to)
	if err == nil && rv.out.n+1+len(b) > maxAnswerBytes {
		err = errAnswerTooLarge
	}
	if err == nil {
		rv.succeeded[h.known(from)]++
		rv.out.add(b)
		return
	}
	o := failure
	if errors.As(err, &rv.p) {
		o = panicked
	}
	h.objects.Add(context.WithoutCancel(rv.ctx), 1, metric.WithAttributes(h.resource,
		attribute.String(attrConvFrom, h.known(from)), attribute.String(attrConvTo, rv.to), attribute.String(attrConvOutcome, string(o))))
	name := clip(id.Metadata.Name)
	if id.Metadata.Namespace != "" {
		name = clip(id.Metadata.Namespace) + "/" + name
	}
	rv.err = fmt.Errorf("kube: converting %s %s (objects[%d]) from %s to %s: %w", h.kind, name, i, from, rv.to, err)
	rv.from, rv.out = from, answerBuffer{} // the answer has none of them: let them go
}

// maxAnswerBytes is the most a review's converted objects may take: twice
// MaxConversionReviewBytes, 64 MiB. A conversion may add to an object
// (the annotation of what its version can't hold, fields of the version's
// own), but a review whose conversions would outgrow this is no review the
// API server sends, whose objects are of a megabyte or two: it fails, so
// that what a review costs stays a small multiple of its body.
const maxAnswerBytes = 2 * MaxConversionReviewBytes

var errAnswerTooLarge = errors.New("the converted objects would be larger than 64 MiB, twice kube.MaxConversionReviewBytes, the most the conversion webhook answers with")

// abandon ends the span of a review that couldn't be read, if it was
// begun: it is answered 400 or 413, and counts no duration.
func (rv *reviewRun[HubSpec, HubStatus]) abandon(err error) {
	if !rv.started {
		return
	}
	rv.span.SetStatus(codes.Error, "decoding the ConversionReview: "+err.Error())
	rv.span.End()
}

// finish records the review: its span, the objects converted, its
// duration, and a failure's record.
func (rv *reviewRun[HubSpec, HubStatus]) finish() {
	rv.begin()
	h := rv.h
	ctx := context.WithoutCancel(rv.ctx)
	for from, n := range rv.succeeded {
		h.objects.Add(ctx, n, metric.WithAttributes(h.resource,
			attribute.String(attrConvFrom, from), attribute.String(attrConvTo, rv.to), attribute.String(attrConvOutcome, string(success))))
	}
	rv.span.SetAttributes(attribute.Int("humus.kube.conversion.objects", rv.n), attribute.String("humus.kube.conversion.uid", rv.uid))
	outcome := success
	if rv.err != nil {
		outcome = failure
		if rv.p != nil {
			outcome = panicked
		}
		h.failed(rv.ctx, rv.span, rv.from, rv.to, outcome, rv.p, rv.err)
	}
	end := time.Now()
	rv.span.End(trace.WithTimestamp(end))
	h.duration.Record(ctx, end.Sub(rv.start).Seconds(), metric.WithAttributes(h.resource,
		attribute.String(attrConvTo, h.known(rv.to)), attribute.String(attrConvOutcome, string(outcome))))
}

// answer writes the ConversionReview answering rv. Its converted objects
// are written as they are, compact JSON of json.Marshal's: encoding/json
// would scan each twice more, to check and to compact it, which costs a
// tenth of a review.
func (rv *reviewRun[HubSpec, HubStatus]) answer(w http.ResponseWriter) {
	uid, _ := json.Marshal(rv.uid)
	result := metav1.Status{Status: metav1.StatusSuccess}
	if rv.err != nil {
		result = metav1.Status{Status: metav1.StatusFailure, Message: rv.err.Error()}
	}
	res, _ := json.Marshal(result) // a Status of strings marshals
	head := make([]byte, 0, 128+len(uid))
	head = append(head, `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","response":{"uid":`...)
	head = append(head, uid...)
	tail := make([]byte, 0, 16+len(res))
	if rv.err == nil && rv.n > 0 {
		head = append(head, `,"convertedObjects":[`...)
		tail = append(tail, ']')
	}
	tail = append(tail, `,"result":`...)
	tail = append(tail, res...)
	tail = append(tail, "}}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+rv.out.n+len(tail)))
	// The API server gone: nothing to tell.
	for _, b := range append(append([][]byte{head}, rv.out.chunks...), tail) {
		if _, err := w.Write(b); err != nil {
			return
		}
	}
}

// answerBuffer is the converted objects of a review, comma-separated, in
// chunks of at most a MiB, or of one object, where a slice appended to
// would be copied as it grows, and hold the answer twice as it does.
type answerBuffer struct {
	chunks [][]byte
	n      int // their bytes
}

// add appends obj, after a comma unless it is the first.
func (a *answerBuffer) add(obj []byte) {
	need := len(obj)
	if a.n > 0 {
		need++
	}
	if len(a.chunks) == 0 || cap(a.chunks[len(a.chunks)-1])-len(a.chunks[len(a.chunks)-1]) < need {
		// A chunk as large as the answer so far, from 4 KiB to 1 MiB, or
		// the object: a review of one object costs one.
		a.chunks = append(a.chunks, make([]byte, 0, max(need, min(max(a.n, 4<<10), 1<<20))))
	}
	c := &a.chunks[len(a.chunks)-1]
	if a.n > 0 {
		*c = append(*c, ',')
	}
	*c = append(*c, obj...)
	a.n += need
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

// convert converts raw, an object at the apiVersion from, to the
// apiVersion to, through the hub.
//
// A panic anywhere in it, such as in a spec type's own UnmarshalJSON or
// MarshalJSON, not only in a conversion function, is recovered as a
// *conversionPanic: the review fails, as for any panic, and the webhook
// goes on.
func (s *versionSet[HubSpec, HubStatus]) convert(raw []byte, from, to string) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &conversionPanic{name: "decoding or encoding " + s.kind + " between " + from + " and " + to, pv: panicValue{value: r, stack: debug.Stack()}}
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
