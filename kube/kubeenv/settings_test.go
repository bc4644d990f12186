package kubeenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/kubeenv"
)

// readSettings reads Settings from h as an App does, in a config.Struct.
func readSettings(h *humustest.Host) (kube.Settings, error) {
	return config.Struct(func(r *config.Resolver) kube.Settings {
		return kubeenv.Settings(r, h.Host(), "memcached-controller")
	}).Read(context.Background())
}

func TestSettingsInAPod(t *testing.T) {
	h, _ := pod(t)

	got, err := readSettings(h)
	if err != nil {
		t.Fatalf("Settings: %v", err)
	}

	want := kube.DefaultSettings()
	want.Name = "memcached-controller"
	want.LeaderElection.Namespace = "memcached-system"
	want.LeaderElection.Identity = "memcached-controller-7d9f-x2k4q"
	if got != want {
		t.Errorf("Settings = %+v, want %+v", got, want)
	}
}

func TestSettingsOverrides(t *testing.T) {
	h, _ := pod(t)
	h.Env["WORKERS"] = "4"
	h.Env["SHARDS"] = "3"
	h.Env["LEASE_DURATION"], h.Env["RENEW_DEADLINE"], h.Env["RETRY_PERIOD"] = "2m", "100s", "3s"

	got, err := readSettings(h)
	if err != nil {
		t.Fatalf("Settings: %v", err)
	}
	if got.Workers != 4 || got.Shards != 3 || got.Namespace != "" {
		t.Errorf("Workers, Shards, Namespace = %d, %d, %q, want 4, 3, \"\"", got.Workers, got.Shards, got.Namespace)
	}
	if le := got.LeaderElection; le.LeaseDuration != 2*time.Minute || le.RenewDeadline != 100*time.Second || le.RetryPeriod != 3*time.Second {
		t.Errorf("LeaseDuration, RenewDeadline, RetryPeriod = %v, %v, %v, want 2m0s, 1m40s, 3s", le.LeaseDuration, le.RenewDeadline, le.RetryPeriod)
	}
}

func TestSettingsNamesEveryProblemInOneError(t *testing.T) {
	h, _ := pod(t)
	delete(h.Env, "POD_NAME")
	h.Env["POD_NAMESPACE"] = "Memcached_System"
	h.Env["WORKERS"] = "0"
	h.Env["SHARDS"] = "many"
	h.Env["LEASE_DURATION"], h.Env["RENEW_DEADLINE"], h.Env["RETRY_PERIOD"] = "15", "-1s", "0s"

	_, err := readSettings(h)

	want := strings.Join([]string{
		`config: environment variable "WORKERS": invalid value "0": kube: workers 0 must be at least 1`,
		`config: environment variable "SHARDS": invalid value "many": strconv.Atoi: parsing "many": invalid syntax`,
		`config: environment variable "LEASE_DURATION": invalid value "15": time: missing unit in duration "15"`,
		`config: environment variable "RENEW_DEADLINE": invalid value "-1s": kube: renew deadline -1s must be positive`,
		`config: environment variable "RETRY_PERIOD": invalid value "0s": kube: retry period 0s must be positive`,
		`config: environment variable "POD_NAMESPACE": invalid value "Memcached_System": kube: namespace "Memcached_System" must be a DNS-1123 label: ` +
			`a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		`config: environment variable "POD_NAME" is not set`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Settings' error =\n%v\nwant\n%s", err, want)
	}
}
