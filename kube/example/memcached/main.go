// Command memcached is the Memcached operator: see package app, and
// ../README.md for running it against a local control plane.
package main

import (
	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube/example/memcached/app"
)

func main() {
	humus.Main(app.Init, humus.WithTelemetry(app.BuildTelemetry))
}
