// Package humus runs an App: a set of Services, built by an Init from a Host
// and a Telemetry that are passed in, never taken from globals.
//
// What it promises:
//
//   - Main runs on OSHost, cancels the Services' Serve context on the first
//     SIGINT or SIGTERM, calls every Service's Shutdown with a grace period
//     of 20s (WithGracePeriod changes it), never drains anything itself, and
//     exits 0 when every Service returned nil and 1 otherwise. A second
//     signal exits 1 at once.
//   - A Service that returns while the others run ends the App: the others
//     are shut down as on a signal.
//   - The grace period bounds the whole shutdown: the Services' Shutdown,
//     then the telemetry's flush, in what is left of it. Run returns within
//     it, even when a Service ignores its context.
//   - An error from Init, from the telemetry's build or from any Service is
//     written once, plainly, to the Host's Stderr.
//   - Run does all of it on any Host, for tests: humustest.Start runs a
//     whole App as the process would.
//   - Nothing here reads the environment, the disk or the network except
//     through the Host, and nothing reads or sets an OpenTelemetry global.
//
// The packages beside it: health (monitors, and the probes' Service),
// config (plain values from the Host's environment and files, every
// problem in one error), webhook (the HTTPS Service a conversion or
// admission webhook runs on, its certificate renewed without a restart)
// and humustest (a Host, a Telemetry and checks for tests).
//
// Kubernetes controllers are the nested module github.com/z5labs/humus/kube:
// a controller is a Service, built on client-go alone.
package humus
