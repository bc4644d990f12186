package kubeenv

import (
	"context"
	"errors"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
)

// Connection reads the Connection an App runs with from h, wherever it
// runs:
//
//   - when KUBECONFIG is set, outside a cluster, it is that kubeconfig's
//     current-context, as Kubeconfig reads it: a path relative to h.Dir,
//     or a list of paths merged as kubectl merges them;
//   - otherwise, in a pod, it is the pod's, as InCluster reads it.
//
// An empty KUBECONFIG is taken as unset, as kubectl takes it. Unlike
// kubectl, and unlike controller-runtime's GetConfig, it never falls back
// on ~/.kube/config: outside a cluster, KUBECONFIG says which kubeconfig,
// and so which rights, the App runs with. With neither KUBECONFIG nor
// KUBERNETES_SERVICE_HOST set, the error says so, rather than naming
// every file a pod would have.
func Connection(ctx context.Context, h humus.Host) (kube.Connection, error) {
	if path, ok := h.LookupEnv("KUBECONFIG"); ok && path != "" {
		return Kubeconfig(ctx, h, path, "")
	}
	if _, ok := h.LookupEnv("KUBERNETES_SERVICE_HOST"); !ok {
		return kube.Connection{}, errors.New("kubeenv: neither KUBECONFIG nor KUBERNETES_SERVICE_HOST is set: " +
			"outside a cluster, set KUBECONFIG to a kubeconfig's path; in a pod, the kubelet sets KUBERNETES_SERVICE_HOST")
	}
	return InCluster(ctx, h)
}
