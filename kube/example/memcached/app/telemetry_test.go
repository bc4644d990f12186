package app_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/internal/apptest"
	"github.com/z5labs/humus/kube/example/memcached/app"
	"github.com/z5labs/humus/telemetry"
)

// With telemetry.Verbosity(5), the whole App's debugging records reach
// stderr: leader election's V(5) line for each renewal of the Lease, which
// the kube module hands over only to a LoggerProvider that chooses by
// severity, as telemetry's does. At the default, V(2), there is none:
// TestClusterMemcached finds no TRACE line on stderr.
func TestClusterVerbosityShowsEachRenewalOfTheLease(t *testing.T) {
	c := clustertest.Get(t)
	installCRD(t, c)
	ns := c.Namespace(t)
	host := c.PodHost(t, ns, "memcached-controller-0", app.Name, clustertest.RBACGrants(t, "../deploy/rbac.yaml", ns)...)

	p := humustest.Start(t, host.Host(), app.Init, humus.WithTelemetry(telemetry.New(app.Name, telemetry.Verbosity(5))))

	// Each record names the controller and its resource, as every record a
	// controller writes does.
	renewed := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z TRACE Successfully renewed lease ` +
		`humus\.kube\.controller\.name=` + regexp.QuoteMeta(app.Name) + ` humus\.kube\.resource=memcacheds\.cache\.example\.com lock=` +
		regexp.QuoteMeta(ns+"/"+app.Name) + `$`)
	// The leader renews its Lease every RetryPeriod, 2s by default.
	clustertest.Eventually(t, 30*time.Second, func(context.Context) error {
		if !renewed.MatchString(host.Stderr()) {
			return errors.New("no renewal of the Lease on stderr yet")
		}
		return nil
	})

	apptest.Stop(t, p, host)
}
