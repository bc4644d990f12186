package health_test

import (
	"context"
	"errors"
	"testing"

	"github.com/z5labs/humus/health"
)

func TestBinary(t *testing.T) {
	var zero health.Binary
	if err := zero.Healthy(context.Background()); err == nil || err.Error() != "not ready" {
		t.Errorf("the zero Binary's Healthy() = %v, want not ready", err)
	}

	synced := errors.New("caches not synced")
	b := health.NewBinary(synced)
	if err := b.Healthy(context.Background()); !errors.Is(err, synced) {
		t.Errorf("NewBinary(reason).Healthy() = %v, want the reason %v", err, synced)
	}
	b.MarkHealthy()
	if err := b.Healthy(context.Background()); err != nil {
		t.Errorf("Healthy() after MarkHealthy = %v, want nil", err)
	}
	b.MarkUnhealthy(nil)
	if err := b.Healthy(context.Background()); err == nil || err.Error() != "not ready" {
		t.Errorf("Healthy() after MarkUnhealthy(nil) = %v, want not ready", err)
	}
	if err := health.NewBinary(nil).Healthy(context.Background()); err == nil || err.Error() != "not ready" {
		t.Errorf("NewBinary(nil).Healthy() = %v, want not ready", err)
	}
}

func TestAllAnswersEveryReason(t *testing.T) {
	cache := health.NewBinary(errors.New("caches not synced"))
	lease := health.NewBinary(errors.New("no lease"))
	ok := health.MonitorFunc(func(context.Context) error { return nil })
	all := health.All(cache, ok, nil, lease)

	if err := all.Healthy(context.Background()); err == nil || err.Error() != "caches not synced\nno lease" {
		t.Errorf("All(...).Healthy() = %q, want both reasons in order", err)
	}
	cache.MarkHealthy()
	if err := all.Healthy(context.Background()); err == nil || err.Error() != "no lease" {
		t.Errorf("All(...).Healthy() with one unhealthy = %q, want no lease", err)
	}
	lease.MarkHealthy()
	if err := all.Healthy(context.Background()); err != nil {
		t.Errorf("All(...).Healthy() with every Monitor healthy = %v, want nil", err)
	}
	if err := health.All().Healthy(context.Background()); err != nil {
		t.Errorf("All().Healthy() = %v, want nil", err)
	}
}

func TestAllHoldsItsOwnMonitors(t *testing.T) {
	ms := []health.Monitor{health.NewBinary(errors.New("down"))}
	all := health.All(ms...)
	ms[0] = health.MonitorFunc(func(context.Context) error { return nil })
	if err := all.Healthy(context.Background()); err == nil {
		t.Error("All answered from a slice its caller changed afterwards")
	}
}
