package telemetry

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/net/http/httpguts"

	"github.com/z5labs/humus"
)

// The variables Build reads, OpenTelemetry's own: see the package doc.
const (
	envServiceName = "OTEL_SERVICE_NAME"
	envResource    = "OTEL_RESOURCE_ATTRIBUTES"
	envDisabled    = "OTEL_SDK_DISABLED"
	envOTLP        = "OTEL_EXPORTER_OTLP_" // + [signal_]ENDPOINT, HEADERS or PROTOCOL

	// envVerbosity is the Verbosity, Kubernetes' V level, not
	// OpenTelemetry's: OTEL_LOG_LEVEL is the level of the SDK's own
	// diagnostics, not of the App's records. See the package doc.
	envVerbosity = "LOG_VERBOSITY"
)

// signal is one of the three OTLP exports.
type signal int

const (
	traces signal = iota
	metrics
	logs
)

func (s signal) String() string {
	switch s {
	case traces:
		return "traces"
	case metrics:
		return "metrics"
	default:
		return "logs"
	}
}

// path is s's path under OTEL_EXPORTER_OTLP_ENDPOINT, such as v1/traces.
func (s signal) path() string { return "v1/" + s.String() }

// variable is the name of s's own variable, such as
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT for "ENDPOINT".
func (s signal) variable(suffix string) string {
	return envOTLP + strings.ToUpper(s.String()) + "_" + suffix
}

// config is what the Host's variables say.
type config struct {
	service string               // service.name
	attrs   []attribute.KeyValue // OTEL_RESOURCE_ATTRIBUTES, service.name excepted
	otlp    [3]*target           // indexed by signal; nil when not exported

	verbosity    int  // LOG_VERBOSITY
	hasVerbosity bool // whether LOG_VERBOSITY is set
}

// target is where one signal is exported.
type target struct {
	url     string // such as http://otel-collector:4318/v1/traces
	headers map[string]string
}

// readConfig reads the variables of the package doc through h, and returns
// every bad one in one error.
func readConfig(h humus.Host, service string) (config, error) {
	env := func(key string) string {
		v, _ := h.LookupEnv(key)
		// OpenTelemetry's rule: an empty value is an unset one.
		return strings.TrimSpace(v)
	}
	var c config
	var errs []error
	attrs, attrsService, err := parseResourceAttributes(env(envResource))
	errs = append(errs, err)
	c.attrs = attrs
	c.service = cmp.Or(env(envServiceName), attrsService, service)
	if c.service == "" {
		errs = append(errs, fmt.Errorf("telemetry: no service name: pass one to Build, or set %s", envServiceName))
	}
	c.verbosity, c.hasVerbosity, err = parseVerbosity(env(envVerbosity))
	errs = append(errs, err)
	disabled, err := parseBool(envDisabled, env(envDisabled))
	errs = append(errs, err)
	if !disabled {
		c.otlp, err = readOTLP(env)
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// readOTLP reads where each signal is exported: to its own
// OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT as it is, or else to its path
// under OTEL_EXPORTER_OTLP_ENDPOINT, or nowhere.
func readOTLP(env func(string) string) ([3]*target, error) {
	var errs []error
	base, err := endpoint(envOTLP+"ENDPOINT", env(envOTLP+"ENDPOINT"))
	errs = append(errs, err)
	headers, err := parseHeaders(envOTLP+"HEADERS", env(envOTLP+"HEADERS"))
	errs = append(errs, err)
	errs = append(errs, checkProtocol(envOTLP+"PROTOCOL", env(envOTLP+"PROTOCOL")))

	var out [3]*target
	for s := range out {
		s := signal(s)
		own, err := endpoint(s.variable("ENDPOINT"), env(s.variable("ENDPOINT")))
		errs = append(errs, err)
		ownHeaders, err := parseHeaders(s.variable("HEADERS"), env(s.variable("HEADERS")))
		errs = append(errs, err)
		errs = append(errs, checkProtocol(s.variable("PROTOCOL"), env(s.variable("PROTOCOL"))))

		t := &target{headers: headers}
		if ownHeaders != nil {
			// As OpenTelemetry's exporters do: a signal's own headers
			// replace the shared ones.
			t.headers = ownHeaders
		}
		switch {
		case own != nil:
			if own.Path == "" {
				own.Path = "/"
			}
			t.url = own.String()
		case base != nil:
			t.url = base.JoinPath(s.path()).String()
		default:
			continue
		}
		out[s] = t
	}
	return out, errors.Join(errs...)
}

// endpoint is the variable key's value v as a URL, nil when v is empty.
func endpoint(key, v string) (*url.URL, error) {
	if v == "" {
		return nil, nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("telemetry: %s %q: want an http or https URL, such as http://otel-collector:4318", key, v)
	}
	return u, nil
}

// checkProtocol refuses every protocol but http/protobuf, the only one
// Build exports with.
func checkProtocol(key, v string) error {
	switch v {
	case "", "http/protobuf":
		return nil
	case "grpc":
		return fmt.Errorf("telemetry: %s %q: OTLP over gRPC isn't supported, only http/protobuf: "+
			"set it to http/protobuf, or unset it, and point the endpoint at the collector's OTLP/HTTP port (4318 by default, where gRPC's is 4317)", key, v)
	case "http/json":
		return fmt.Errorf("telemetry: %s %q: OTLP with JSON isn't supported, only http/protobuf: set it to http/protobuf, or unset it", key, v)
	default:
		return fmt.Errorf("telemetry: %s %q: want http/protobuf", key, v)
	}
}

// parseVerbosity parses LOG_VERBOSITY, a V level as Kubernetes' -v flag
// takes it: an integer, negative to keep less than INFO. ok is false when
// v is empty.
func parseVerbosity(v string) (verbosity int, ok bool, err error) {
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false, fmt.Errorf("telemetry: %s %q: want a V level, an integer such as 2 (the default: INFO and client-go's messages of note), "+
			"4 (and DEBUG), 0 (INFO and above) or -4 (WARN and above)", envVerbosity, v)
	}
	return n, true, nil
}

// parseBool is OpenTelemetry's boolean variable: true or false, in any
// case, false when unset.
func parseBool(key, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("telemetry: %s %q: want true or false", key, v)
	}
}

// parseHeaders parses the variable key's value v, headers as
// OpenTelemetry writes them: name=value pairs, separated by commas, each
// percent-encoded. It returns nil when v is empty. An error names the
// variable and a bad header's name, or its place, but never a value: a
// header is often a credential.
func parseHeaders(key, v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	headers := map[string]string{}
	var errs []error
	for i, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue // a trailing comma, say
		}
		rawName, rawValue, ok := strings.Cut(pair, "=")
		name, nameErr := url.PathUnescape(strings.TrimSpace(rawName))
		value, valueErr := url.PathUnescape(strings.TrimSpace(rawValue))
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("telemetry: %s: header %d has no \"=\": want name=value pairs, separated by commas, such as api-key=secret,tenant=a", key, i+1))
		case nameErr != nil || !httpguts.ValidHeaderFieldName(name):
			errs = append(errs, fmt.Errorf("telemetry: %s: header %d's name %q isn't an HTTP header name", key, i+1, rawName))
		case valueErr != nil:
			errs = append(errs, fmt.Errorf("telemetry: %s: the value of header %s isn't percent-encoded correctly", key, name))
		default:
			headers[name] = value
		}
	}
	return headers, errors.Join(errs...)
}

// parseResourceAttributes parses OTEL_RESOURCE_ATTRIBUTES, key=value
// pairs separated by commas, each percent-encoded, and returns them with
// service.name apart.
func parseResourceAttributes(v string) (attrs []attribute.KeyValue, service string, err error) {
	if v == "" {
		return nil, "", nil
	}
	var errs []error
	for pair := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		rawKey, rawValue, ok := strings.Cut(pair, "=")
		key, keyErr := url.PathUnescape(strings.TrimSpace(rawKey))
		value, valueErr := url.PathUnescape(strings.TrimSpace(rawValue))
		if !ok || key == "" || keyErr != nil || valueErr != nil {
			errs = append(errs, fmt.Errorf("telemetry: %s: %q: want key=value pairs, separated by commas and percent-encoded, such as deployment.environment.name=production,team=payments", envResource, strings.TrimSpace(pair)))
			continue
		}
		if key == "service.name" {
			service = value
			continue
		}
		attrs = append(attrs, attribute.String(key, value))
	}
	return attrs, service, errors.Join(errs...)
}
