package clustertest

import (
	"strings"
	"testing"
)

func TestNamespacePrefix(t *testing.T) {
	for _, tc := range []struct{ test, want string }{
		{"TestClusterWidget", "testclusterwidget-"},
		{"TestA/sub_test#01", "testa-sub-test-01-"},
		{"Test__A", "test-a-"},
		{"/", "test-"},
		{strings.Repeat("a", 49) + "/b", strings.Repeat("a", 49) + "-"},
		{strings.Repeat("a", 70), strings.Repeat("a", 50) + "-"},
	} {
		if got := namespacePrefix(tc.test); got != tc.want {
			t.Errorf("namespacePrefix(%q) = %q, want %q", tc.test, got, tc.want)
		}
	}
}
