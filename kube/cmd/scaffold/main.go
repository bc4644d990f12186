// Command scaffold writes a new controller module that you own, or adds a
// resource, or a version of one, to a module it wrote. Run it with go run,
// from the folder of your module; nothing is installed:
//
//	go run github.com/z5labs/humus/kube/cmd/scaffold new -module example.com/website -group web.example.com -kind Website
//	go run github.com/z5labs/humus/kube/cmd/scaffold add -kind Blog
//	go run github.com/z5labs/humus/kube/cmd/scaffold add -kind Website -version v1beta1
//
// new writes a whole module: the resource's Go types with typed
// constraints (kube.Field), a Reconciler that reports a Ready condition,
// Init with its settings (config.Struct, kubeenv), probes and /metrics,
// main.go, the golden test of the CRD with the CRD's YAML in deploy/crds,
// a unit test of the Reconciler on client-go's fakes, a whole-App test on
// clustertest's real control plane, deploy/ manifests (a Namespace, RBAC,
// a Deployment) and a README with the commands. Its tests pass as written.
// A go.mod is written when the folder has none; one that is there is kept,
// and names the module.
//
// add writes new files only. Given a kind the module doesn't have, it
// writes that resource's types, Reconciler, tests and CRD, in the group of
// a resource the module has unless -group says; given one it
// has (one that new or add wrote, whose types are KindSpec and KindStatus)
// and another version, it writes that version's types, copied from the
// hub's, the two conversion functions and the resource's kube.Versions,
// with a round-trip test. What the files you wrote need to use them (a
// line of Init, and the command that writes deploy/rbac.yaml again) it
// prints, for you to add.
//
// Neither ever overwrites a file: when any file it would write exists, it
// writes nothing and names every one. Every bad flag is named at once,
// with its value and what is wrong with it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: flag printed the usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

const usage = `usage:
  scaffold new -group GROUP -kind KIND [-module PATH] [-version v1alpha1] [-plural PLURAL] [-scope Namespaced|Cluster] [-dir .]
  scaffold add -kind KIND [-version VERSION] [-group GROUP] [-plural PLURAL] [-scope Namespaced|Cluster] [-dir .]
`

// run runs the command args name, writing what it says to stdout and
// flag's complaints to stderr.
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("scaffold: a command, new or add, is needed\n%s", usage)
	}
	switch args[0] {
	case "new":
		return runNew(args[1:], stdout, stderr)
	case "add":
		return runAdd(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		_, err := io.WriteString(stdout, usage)
		return err
	default:
		return fmt.Errorf("scaffold: unknown command %q: want new or add\n%s", args[0], usage)
	}
}
