// Command kube-controller-manager is Kubernetes' own controller manager,
// built from its v1.37.2 source for the tests' control plane.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
