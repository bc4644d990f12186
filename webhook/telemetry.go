package webhook

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/z5labs/humus"
)

// traced is h with a server span a request, under the trace context the
// request carries (the API server's, when it traces), named by the
// request's method as OpenTelemetry's HTTP conventions name a span without
// a route: the handler, which knows what it serves, renames it through
// trace.SpanFromContext. A status of 500 or more, or a panic, sets the
// span's status to an error.
func traced(tel humus.Telemetry, h http.Handler) http.Handler {
	tracer := tel.TracerProvider.Tracer(scope)
	prop := tel.Propagator
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", r.Method),
				attribute.String("url.path", r.URL.Path),
				attribute.String("url.scheme", "https"),
			))
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				span.SetStatus(codes.Error, "the handler panicked")
				span.End()
				panic(p) // net/http answers it, and records it
			}
			span.SetAttributes(attribute.Int("http.response.status_code", sw.status()))
			if sw.status() >= 500 {
				span.SetStatus(codes.Error, strconv.Itoa(sw.status()))
			}
			span.End()
		}()
		h.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 { // not an informational 1xx
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's own writer,
// to flush or set deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
