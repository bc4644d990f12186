package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus/kube/internal/teltest"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	corev1 "k8s.io/api/core/v1"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/control"
)

const p = "humus.kube.controller."

// reconcileDurations returns reconcile.duration's data points by outcome.
func reconcileDurations(t testing.TB, tel *humustest.Telemetry) map[string]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	return teltest.HistogramBy(t, tel, p+"reconcile.duration", control.AttrOutcome)
}

// checkController fails t unless set names the controller
// memcached-controller.
func checkController(t testing.TB, name string, set attribute.Set) {
	t.Helper()
	teltest.CheckAttr(t, name, set, control.AttrController, "memcached-controller")
}

// failingMeterProvider's meters fail to create a histogram, as a
// MeterProvider refusing an instrument does.
type failingMeterProvider struct{ metricnoop.MeterProvider }

func (failingMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

type failingMeter struct{ metricnoop.Meter }

var errNoHistograms = errors.New("histograms are refused")

func (failingMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	h, _ := metricnoop.Meter{}.Float64Histogram(name, opts...)
	return h, errNoHistograms
}

func TestAnErrorCreatingAnInstrumentIsAmongTheConstructorsErrors(t *testing.T) {
	setup := &humus.Setup{Host: humustest.NewHost().Host(), Telemetry: humus.Telemetry{MeterProvider: failingMeterProvider{}}}
	// The Client records with another Setup's: otelhttp reports an
	// instrument it can't create to OpenTelemetry's global error handler,
	// not to its caller.
	client := testClient(t, &humus.Setup{Host: setup.Host})
	s := testSettings()
	s.Workers = 0
	want := []string{
		"kube: creating the instrument humus.kube.controller.queue.duration: histograms are refused",
		"kube: creating the instrument humus.kube.controller.reconcile.duration: histograms are refused",
		"kube: creating the instrument humus.kube.controller.reconcile.change_latency: histograms are refused",
		"kube: Settings.Workers 0 must be at least 1",
	}
	constructors := map[string]func() (*Controller, error){
		"NewController": func() (*Controller, error) {
			var calls counter
			return NewController(setup, client, s, caches, readyReplicas(&calls))
		},
		"NewKindController": func() (*Controller, error) {
			rec := KindReconcilerFunc[corev1.Namespace](func(context.Context, corev1.Namespace) (time.Duration, error) { return 0, nil })
			return NewKindController(setup, client, s, namespaces, rec)
		},
	}
	for name, construct := range constructors {
		t.Run(name, func(t *testing.T) {
			ctrl, err := construct()
			if ctrl != nil || err == nil {
				t.Fatalf("%s = %v, %v, want an error", name, ctrl, err)
			}
			if !errors.Is(err, errNoHistograms) {
				t.Errorf("%s's error doesn't wrap the MeterProvider's: %v", name, err)
			}
			lines := strings.Split(err.Error(), "\n")
			for _, w := range want {
				if !slices.Contains(lines, w) {
					t.Errorf("%s's error lacks %q; it is:\n%v", name, w, err)
				}
			}
			if len(lines) != len(want) {
				t.Errorf("%s's error has %d lines, want %d:\n%v", name, len(lines), len(want), err)
			}
		})
	}
}

// instrumentsOf is the reader of what the telemetry measured,
// kube/internal/teltest's.
var instrumentsOf = teltest.Instruments
