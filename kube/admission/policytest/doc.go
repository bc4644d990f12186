// Package policytest checks admission policies, such as the ones
// admission.Policy.Objects returns, as the API server does when they are
// created and as it runs them, so that a test refuses what the API server
// would refuse or fail on: a CEL expression that doesn't compile, one
// that doesn't type-check against the schema of the resource it matches,
// and one whose estimated cost exceeds the API server's limit for one
// expression, which it enforces only as it evaluates the expression on a
// write, failing the write (or letting it through, under failurePolicy
// Ignore). A webhook configuration's match conditions are compiled too.
//
// A golden test of a Policy calls Validate beside its comparison:
//
//	crd, err := app.Website.CRD()
//	...
//	objs, err := websitePolicy.Objects()
//	...
//	if err := policytest.Validate(crd, objs...); err != nil {
//		t.Fatal(err)
//	}
//
// The policies of a kube.Kind, such as Kubernetes' Deployments, which has
// no CRD, are checked by ValidateKind, against the schema reflected from
// the Kind's Go type.
//
// It is a package of its own, for tests, as kube/crdtest is: the API
// server's CEL compiler and admission code are about 10 MB of a binary,
// with their package-level state, which a controller doesn't need.
package policytest
