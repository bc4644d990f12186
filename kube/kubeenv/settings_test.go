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
	h.Env["RETRY_BASE_DELAY"], h.Env["RETRY_MAX_DELAY"] = "250ms", "5m"
	h.Env["RECONCILE_TIMEOUT"], h.Env["LOW_PRIORITY_MAX_WAIT"] = "30s", "10s"

	got, err := readSettings(h)
	if err != nil {
		t.Fatalf("Settings: %v", err)
	}
	if got.RetryBaseDelay != 250*time.Millisecond || got.RetryMaxDelay != 5*time.Minute {
		t.Errorf("RetryBaseDelay, RetryMaxDelay = %v, %v, want 250ms, 5m0s", got.RetryBaseDelay, got.RetryMaxDelay)
	}
	if got.ReconcileTimeout != 30*time.Second || got.LowPriorityMaxWait != 10*time.Second {
		t.Errorf("ReconcileTimeout, LowPriorityMaxWait = %v, %v, want 30s, 10s", got.ReconcileTimeout, got.LowPriorityMaxWait)
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
	h.Env["RETRY_BASE_DELAY"], h.Env["RETRY_MAX_DELAY"] = "0s", "soon"
	h.Env["RECONCILE_TIMEOUT"], h.Env["LOW_PRIORITY_MAX_WAIT"] = "-30s", "0s"

	_, err := readSettings(h)

	want := strings.Join([]string{
		`config: environment variable "WORKERS": invalid value "0": kube: workers 0 must be at least 1`,
		`config: environment variable "SHARDS": invalid value "many": strconv.Atoi: parsing "many": invalid syntax`,
		`config: environment variable "RETRY_BASE_DELAY": invalid value "0s": kube: retry delay 0s must be positive`,
		`config: environment variable "RETRY_MAX_DELAY": invalid value "soon": time: invalid duration "soon"`,
		`config: environment variable "RECONCILE_TIMEOUT": invalid value "-30s": kube: reconcile timeout -30s must not be negative: 0 is none`,
		`config: environment variable "LOW_PRIORITY_MAX_WAIT": invalid value "0s": kube: low priority max wait 0s must be positive`,
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

// A RECONCILE_TIMEOUT of 0 is none, as Settings.ReconcileTimeout's 0 is.
func TestSettingsReconcileTimeoutZeroIsNone(t *testing.T) {
	h, _ := pod(t)
	h.Env["RECONCILE_TIMEOUT"] = "0"

	got, err := readSettings(h)
	if err != nil || got.ReconcileTimeout != 0 {
		t.Errorf("Settings' ReconcileTimeout = %v, %v; want 0, nil", got.ReconcileTimeout, err)
	}
}

// Two controllers' Settings read once and copied name a bad variable once,
// where two reads would name it twice.
func TestSettingsOfTwoControllersNameABadVariableOnce(t *testing.T) {
	h, _ := pod(t)
	h.Env["WORKERS"] = "none"

	_, err := config.Struct(func(r *config.Resolver) [2]kube.Settings {
		web := kubeenv.Settings(r, h.Host(), "website-controller")
		mirror := web
		mirror.Name = "mirror-controller"
		return [2]kube.Settings{web, mirror}
	}).Read(context.Background())

	want := `config: environment variable "WORKERS": invalid value "none": strconv.Atoi: parsing "none": invalid syntax`
	if err == nil || err.Error() != want {
		t.Errorf("Settings' error =\n%v\nwant\n%s", err, want)
	}
}
