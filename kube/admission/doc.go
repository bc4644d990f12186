// Package admission checks and defaults the writes of a kube.Resource's
// objects, or of a kube.Kind's such as Kubernetes' own: with Go functions
// served as admission webhooks, whose configurations it reflects from the
// same code, or with admission policies, CEL rules the API server runs
// itself, declared in Go beside the Resource.
//
// A CRD's schema and its CEL rules check one object by itself. A webhook
// is for what they can't: a rule that depends on who asks or on the
// operation, on other objects, or on state outside the cluster; defaults
// computed from other fields; warnings. Where a rule needs none of that,
// a ValidatingAdmissionPolicy or MutatingAdmissionPolicy, which the API
// server runs itself, has no webhook to keep up (see docs/admission.md).
//
// What the package promises:
//
//   - A ValidateFunc is handed the object before the write and the object
//     the write would store, decoded into the resource's Go type, with the
//     operation, the requester and whether it is a dry run; it returns
//     warnings, which the client shows, and an error, which refuses the
//     write. Field errors (k8s.io/apimachinery/pkg/util/validation/field)
//     refuse it as Invalid, each path and message shown as the API server
//     shows a schema error's.
//   - A DefaultFunc changes the object; the JSON patch the API server is
//     answered with is computed from the change, applied to the object as
//     it was sent, so fields the Go type doesn't know are kept.
//   - A panic, in a function or in decoding or encoding an object, refuses
//     that write, naming it, and is recorded with its stack; the process
//     goes on. An object that doesn't decode into the Go type refuses the
//     write, naming the field.
//   - A review is read whole up to MaxReviewBytes, 16 MiB, and no further:
//     what a review allocates is a bounded multiple of its body, measured
//     at 4 times for a validation and 7 for a defaulting, whose patch is
//     computed from one decoding of the object as sent and two readings
//     of the Go value, before and after the function
//     (BenchmarkAdmissionReviewLarge, kube/BENCHMARKS.md).
//   - The Validating and MutatingWebhookConfiguration are reflected from
//     the declaration, as kube reflects a CRD, so a golden test keeps the
//     YAML that deploys them in step with the code; every mistake in the
//     declaration is one error, each naming the value.
//   - A Policy's Validations and Defaults are emitted as a
//     ValidatingAdmissionPolicy and a MutatingAdmissionPolicy of
//     admissionregistration.k8s.io/v1, with their bindings, which the API
//     server runs itself; their fields are named by pointer (Field), so a
//     misspelled field doesn't compile, and package
//     kube/admission/policytest checks them in a test with the API
//     server's own CEL compiler, the CRD's types (or, for a Kind, its Go
//     type's) and the cost estimate. A Policy's Variables and a
//     Validation's MessageExpression name fields the same way.
//
// One Handler serves every webhook of an App, beside the conversion
// webhook, on the core's webhook.Service:
//
//	hooks := admission.Webhooks{
//		Name:     "website-operator",
//		Endpoint: admission.Endpoint{Service: &kube.ServiceReference{Namespace: "website-system", Name: "webhook", Path: "/admission"}},
//		Hooks: []admission.Webhook{
//			admission.Validating(app.Website, admission.Settings{}, validateWebsite),
//			admission.Defaulting(app.Website, admission.Settings{}, defaultWebsite),
//		},
//	}
//	h, err := hooks.Handler(s.Telemetry)
//	...
//	mux.Handle("POST /admission/", h)
//
// # Failure policy
//
// A webhook's FailurePolicy says what the API server does with a write
// when the webhook doesn't answer: Fail, the default, refuses it, so
// nothing unchecked is stored, and every write of the resource fails
// while no replica answers (run two, and order the webhook before the
// controllers that write, with webhook.Service's Before); Ignore stores
// it unchecked, so writes go on while the webhook is down, and what it
// would have refused is stored. A refusal the webhook answers refuses the
// write under either.
//
// # The CA bundle
//
// The API server trusts the webhook's serving certificate by the
// configuration's caBundle. With cert-manager, leave Endpoint.CABundle
// empty and annotate the configurations with
// cert-manager.io/inject-ca-from: <namespace>/<certificate>, as for the
// CRD's conversion webhook (docs/webhooks.md): its CA injector writes
// the bundle, and writes it again when the CA is renewed.
package admission
