package kube

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/z5labs/humus/kube/internal/teltest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/internal/control"
)

// reconcileSpansOf returns the reconcile spans of the object named name.
func reconcileSpansOf(tel *humustest.Telemetry, kind, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spansNamed(tel, "reconcile "+kind) {
		if spanAttrs(s)[control.AttrObjectName] == name {
			out = append(out, s)
		}
	}
	return out
}

// outcomes is a Reconciler whose reconcile of "ok" succeeds, after it
// starts a span of its own from its context, whose reconcile of "fail"
// fails, and whose reconcile of "boom" panics.
func outcomes(tel *humustest.Telemetry, calls *counter) ReconcilerFunc[cacheSpec, cacheStatus] {
	tracer := tel.Telemetry().TracerProvider.Tracer("memcached-operator")
	return func(ctx context.Context, m memcached) (Result[cacheStatus], error) {
		calls.Inc(m.Name)
		switch m.Name {
		case "fail":
			return Result[cacheStatus]{}, errors.New("the memcached image can't be pulled")
		case "boom":
			var replicas []int32
			_ = replicas[m.Spec.Size] // index out of range
		}
		_, span := tracer.Start(ctx, "get deployment")
		time.Sleep(2 * time.Second)
		span.End()
		return Result[cacheStatus]{}, nil
	}
}

func outcomeObjects() []runtime.Object {
	return []runtime.Object{cacheObject("default", "ok", 1), cacheObject("default", "fail", 1), cacheObject("default", "boom", 5)}
}

func recordBodies(tel *humustest.Telemetry) []string {
	var out []string
	for _, r := range tel.Records() {
		out = append(out, r.Body().AsString())
	}
	return out
}

// The readers of what the telemetry recorded, kube/internal/teltest's.
var (
	spansNamed      = teltest.SpansNamed
	spanAttrs       = teltest.SpanAttrs
	recordsWithBody = teltest.RecordsWithBody
	recordAttrs     = teltest.RecordAttrs
	spanNames       = teltest.SpanNames
	mapsEqual       = maps.Equal[map[string]string, map[string]string]
)
