package telemetry_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/contrib/bridges/otelslog"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/telemetry"
)

// client-go's records reach the LoggerProvider as the kube module hands
// them over, logr's V(n) through slog as level -n, and are kept up to the
// Verbosity; slog's own records by their level.
func TestVerbosity(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []telemetry.Option
		env  string // the Host's LOG_VERBOSITY, when not ""
		want string // the levels and messages kept, in order
	}{
		{"default", nil, "", "INFO V(0) DEBUG V(1) DEBUG V(2) WARN slog.Warn ERROR logr.Error INFO slog.Info"},
		{"0", []telemetry.Option{telemetry.Verbosity(0)}, "", "INFO V(0) WARN slog.Warn ERROR logr.Error INFO slog.Info"},
		{"4", []telemetry.Option{telemetry.Verbosity(4)}, "",
			"INFO V(0) DEBUG V(1) DEBUG V(2) DEBUG V(3) DEBUG V(4) WARN slog.Warn ERROR logr.Error INFO slog.Info DEBUG slog.Debug"},
		{"5", []telemetry.Option{telemetry.Verbosity(5)}, "",
			"INFO V(0) DEBUG V(1) DEBUG V(2) DEBUG V(3) DEBUG V(4) TRACE V(5) WARN slog.Warn ERROR logr.Error INFO slog.Info DEBUG slog.Debug"},
		{"10", []telemetry.Option{telemetry.Verbosity(10)}, "",
			"INFO V(0) DEBUG V(1) DEBUG V(2) DEBUG V(3) DEBUG V(4) TRACE V(5) TRACE V(6) TRACE V(7) TRACE V(8) TRACE V(9) TRACE V(10) " +
				"WARN slog.Warn ERROR logr.Error INFO slog.Info DEBUG slog.Debug"},
		{"-4", []telemetry.Option{telemetry.Verbosity(-4)}, "", "WARN slog.Warn ERROR logr.Error"},
		{"the last one set", []telemetry.Option{telemetry.Verbosity(8), nil, telemetry.Verbosity(0)}, "",
			"INFO V(0) WARN slog.Warn ERROR logr.Error INFO slog.Info"},
		{"LOG_VERBOSITY=4", nil, "4",
			"INFO V(0) DEBUG V(1) DEBUG V(2) DEBUG V(3) DEBUG V(4) WARN slog.Warn ERROR logr.Error INFO slog.Info DEBUG slog.Debug"},
		{"LOG_VERBOSITY=-4 over the option", []telemetry.Option{telemetry.Verbosity(8)}, "-4", "WARN slog.Warn ERROR logr.Error"},
		{"LOG_VERBOSITY=0 over the option", []telemetry.Option{telemetry.Verbosity(5)}, " 0 ", "INFO V(0) WARN slog.Warn ERROR logr.Error INFO slog.Info"},
		{"LOG_VERBOSITY=+1000, as 24", nil, "+1000",
			"INFO V(0) DEBUG V(1) DEBUG V(2) DEBUG V(3) DEBUG V(4) TRACE V(5) TRACE V(6) TRACE V(7) TRACE V(8) TRACE V(9) TRACE V(10) " +
				"WARN slog.Warn ERROR logr.Error INFO slog.Info DEBUG slog.Debug"},
		{"LOG_VERBOSITY empty, unset", []telemetry.Option{telemetry.Verbosity(0)}, " ", "INFO V(0) WARN slog.Warn ERROR logr.Error INFO slog.Info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := humustest.NewHost()
			if tc.env != "" {
				h.Env["LOG_VERBOSITY"] = tc.env
			}
			tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer shutdown(t, tel)
			handler := otelslog.NewHandler("test", otelslog.WithLoggerProvider(tel.LoggerProvider))
			log := logr.FromSlogHandler(handler)
			for v := range 11 {
				log.V(v).Info("V(" + strconv.Itoa(v) + ")")
			}
			sl := slog.New(handler)
			sl.Warn("slog.Warn")
			log.Error(errors.New("the server is down"), "logr.Error")
			sl.Info("slog.Info")
			sl.Debug("slog.Debug")

			var got []string
			for line := range strings.Lines(h.Stderr()) {
				f := strings.Fields(line)
				got = append(got, f[1], f[2])
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("kept %s\nwant %s", g, tc.want)
			}
		})
	}
}

// LOG_VERBOSITY is read from the Host, never from the process's
// environment.
func TestLogVerbosityIsTheHosts(t *testing.T) {
	t.Setenv("LOG_VERBOSITY", "-8")
	h := humustest.NewHost()
	tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, tel)
	slog.New(otelslog.NewHandler("test", otelslog.WithLoggerProvider(tel.LoggerProvider))).Info("kept")
	if s := h.Stderr(); !strings.HasSuffix(s, " INFO kept\n") {
		t.Errorf("stderr = %q, want the INFO record, at the default Verbosity", s)
	}
}

// The kube module hands client-go's records below V(2) only to a
// LoggerProvider that chooses by severity, one that turns away a record
// below any severity; Build's does, whatever its Verbosity.
func TestVerbosityChoosesBySeverity(t *testing.T) {
	for _, v := range []int{-24, 0, 2, 10, 24, 1 << 30} {
		h := humustest.NewHost()
		tel, err := telemetry.Build(t.Context(), h.Host(), "test-controller", telemetry.Verbosity(v))
		if err != nil {
			t.Fatal(err)
		}
		handler := otelslog.NewHandler("test", otelslog.WithLoggerProvider(tel.LoggerProvider))
		if handler.Enabled(context.Background(), slog.Level(-1<<20)) {
			t.Errorf("Verbosity(%d): the LoggerProvider takes a record below every severity", v)
		}
		shutdown(t, tel)
	}
}
