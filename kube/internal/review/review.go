package review

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/internal/control"
	"github.com/z5labs/humus/kube/internal/webhooks"
)

// The attributes of a conversion's telemetry, besides humus.kube.resource.
const (
	attrConvFrom    = "humus.kube.conversion.from"    // the version an object was at
	attrConvTo      = "humus.kube.conversion.to"      // the version it was asked at
	attrConvOutcome = "humus.kube.conversion.outcome" // success, error or panic
)

// NewHandler returns the conversion webhook of resource, of kind, that
// converts each object with conv and records through t.
func NewHandler(t humus.Telemetry, resource, kind string, conv Converter) (http.Handler, error) {
	t = t.Resolved()
	h := &conversionHandler{
		conv:     conv,
		kind:     kind,
		resource: attribute.String(control.AttrResource, resource),
		tracer:   t.TracerProvider.Tracer(control.InstrumentationScope),
		failures: control.NewFailureLog(),
	}
	h.log = slog.New(otelslog.NewHandler(control.InstrumentationScope, otelslog.WithLoggerProvider(t.LoggerProvider))).With(control.AttrResource, resource)
	m := t.MeterProvider.Meter(control.InstrumentationScope)
	var err error
	var errs []error
	h.duration, err = m.Float64Histogram("humus.kube.conversion.duration", metric.WithUnit("s"),
		metric.WithDescription("How long each ConversionReview took to answer, by the version asked for and its outcome."),
		metric.WithExplicitBucketBoundaries(control.DurationBuckets...))
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

// tooLarge is the answer to a review over MaxBytes.
const tooLarge = "the ConversionReview is larger than 32 MiB (kube.MaxConversionReviewBytes), the most the conversion webhook reads"

type conversionHandler struct {
	conv     Converter
	kind     string // the resource's
	resource attribute.KeyValue
	tracer   trace.Tracer
	log      *slog.Logger
	failures *control.FailureLog // of version pairs and outcomes
	duration metric.Float64Histogram
	objects  metric.Int64Counter
}

// reviewConverter converts objects between a resource's versions, for a
// review: a versionSet.
type Converter interface {
	Known(apiVersion string) string
	Convert(raw []byte, from, to string) ([]byte, error)
}

func (h *conversionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !webhooks.Accept(w, r, "a ConversionReview") {
		return
	}
	if r.ContentLength > MaxBytes {
		http.Error(w, tooLarge, http.StatusRequestEntityTooLarge)
		return
	}
	rv := &reviewRun{h: h, ctx: r.Context()}
	err := rv.read(json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBytes)))
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
type reviewRun struct {
	h   *conversionHandler
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
	p         *Panic           // the failure, when a panic
}

// read reads the review from dec, converting its objects as they come.
// An error is the review's, which is answered 400, or 413.
//
// The API server writes request.uid and request.desiredAPIVersion before
// request.objects, so the objects are converted as they are read; a
// review that names the objects first has them held, as they came, until
// the version asked for is read.
func (rv *reviewRun) read(dec *json.Decoder) error {
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
func (rv *reviewRun) readRequest(dec *json.Decoder) error {
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
			rv.uid = webhooks.Clip(uid)
		case strings.EqualFold(key, "desiredAPIVersion"):
			if rv.toSeen {
				return errors.New("the ConversionReview names request.desiredAPIVersion twice")
			}
			var to string
			if err := dec.Decode(&to); err != nil {
				return err
			}
			rv.to, rv.toSeen = webhooks.Clip(to), true
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
func (rv *reviewRun) readObjects(dec *json.Decoder) error {
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
func (rv *reviewRun) begin() {
	if rv.started {
		return
	}
	h := rv.h
	rv.started, rv.start = true, time.Now()
	rv.ctx, rv.span = h.tracer.Start(rv.ctx, "convert "+h.kind, trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(rv.start),
		trace.WithAttributes(h.resource, attribute.String(attrConvTo, rv.to)))
	rv.succeeded = map[string]int64{}
	if h.conv.Known(rv.to) == "" {
		rv.err = fmt.Errorf("kube: converting %s to %s: no such version of %s", h.kind, rv.to, h.kind)
	}
}

// object converts raw, the review's next object, unless one before it
// failed; raw is reused once object returns.
func (rv *reviewRun) object(raw []byte) {
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
	from := webhooks.Clip(id.APIVersion)
	b, err := h.conv.Convert(raw, from, rv.to)
	if err == nil && rv.out.n+1+len(b) > maxAnswerBytes {
		err = errAnswerTooLarge
	}
	if err == nil {
		rv.succeeded[h.conv.Known(from)]++
		rv.out.add(b)
		return
	}
	o := control.Failure
	if errors.As(err, &rv.p) {
		o = control.Panicked
	}
	h.objects.Add(context.WithoutCancel(rv.ctx), 1, metric.WithAttributes(h.resource,
		attribute.String(attrConvFrom, h.conv.Known(from)), attribute.String(attrConvTo, rv.to), attribute.String(attrConvOutcome, string(o))))
	name := webhooks.Clip(id.Metadata.Name)
	if id.Metadata.Namespace != "" {
		name = webhooks.Clip(id.Metadata.Namespace) + "/" + name
	}
	rv.err = fmt.Errorf("kube: converting %s %s (objects[%d]) from %s to %s: %w", h.kind, name, i, from, rv.to, err)
	rv.from, rv.out = from, answerBuffer{} // the answer has none of them: let them go
}

// maxAnswerBytes is the most a review's converted objects may take: twice
// MaxBytes, 64 MiB. A conversion may add to an object
// (the annotation of what its version can't hold, fields of the version's
// own), but a review whose conversions would outgrow this is no review the
// API server sends, whose objects are of a megabyte or two: it fails, so
// that what a review costs stays a small multiple of its body.
const maxAnswerBytes = 2 * MaxBytes

var errAnswerTooLarge = errors.New("the converted objects would be larger than 64 MiB, twice kube.MaxConversionReviewBytes, the most the conversion webhook answers with")

// abandon ends the span of a review that couldn't be read, if it was
// begun: it is answered 400 or 413, and counts no duration.
func (rv *reviewRun) abandon(err error) {
	if !rv.started {
		return
	}
	rv.span.SetStatus(codes.Error, "decoding the ConversionReview: "+err.Error())
	rv.span.End()
}

// finish records the review: its span, the objects converted, its
// duration, and a failure's record.
func (rv *reviewRun) finish() {
	rv.begin()
	h := rv.h
	ctx := context.WithoutCancel(rv.ctx)
	for from, n := range rv.succeeded {
		h.objects.Add(ctx, n, metric.WithAttributes(h.resource,
			attribute.String(attrConvFrom, from), attribute.String(attrConvTo, rv.to), attribute.String(attrConvOutcome, string(control.Success))))
	}
	rv.span.SetAttributes(attribute.Int("humus.kube.conversion.objects", rv.n), attribute.String("humus.kube.conversion.uid", rv.uid))
	outcome := control.Success
	if rv.err != nil {
		outcome = control.Failure
		if rv.p != nil {
			outcome = control.Panicked
		}
		h.failed(rv.ctx, rv.span, rv.from, rv.to, outcome, rv.p, rv.err)
	}
	end := time.Now()
	rv.span.End(trace.WithTimestamp(end))
	h.duration.Record(ctx, end.Sub(rv.start).Seconds(), metric.WithAttributes(h.resource,
		attribute.String(attrConvTo, h.conv.Known(rv.to)), attribute.String(attrConvOutcome, string(outcome))))
}

// answer writes the ConversionReview answering rv. Its converted objects
// are written as they are, compact JSON of json.Marshal's: encoding/json
// would scan each twice more, to check and to compact it, which costs a
// tenth of a review.
func (rv *reviewRun) answer(w http.ResponseWriter) {
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
func (h *conversionHandler) failed(ctx context.Context, span trace.Span, from, to string, outcome control.Outcome, p *Panic, err error) {
	span.SetStatus(codes.Error, err.Error())
	var typ, msg, stack string
	if p != nil {
		typ, msg, stack = fmt.Sprintf("%T", p.PV.Value), fmt.Sprint(p.PV.Value), string(p.PV.Stack)
		if e, ok := p.PV.Value.(error); ok {
			msg = e.Error()
		}
		span.AddEvent("exception", trace.WithAttributes(
			attribute.String(control.AttrExcType, typ),
			attribute.String(control.AttrExcMessage, msg),
			attribute.String(control.AttrExcStacktrace, stack),
		))
	} else {
		span.RecordError(err)
	}

	n, ok := h.failures.Failed(h.conv.Known(from)+" to "+h.conv.Known(to)+" "+string(outcome), time.Now())
	if !ok {
		return
	}
	attrs := []any{slog.String(attrConvFrom, from), slog.String(attrConvTo, to), slog.String("error", err.Error()), slog.Int(control.AttrFailures, n)}
	if p == nil {
		h.log.ErrorContext(ctx, "conversion failed", attrs...)
		return
	}
	h.log.ErrorContext(ctx, "conversion panicked", append(attrs,
		slog.String(control.AttrExcType, typ), slog.String(control.AttrExcMessage, msg), slog.String(control.AttrExcStacktrace, stack))...)
}

// conversionPanic is a conversion function's panic, recovered.
type Panic struct {
	Name string
	PV   control.PanicValue
}

func (p *Panic) Error() string {
	return fmt.Sprintf("%s panicked: %v", p.Name, p.PV.Value)
}

// MaxBytes is kube.MaxConversionReviewBytes: the most of a review the
// handler reads, 32 MiB.
const MaxBytes = 32 << 20
