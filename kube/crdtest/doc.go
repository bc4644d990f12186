// Package crdtest checks a CustomResourceDefinition, such as the one
// kube.Resource.CRD returns, as the API server does when it is created, so
// that a test refuses what the API server would: above all a CEL rule
// whose estimated cost exceeds the budget, which only the API server's
// own estimator can tell, and which it reports only when the CRD is
// applied.
//
// A golden test of the CRD calls Validate beside its comparison:
//
//	crd, err := app.Mirror.CRD()
//	if err != nil {
//		t.Fatal(err)
//	}
//	if err := crdtest.Validate(crd); err != nil {
//		t.Fatal(err)
//	}
//
// It is a package of its own, for tests, because the API server's
// validation brings CEL's compiler and much of k8s.io/apiserver with it
// (about 10 MB of a binary, with their package-level state: the API
// server's default feature gates, and the Prometheus registry its CEL
// metrics are recorded in), which a controller's binary, which imports
// kube, doesn't need: kube.Resource.CRD checks what it can without them,
// and this package the rest.
package crdtest
