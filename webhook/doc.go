// Package webhook serves an http.Handler over HTTPS, as the API server
// calls a Kubernetes conversion or admission webhook: a POST of JSON over
// TLS, to a Service or a URL, with the serving certificate the API server
// trusts through the webhook's caBundle.
//
// What it promises:
//
//   - A Service listens through the Host (Host.Listen) and reads its
//     certificate and key through it (Host.FS), from two files in one
//     folder, tls.crt and tls.key unless named otherwise: the keys of a
//     kubernetes.io/tls Secret, which is what a cert-manager Certificate
//     writes, mounted as a volume. A relative folder is taken against
//     Host.Dir, as Host.HostPath does.
//   - NewService checks its Settings and the files before anything serves,
//     and returns every mistake at once in one error, each naming the value
//     and what is wrong with it: an address that isn't one, a file that
//     is missing, a key that isn't the certificate's, a certificate that
//     has expired or isn't valid yet.
//   - A renewed certificate is served without a restart. The files are
//     read again on a TLS handshake at most once every Settings.CheckEvery
//     (10s unless set), and their content compared with what is serving;
//     a kubelet swapping a Secret volume's files at once is read as one
//     pair. A renewed pair that can't serve (a key of another certificate,
//     an expired certificate, a file missing) leaves the one serving in
//     place, and is recorded once, as an error log record.
//   - Nobody who reaches the port holds it. The API server calls a
//     webhook with a timeout of 30s at most, sending each review whole at
//     once over a few connections it keeps; the Service's bounds follow
//     from that: a TLS handshake and a request's headers within
//     ReadHeaderTimeout (10s); a request's headers and body within
//     ReadTimeout (30s) of its start, after which a body still arriving
//     is cut off, its handler's read failing; its answer written within
//     WriteTimeout (30s) of its headers, and its handler's context done
//     then; a connection idle for IdleTimeout (60s) closed; at most
//     MaxConnections (128) connections at once, one more waiting
//     unaccepted; and at most MaxConcurrentStreams (32) requests at once
//     on an HTTP/2 connection.
//   - Serve returns nil once its context is done, having stopped
//     accepting connections, or an error once the listener fails. Shutdown
//     closes the idle connections, gives a request still sending its body
//     a second more, then cuts it off, and lets the requests in flight
//     finish within its context: a slow client doesn't hold it. Ready is
//     healthy while the Service serves, for health.Readiness.
//   - Service.Before orders the webhook and the Services that need it,
//     such as the controllers whose requests it converts, which humus.Run
//     would start and stop together: they serve only once it listens,
//     and it serves until they have stopped, within Shutdown's context.
//   - Every request has a server span, from the Setup's Telemetry, in the
//     request's context, under a trace context the request carries; the
//     handler adds to it, or renames it, through trace.SpanFromContext.
//     Nothing records through an OpenTelemetry, log or slog global: net/http's
//     own messages, such as a failed handshake's, are log records too.
//
// The handler is the webhook: package kube's conversion handler, or the
// admission webhooks of package kube/admission. A denial from an admission webhook is
// a 200 whose AdmissionReview says allowed: false; any other status is a
// failure, which the webhook's failurePolicy decides.
package webhook
