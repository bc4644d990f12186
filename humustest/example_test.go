package humustest_test

import (
	"context"
	"fmt"
	"testing/fstest"

	"github.com/z5labs/humus/humustest"
)

// A test Host answers from its own environment and files, and refuses to
// reach beyond loopback.
func ExampleHost() {
	h := humustest.NewHost()
	h.Env["POD_NAMESPACE"] = "memcached-system"
	h.Files["var/run/secrets/kubernetes.io/serviceaccount/namespace"] = &fstest.MapFile{Data: []byte("memcached-system")}
	host := h.Host()

	ns, ok := host.LookupEnv("POD_NAMESPACE")
	fmt.Println(ns, ok)
	_, err := host.Dial(context.Background(), "tcp", "10.96.0.1:443")
	fmt.Println(err)
	_, _ = fmt.Fprintln(host.Stderr, "app: something went wrong")
	fmt.Print(h.Stderr())
	// Output:
	// memcached-system true
	// humustest: dialling 10.96.0.1:443: a test Host doesn't dial "10.96.0.1": only loopback addresses
	// app: something went wrong
}

// A test Telemetry's providers record into memory, for the test to read.
func ExampleTelemetry() {
	tel := humustest.NewTelemetry()
	ctx := context.Background()

	_, span := tel.Telemetry().TracerProvider.Tracer("example").Start(ctx, "reconcile")
	span.End()
	counter, _ := tel.Telemetry().MeterProvider.Meter("example").Int64Counter("humus.example.reconciles")
	counter.Add(ctx, 1)

	for _, s := range tel.Spans() {
		fmt.Println("span:", s.Name())
	}
	rm, _ := tel.Metrics(ctx)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			fmt.Println("metric:", m.Name)
		}
	}
	// Output:
	// span: reconcile
	// metric: humus.example.reconciles
}
