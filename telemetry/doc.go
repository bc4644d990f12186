// Package telemetry builds an App's OpenTelemetry providers in one call,
// from what its humus.Host gives it: log records as lines a person reads on
// the Host's stderr, metrics for Prometheus to scrape, and, where
// OpenTelemetry's standard variables ask for it, traces, metrics and logs
// exported over OTLP/HTTP.
//
//	humus.Main(app.Init, humus.WithTelemetry(telemetry.New("memcached-controller")))
//
// and, in Init, the metrics beside the probes:
//
//	if h, ok := telemetry.MetricsHandler(s.Telemetry); ok {
//		opts = append(opts, health.Handle("GET /metrics", h))
//	}
//
// What Build's Telemetry does:
//
//   - Every log record the Verbosity keeps is one line on the Host's
//     stderr, written when it is emitted: its time in UTC, level and
//     message, its object as namespace/name, and its other attributes as
//     key=value (see NewLineProcessor). The Verbosity is V(2) unless set,
//     by LOG_VERBOSITY or the Verbosity option: INFO and above, and
//     client-go's messages of note (see Verbosity).
//   - The metrics are kept for MetricsHandler's handler, which serves them
//     in Prometheus' text format from a registry of their own, never
//     Prometheus' global one, under Prometheus' names
//     (otlptranslator.UnderscoreEscapingWithSuffixes), such as
//     humus_kube_controller_queue_adds_total.
//   - Traces are recorded only when they are exported: without an OTLP
//     endpoint for them, the TracerProvider is nil, a no-op one.
//   - The propagator is W3C trace context and baggage.
//   - Build reads and sets no OpenTelemetry, Prometheus or klog global (but
//     see below for what OpenTelemetry's SDK reads itself): two Apps in one
//     process have their own providers and registries.
//   - Build reads the variables below through Host.LookupEnv, and the OTLP
//     exporters dial through Host.Dial, with no proxy.
//   - Every bad variable is named in the one error Build returns, and a
//     Build that fails has started nothing, no goroutine included.
//   - An OTLP export that fails is one ERROR line on the Host's stderr,
//     "telemetry: exporting <signal> failed", with the URL and the error;
//     its data is dropped, and the App goes on. It is not an error of the
//     providers' shutdown either.
//
// # Variables
//
// Build reads OpenTelemetry's own variables, as OpenTelemetry defines
// them; an empty one is an unset one:
//
//   - OTEL_SERVICE_NAME: service.name, overriding Build's service.
//   - OTEL_RESOURCE_ATTRIBUTES: more attributes of the resource, such as
//     deployment.environment.name=production,team=payments; service.name
//     there overrides Build's service too, but not OTEL_SERVICE_NAME.
//   - OTEL_EXPORTER_OTLP_ENDPOINT: the collector's base URL, such as
//     http://otel-collector:4318; traces, metrics and logs are exported to
//     its /v1/traces, /v1/metrics and /v1/logs.
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
//     and OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: one signal's URL, as it is
//     (with no path, /), overriding the base URL. A signal is exported
//     when its own URL or the base URL is set, and only then.
//   - OTEL_EXPORTER_OTLP_HEADERS, and the signals' own
//     OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS, which replace it: HTTP headers
//     sent with each export, such as api-key=secret,tenant=a, each
//     percent-encoded. An error names a bad header by its name or its
//     place, never by its value.
//   - OTEL_EXPORTER_OTLP_PROTOCOL, and OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL:
//     http/protobuf, or unset. grpc and http/json are refused with an
//     error saying so: point the endpoint at the collector's OTLP/HTTP
//     port, 4318 by default, instead.
//   - OTEL_SDK_DISABLED: true turns the OTLP exports off, and the
//     OTEL_EXPORTER_OTLP_ variables go unread; the stderr lines and the
//     Prometheus metrics stay, as they are the App's own.
//
// and one of its own, for the log records, which OpenTelemetry has none
// for:
//
//   - LOG_VERBOSITY: the Verbosity, Kubernetes' V level as its components'
//     -v flag takes it, such as 4 to keep DEBUG records, or -4 to keep
//     WARN and above; it overrides the Verbosity option, so a Deployment's
//     env turns a controller's logs up or down without a new build. It is
//     named as the kube module's kubeenv names its variables, without the
//     OTEL_ prefix: OpenTelemetry's OTEL_LOG_LEVEL is the level of the
//     SDK's own diagnostics (which Build leaves to OpenTelemetry's global
//     error handler), and takes names (info, debug), not V levels.
//
// The other OTEL_EXPORTER_OTLP_ variables (COMPRESSION, TIMEOUT,
// CERTIFICATE, CLIENT_CERTIFICATE, CLIENT_KEY, INSECURE) and the SDK's own
// (OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_BLRP_*, OTEL_METRIC_EXPORT_*,
// OTEL_*_LIMIT, OTEL_METRICS_EXEMPLAR_FILTER, OTEL_PROPAGATORS,
// OTEL_*_EXPORTER) aren't read from the Host: the exports are uncompressed,
// over TLS with the system's roots for an https URL, with the SDK's
// default timeouts, batches, limits and sampler, and all traces sampled.
//
// # What the process's environment still changes
//
// OpenTelemetry's SDK and exporters read OTEL_* variables from the
// process's environment themselves, past the Host. Build passes every
// setting such a variable could change as an option, so these are read but
// change nothing:
//
//   - the OTLP trace and metric exporters', when that signal is exported:
//     OTEL_EXPORTER_OTLP_ and OTEL_EXPORTER_OTLP_TRACES_ or _METRICS_
//     ENDPOINT, HEADERS, PROTOCOL, COMPRESSION, TIMEOUT, INSECURE,
//     CERTIFICATE, CLIENT_CERTIFICATE and CLIENT_KEY (the exporters read
//     the files these three name, from the process's file system), and
//     OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE and
//     _DEFAULT_HISTOGRAM_AGGREGATION;
//   - the trace SDK's, when traces are exported: OTEL_TRACES_SAMPLER and
//     _ARG, OTEL_BSP_*, OTEL_ATTRIBUTE_COUNT_LIMIT and
//     _VALUE_LENGTH_LIMIT, OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT,
//     _ATTRIBUTE_VALUE_LENGTH_LIMIT, _EVENT_COUNT_LIMIT and
//     _LINK_COUNT_LIMIT, OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT and
//     OTEL_LINK_ATTRIBUTE_COUNT_LIMIT;
//   - the metric SDK's: OTEL_METRICS_EXEMPLAR_FILTER and
//     OTEL_GO_X_CARDINALITY_LIMIT, and, when metrics are exported,
//     OTEL_METRIC_EXPORT_INTERVAL and _TIMEOUT.
//
// An invalid one is still reported by OpenTelemetry's global error
// handler, on the process's stderr unless the program set one. The OTLP
// log exporter and the log SDK read none of theirs, as each has its
// option. What does change something:
//
//   - OTEL_RESOURCE_ATTRIBUTES: each provider's resource is the SDK's merge
//     of it (and of OTEL_SERVICE_NAME) with Build's, which the SDK makes in
//     its WithResource and which can't be turned off. Build's attributes
//     win where both have a key, service.name always included, but a key
//     only the process's variable has is added, to the OTLP exports and to
//     Prometheus' target_info. With humus.OSHost, the Host's environment is
//     the process's, and this adds nothing.
//   - OTEL_GO_X_OBSERVABILITY (or OTEL_GO_X_SELF_OBSERVABILITY): the SDK
//     and exporters record metrics of their own, on OpenTelemetry's global
//     MeterProvider, which nothing in humus sets.
//   - OTEL_GO_X_PER_SERIES_START_TIMESTAMPS: the metric SDK's start
//     timestamps, per series.
//
// Other diagnostics of the SDK and exporters (an export that succeeded
// only in part, a full queue, a dropped attribute) also go to
// OpenTelemetry's global error handler or logger; the package sets
// neither, as both are global.
package telemetry
