package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/internal/webhooks"
)

// scope is the instrumentation scope of the package's telemetry.
const scope = "github.com/z5labs/humus/kube/admission"

// The attributes of a review's telemetry.
const (
	attrWebhook   = "humus.kube.admission.webhook"   // the webhook's name
	attrOperation = "humus.kube.admission.operation" // CREATE, UPDATE or DELETE
	attrOutcome   = "humus.kube.admission.outcome"   // allowed, refused or panic
)

// MaxReviewBytes is the largest AdmissionReview Handler reads: 16 MiB. The
// API server sends a review of one write: the object, and on an update
// the object before it, each at most its request limit of 3 MiB, so a
// review is under 7 MiB; the webhook's port answers anyone who reaches it,
// so what it reads is bounded. A larger review is answered 413, which the
// webhook's FailurePolicy decides.
const MaxReviewBytes = 16 << 20

// Handler is the webhooks' http.Handler: it answers the API server's
// admission.k8s.io/v1 AdmissionReviews, each at the path its webhook's
// configuration names, whose last segment is the webhook's name, so it
// serves wherever it is mounted:
//
//	mux.Handle("POST /admission/", h) // with Endpoint.Service.Path "/admission"
//
// Serve it on webhook.Service, beside the conversion webhook, on every
// replica: the API server calls whichever replica its Service picks.
//
// Each review decodes the object, and the object before it, into the
// webhook's T, and calls its function with its own copies. Its answer is
// the function's: allowed, with its warnings and, for Defaulting, the
// JSON patch of what it changed; or refused with its error, as
// ValidateFunc says. A panic in the function, or in decoding or encoding
// the object, is recovered and refuses the write (500, InternalError),
// naming the webhook, the object and the panic's value, and is recorded
// with its stack; the webhook goes on. An object that doesn't decode into
// T refuses it as BadRequest, naming the field. A review the handler
// can't read is answered 400, one larger than MaxReviewBytes 413, a path
// that names no webhook 404, a method but POST 405: failures the API
// server answers as the webhook's FailurePolicy says.
//
// Each review is a span, "validate <Kind>" or "default <Kind>", the child
// of the server's span in the request's context, and its duration is
// recorded through t, under the package's scope, as
//
//	humus.kube.admission.duration  histogram, s: by humus.kube.admission.webhook, operation and outcome (allowed, refused or panic)
//
// A panic is an ERROR record with its stack: the first of a webhook's at
// once, then at most one a minute, counting those between.
//
// Handler returns every mistake in w's webhooks at once, or one creating
// the instrument; Endpoint and Name aren't read: they are the
// configurations'.
func (w Webhooks) Handler(t humus.Telemetry) (http.Handler, error) {
	if errs := w.hookErrs(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t = t.Resolved()
	h := &handler{
		hooks:  map[string]*Webhook{},
		tracer: t.TracerProvider.Tracer(scope),
		log:    slog.New(otelslog.NewHandler(scope, otelslog.WithLoggerProvider(t.LoggerProvider))),
		panics: map[string]*panicLog{},
	}
	for i := range w.Hooks {
		hook := w.Hooks[i]
		h.hooks[hook.name()] = &hook
		h.panics[hook.name()] = &panicLog{}
	}
	var err error
	h.duration, err = t.MeterProvider.Meter(scope).Float64Histogram("humus.kube.admission.duration", metric.WithUnit("s"),
		metric.WithDescription("How long each AdmissionReview took to answer, by webhook, operation and outcome."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		return nil, fmt.Errorf("admission: creating the instrument humus.kube.admission.duration: %w", err)
	}
	return h, nil
}

type handler struct {
	hooks    map[string]*Webhook // by name
	tracer   trace.Tracer
	log      *slog.Logger
	duration metric.Float64Histogram
	panics   map[string]*panicLog // by webhook
}

// tooLarge is the answer to a review over MaxReviewBytes.
const tooLarge = "the AdmissionReview is larger than 16 MiB (admission.MaxReviewBytes), the most the admission webhook reads"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !webhooks.Accept(w, r, "an AdmissionReview") {
		return
	}
	hook, ok := h.hooks[path.Base(r.URL.Path)]
	if !ok {
		http.Error(w, fmt.Sprintf("%q names no admission webhook served here: the path's last segment is the webhook's name, one of %s", webhooks.Clip(r.URL.Path), strings.Join(h.names(), ", ")), http.StatusNotFound)
		return
	}
	if r.ContentLength > MaxReviewBytes {
		http.Error(w, tooLarge, http.StatusRequestEntityTooLarge)
		return
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, MaxReviewBytes), r.ContentLength)
	if err != nil {
		var big *http.MaxBytesError
		if errors.As(err, &big) {
			http.Error(w, tooLarge, http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, "decoding the AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		http.Error(w, fmt.Sprintf("the review is apiVersion %q, kind %q: this webhook answers admission.k8s.io/v1 AdmissionReviews", webhooks.Clip(review.APIVersion), webhooks.Clip(review.Kind)), http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		http.Error(w, "the AdmissionReview has no request", http.StatusBadRequest)
		return
	}
	resp := h.review(r.Context(), hook, review.Request)
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil { // a response of strings and bytes marshals
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out) // the API server gone: nothing to tell
}

// readAll reads r whole, into a buffer of size bytes, the request's
// Content-Length where it gives one (no more than MaxReviewBytes, checked
// before): a review of several MiB is read with one allocation, not
// io.ReadAll's doublings.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

func (h *handler) names() []string {
	names := make([]string, 0, len(h.hooks))
	for n := range h.hooks {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// outcome is how a review ended, in its telemetry.
type outcome string

const (
	allowed outcome = "allowed"
	refused outcome = "refused"
	panics  outcome = "panic"
)

// review answers req with hook.
func (h *handler) review(ctx context.Context, hook *Webhook, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	start := time.Now()
	verb := "validate "
	if hook.mutating {
		verb = "default "
	}
	t := hook.target
	op := string(req.Operation)
	if !slices.Contains([]Operation{Create, Update, Delete}, Operation(op)) {
		op = "" // what a review names can't grow the instrument without bound
	}
	attrs := []attribute.KeyValue{attribute.String(attrWebhook, hook.name()), attribute.String(attrOperation, op)}
	ctx, span := h.tracer.Start(ctx, verb+t.kind, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(append(attrs,
		attribute.String("humus.kube.admission.uid", webhooks.Clip(string(req.UID))),
		attribute.String("humus.kube.admission.namespace", webhooks.Clip(req.Namespace)),
		attribute.String("humus.kube.admission.name", webhooks.Clip(req.Name)),
		attribute.Bool("humus.kube.admission.dry_run", req.DryRun != nil && *req.DryRun))...))
	resp, o := h.answer(ctx, hook, req, span)
	resp.UID = req.UID
	span.SetAttributes(attribute.String(attrOutcome, string(o)))
	if o != allowed && resp.Result != nil {
		span.SetStatus(codes.Error, resp.Result.Message)
	}
	span.End()
	h.duration.Record(context.WithoutCancel(ctx), time.Since(start).Seconds(), metric.WithAttributes(append(attrs, attribute.String(attrOutcome, string(o)))...))
	return resp
}

// answer is review's work: the response, and its outcome.
func (h *handler) answer(ctx context.Context, hook *Webhook, req *admissionv1.AdmissionRequest, span trace.Span) (resp *admissionv1.AdmissionResponse, o outcome) {
	t := hook.target
	gk := schema.GroupKind{Group: t.gvr.Group, Kind: t.kind}
	object := t.kind + " " + webhooks.Clip(req.Name)
	if req.Namespace != "" {
		object = t.kind + " " + webhooks.Clip(req.Namespace) + "/" + webhooks.Clip(req.Name)
	}
	if got := (schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}); got != t.gvr.GroupVersion().WithKind(t.kind) {
		return deny(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("admission: %s: the review is of a %s, and the webhook checks %s: its configuration's rules name another resource", hook.name(), webhooks.Clip(got.String()), t.gvr.GroupVersion().WithKind(t.kind))), refused
	}
	request := Request{
		UID:       req.UID,
		Operation: Operation(req.Operation),
		Namespace: req.Namespace,
		Name:      req.Name,
		UserInfo:  req.UserInfo,
		DryRun:    req.DryRun != nil && *req.DryRun,
	}
	if !slices.Contains(hook.operations(), request.Operation) {
		return &admissionv1.AdmissionResponse{Allowed: true}, allowed // not the webhook's: its configuration names the others
	}
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			msg := fmt.Sprintf("admission: %s panicked on %s: %s", hook.name(), object, webhooks.Clip(fmt.Sprint(p)))
			h.panicked(ctx, hook.name(), span, p, stack, msg)
			resp, o = deny(http.StatusInternalServerError, metav1.StatusReasonInternalError, msg), panics
		}
	}()
	var old, obj []byte
	if req.Operation != admissionv1.Create {
		old = req.OldObject.Raw
	}
	if req.Operation != admissionv1.Delete {
		obj = req.Object.Raw
	}
	got, err := hook.review(ctx, request, old, obj)
	if err != nil {
		var d decodeError
		if errors.As(err, &d) {
			return deny(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("admission: %s: %s: %v", hook.name(), object, err)), refused
		}
		resp := &admissionv1.AdmissionResponse{Result: refusal(err, gk, req.Name), Warnings: got.warnings}
		span.RecordError(err)
		return resp, refused
	}
	resp = &admissionv1.AdmissionResponse{Allowed: true, Warnings: got.warnings}
	if hook.mutating {
		patch, err := jsonPatch(obj, got.before, got.after)
		if err != nil {
			return deny(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("admission: %s: the patch of %s: %v", hook.name(), object, err)), refused
		}
		if patch != nil {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &pt
			span.SetAttributes(attribute.Int("humus.kube.admission.patch_bytes", len(patch)))
		}
	}
	return resp, allowed
}

// deny is a response refusing the write with a Status of code, reason and
// message.
func deny(code int32, reason metav1.StatusReason, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}

// decodeError is an object of a review that doesn't decode into the
// webhook's type.
type decodeError struct{ err error }

func (e decodeError) Error() string { return e.err.Error() }

// panicLog limits a webhook's panic records to one a minute.
type panicLog struct {
	mu     sync.Mutex
	last   time.Time
	missed int // panics since the last record, not recorded
}

// panicEvery is the least time between two panic records of a webhook.
const panicEvery = time.Minute

// panicked records a panic: on span, always; as an ERROR record with its
// stack, as the webhook's panicLog allows.
func (h *handler) panicked(ctx context.Context, name string, span trace.Span, p any, stack []byte, msg string) {
	typ, value := fmt.Sprintf("%T", p), fmt.Sprint(p)
	span.AddEvent("exception", trace.WithAttributes(
		attribute.String("exception.type", typ),
		attribute.String("exception.message", value),
		attribute.String("exception.stacktrace", string(stack)),
	))
	l := h.panics[name]
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < panicEvery {
		l.missed++
		l.mu.Unlock()
		return
	}
	missed := l.missed
	l.last, l.missed = now, 0
	l.mu.Unlock()
	h.log.ErrorContext(ctx, "admission webhook panicked", slog.String(attrWebhook, name), slog.String("error", msg),
		slog.Int("humus.kube.admission.panics_unrecorded", missed),
		slog.String("exception.type", typ), slog.String("exception.message", value), slog.String("exception.stacktrace", string(stack)))
}
