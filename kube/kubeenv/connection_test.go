package kubeenv_test

import (
	"context"
	"testing"

	"github.com/z5labs/humus/kube/kubeenv"
)

func TestConnection(t *testing.T) {
	for _, tc := range []struct {
		name       string
		kubeconfig *string // KUBECONFIG, unset when nil
		want       string  // the Server
	}{
		{name: "in a pod", want: "[fd00::1]:443"},
		{name: "KUBECONFIG set, in a pod too", kubeconfig: ptr("../.kube/config"), want: "dev.example.com:6443"},
		{name: "KUBECONFIG empty", kubeconfig: ptr(""), want: "[fd00::1]:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := pod(t)
			h.Dir = "/home/me/project"
			write(t, h, "home/me/.kube/config", kubeconfig(t, "https://dev.example.com:6443", nil))
			if tc.kubeconfig != nil {
				h.Env["KUBECONFIG"] = *tc.kubeconfig
			}

			conn, err := kubeenv.Connection(context.Background(), h.Host())
			if err != nil {
				t.Fatalf("Connection: %v", err)
			}
			if conn.Server != tc.want {
				t.Errorf("Server = %q, want %q", conn.Server, tc.want)
			}
		})
	}
}

func TestConnectionNeitherAKubeconfigNorAPod(t *testing.T) {
	_, err := kubeenv.Connection(context.Background(), workstation().Host())

	want := "kubeenv: neither KUBECONFIG nor KUBERNETES_SERVICE_HOST is set: " +
		"outside a cluster, set KUBECONFIG to a kubeconfig's path; in a pod, the kubelet sets KUBERNETES_SERVICE_HOST"
	if err == nil || err.Error() != want {
		t.Errorf("Connection's error = %v, want %s", err, want)
	}
}

func ptr(s string) *string { return &s }
