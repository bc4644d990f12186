package kube

import (
	"strings"
	"testing"
	"time"
)

func TestReconcileTimeoutIsCheckedWithTheOtherSettings(t *testing.T) {
	if err := CheckReconcileTimeout(0); err != nil {
		t.Errorf("CheckReconcileTimeout(0) = %v, want nil: 0 is none", err)
	}
	s := testSettings()
	s.ReconcileTimeout = -time.Second
	const want = "kube: Settings.ReconcileTimeout -1s must not be negative: 0 is none"
	if err := s.check(Namespaced); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("check = %v, want %q", err, want)
	}
}
