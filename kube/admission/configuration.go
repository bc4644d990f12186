package admission

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/internal/webhooks"
)

// Webhooks are an App's admission webhooks: served by one Handler, and
// declared to the API server by the configurations that Validating and
// Mutating reflect from them.
//
//	hooks := admission.Webhooks{
//		Name:     "website-operator",
//		Endpoint: admission.Endpoint{Service: &kube.ServiceReference{Namespace: "website-system", Name: "webhook", Path: "/admission"}},
//		Hooks: []admission.Webhook{
//			admission.Validating(app.Website, admission.Settings{}, validateWebsite),
//			admission.Defaulting(app.Website, admission.Settings{}, defaultWebsite),
//		},
//	}
type Webhooks struct {
	// Name is the configurations' name: a DNS subdomain, such as
	// website-operator. Required by Validating and Mutating.
	Name string

	// Endpoint is where the API server reaches Handler. Required by
	// Validating and Mutating.
	Endpoint Endpoint

	// Hooks are the webhooks, each made by Validating or Defaulting, each
	// with a name of its own.
	Hooks []Webhook
}

// Endpoint is where the API server reaches the webhooks' Handler: by URL,
// or by a Service of the cluster, with the CA that signs its serving
// certificate. Each webhook is at the Endpoint's path, a slash and its
// name: Path "/admission" serves validate.websites.example.com at
// /admission/validate.websites.example.com.
type Endpoint struct {
	// URL is the Handler's https:// URL, without a user, a query or a
	// fragment, such as https://website-operator.example.com/admission.
	// One of URL and Service is required, the other left out.
	URL string

	// Service is the Service in front of the Handler, for one in the
	// cluster. Its Path is the Handler's (default /), its Port default 443.
	Service *kube.ServiceReference

	// CABundle is the PEM certificates of the CA that signs the webhook's
	// serving certificate. Default none: the API server trusts the
	// system's roots, or cert-manager's CA injector fills it in on the
	// cluster's configurations (see the package doc).
	CABundle []byte
}

// Validating returns the ValidatingWebhookConfiguration of the webhooks
// that Validating made, named Name, reaching each at Endpoint: nil when
// there are none. Each webhook's entry is what the API server holds once
// it is created, its defaults written out: a rule of the resource's group,
// version and plural, its Settings.Operations and its scope, with no
// subresources (a write of the status isn't reviewed); matchPolicy
// Equivalent, so a write at another version of the resource is reviewed
// at the webhook's, converted; admissionReviewVersions v1; its
// failurePolicy, timeoutSeconds, sideEffects, matchConditions and
// selectors (an empty selector, matching everything, where none is
// given).
//
// It returns every mistake at once: Handler's, a Name that isn't a DNS
// subdomain, and an Endpoint without one of URL and Service, with both,
// with a URL that isn't https or has a user, a query or a fragment, with a
// Service missing its namespace or name, or with a CABundle that holds no
// PEM certificate. Marshal writes it as YAML.
func (w Webhooks) Validating() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	if errs := w.errs(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []admissionregistrationv1.ValidatingWebhook
	for _, h := range w.Hooks {
		if h.mutating {
			continue
		}
		e := w.entry(h)
		out = append(out, admissionregistrationv1.ValidatingWebhook{
			Name: e.name, ClientConfig: e.client, Rules: e.rules, FailurePolicy: e.failurePolicy, MatchPolicy: e.matchPolicy,
			NamespaceSelector: e.namespaceSelector, ObjectSelector: e.objectSelector, SideEffects: e.sideEffects,
			TimeoutSeconds: e.timeout, AdmissionReviewVersions: []string{"v1"}, MatchConditions: e.matchConditions,
		})
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Webhooks:   out,
	}, nil
}

// Mutating returns the MutatingWebhookConfiguration of the webhooks that
// Defaulting made, as Validating does for its own, each with
// reinvocationPolicy Never: nil when there are none.
func (w Webhooks) Mutating() (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	if errs := w.errs(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []admissionregistrationv1.MutatingWebhook
	never := admissionregistrationv1.NeverReinvocationPolicy
	for _, h := range w.Hooks {
		if !h.mutating {
			continue
		}
		e := w.entry(h)
		out = append(out, admissionregistrationv1.MutatingWebhook{
			Name: e.name, ClientConfig: e.client, Rules: e.rules, FailurePolicy: e.failurePolicy, MatchPolicy: e.matchPolicy,
			NamespaceSelector: e.namespaceSelector, ObjectSelector: e.objectSelector, SideEffects: e.sideEffects,
			TimeoutSeconds: e.timeout, AdmissionReviewVersions: []string{"v1"}, MatchConditions: e.matchConditions,
			ReinvocationPolicy: &never,
		})
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: w.Name},
		Webhooks:   out,
	}, nil
}

// entry is what a webhook's entry in either configuration holds.
type entry struct {
	name                              string
	client                            admissionregistrationv1.WebhookClientConfig
	rules                             []admissionregistrationv1.RuleWithOperations
	failurePolicy                     *admissionregistrationv1.FailurePolicyType
	matchPolicy                       *admissionregistrationv1.MatchPolicyType
	namespaceSelector, objectSelector *metav1.LabelSelector
	sideEffects                       *admissionregistrationv1.SideEffectClass
	timeout                           *int32
	matchConditions                   []admissionregistrationv1.MatchCondition
}

func (w Webhooks) entry(h Webhook) entry {
	e := entry{name: h.name()}
	e.client.CABundle = slices.Clone(w.Endpoint.CABundle)
	if w.Endpoint.URL != "" {
		u := strings.TrimSuffix(w.Endpoint.URL, "/") + "/" + e.name
		e.client.URL = &u
	} else {
		s := w.Endpoint.Service
		p := strings.TrimSuffix(s.Path, "/") + "/" + e.name
		port := cmp.Or(s.Port, 443)
		e.client.Service = &admissionregistrationv1.ServiceReference{Namespace: s.Namespace, Name: s.Name, Path: &p, Port: &port}
	}
	var ops []admissionregistrationv1.OperationType
	for _, op := range h.operations() {
		ops = append(ops, admissionregistrationv1.OperationType(op))
	}
	scope := admissionregistrationv1.ScopeType(h.target.scope)
	e.rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{h.target.gvr.Group},
			APIVersions: []string{h.target.gvr.Version},
			Resources:   []string{h.target.gvr.Resource},
			Scope:       &scope,
		},
	}}
	fp := h.failurePolicy()
	e.failurePolicy = &fp
	mp := admissionregistrationv1.Equivalent
	e.matchPolicy = &mp
	e.namespaceSelector = cmp.Or(h.settings.NamespaceSelector, &metav1.LabelSelector{}).DeepCopy()
	e.objectSelector = cmp.Or(h.settings.ObjectSelector, &metav1.LabelSelector{}).DeepCopy()
	se := admissionregistrationv1.SideEffectClassNone
	if h.settings.SideEffects {
		se = admissionregistrationv1.SideEffectClassNoneOnDryRun
	}
	e.sideEffects = &se
	secs := int32(h.timeout() / time.Second)
	e.timeout = &secs
	e.matchConditions = slices.Clone(h.settings.MatchConditions)
	return e
}

// errs is every mistake in w, the configurations' included.
func (w Webhooks) errs() []error {
	errs := w.hookErrs()
	if w.Name == "" {
		errs = append(errs, errors.New("admission: Webhooks.Name is required: the configurations' name"))
	} else if msgs := validation.IsDNS1123Subdomain(w.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("admission: Webhooks.Name %q: %s", w.Name, strings.Join(msgs, "; ")))
	}
	return append(errs, w.Endpoint.errs()...)
}

// hookErrs is every mistake in w's Hooks.
func (w Webhooks) hookErrs() []error {
	var errs []error
	if len(w.Hooks) == 0 {
		errs = append(errs, errors.New("admission: Webhooks.Hooks is empty: give a webhook made by Validating or Defaulting"))
	}
	names := map[string]int{}
	for i, h := range w.Hooks {
		where := fmt.Sprintf("admission: Webhooks.Hooks[%d]", i)
		if h.review == nil && h.err == nil {
			errs = append(errs, fmt.Errorf("%s: a Webhook made without Validating or Defaulting", where))
			continue
		}
		name := h.name()
		where += " (" + name + ")"
		if h.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, h.err))
		}
		if j, ok := names[name]; ok {
			errs = append(errs, fmt.Errorf("%s: the name is Hooks[%d]'s too: give each webhook a name of its own (Settings.Name)", where, j))
		} else {
			names[name] = i
		}
		errs = append(errs, h.settingsErrs(where)...)
	}
	return errs
}

// settingsErrs is every mistake in h's Settings.
func (h Webhook) settingsErrs(where string) []error {
	var errs []error
	s := h.settings
	if s.Name != "" {
		for _, e := range validation.IsFullyQualifiedName(nil, s.Name) {
			errs = append(errs, fmt.Errorf("%s: Settings.Name %q: %s", where, s.Name, e.Detail))
		}
	} else if msgs := validation.IsDNS1123Subdomain(h.name()); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("%s: Settings.Name: the default %q isn't a DNS subdomain (%s): give one", where, h.name(), strings.Join(msgs, "; ")))
	}
	if s.Timeout != 0 && (s.Timeout < time.Second || s.Timeout > 30*time.Second || s.Timeout%time.Second != 0) {
		errs = append(errs, fmt.Errorf("%s: Settings.Timeout %s: should be whole seconds, 1s to 30s, the API server's bounds", where, s.Timeout))
	}
	return append(errs, matchErrs(where+": Settings.", s.Operations, h.mutating, s.FailurePolicy, s.MatchConditions)...)
}

// matchErrs is every mistake in what a webhook or a policy matches and
// how it fails, each after prefix.
func matchErrs(prefix string, operations []Operation, mutating bool, fp admissionregistrationv1.FailurePolicyType, conditions []admissionregistrationv1.MatchCondition) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(prefix+format, args...)) }
	seen := map[Operation]bool{}
	for _, op := range operations {
		switch {
		case op != Create && op != Update && op != Delete:
			bad("Operations: %q is none of CREATE, UPDATE and DELETE", op)
		case op == Delete && mutating:
			bad("Operations: a defaulting webhook isn't called on DELETE: there is no object to default")
		case seen[op]:
			bad("Operations: %s is given twice", op)
		}
		seen[op] = true
	}
	if fp != "" && fp != admissionregistrationv1.Fail && fp != admissionregistrationv1.Ignore {
		bad("FailurePolicy %q is neither Fail nor Ignore", fp)
	}
	if len(conditions) > 64 {
		bad("MatchConditions: %d of them, and the API server takes 64 at most", len(conditions))
	}
	names := map[string]bool{}
	for i, c := range conditions {
		if msgs := validation.IsQualifiedName(c.Name); len(msgs) > 0 {
			bad("MatchConditions[%d].Name %q: %s", i, c.Name, strings.Join(msgs, "; "))
		}
		if names[c.Name] {
			bad("MatchConditions[%d].Name %q is given twice", i, c.Name)
		}
		names[c.Name] = true
		if strings.TrimSpace(c.Expression) == "" {
			bad("MatchConditions[%d] (%s): Expression is required: a CEL expression", i, c.Name)
		}
	}
	return errs
}

// errs returns every mistake in e.
func (e Endpoint) errs() []error {
	h := webhooks.Endpoint{URL: e.URL, Service: (*webhooks.Service)(e.Service), CABundle: e.CABundle}
	return h.Errs("admission: Webhooks.Endpoint: ", "where the API server reaches the webhooks")
}

// Marshal returns objs, such as the configurations and the policies of
// this package, as the YAML file that deploys them: each
// sigs.k8s.io/yaml's encoding, keys sorted, without a status or a null
// creationTimestamp, which are the API server's to write, separated by
// "---" lines. A nil object is left out.
func Marshal(objs ...runtime.Object) ([]byte, error) {
	var out []byte
	for i, o := range objs {
		if o == nil || isNil(o) {
			continue
		}
		b, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("admission: Marshal: objs[%d], a %T: %w", i, o, err)
		}
		var fields map[string]any
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, fmt.Errorf("admission: Marshal: objs[%d], a %T: %w", i, o, err)
		}
		delete(fields, "status")
		if m, ok := fields["metadata"].(map[string]any); ok && m["creationTimestamp"] == nil {
			delete(m, "creationTimestamp")
		}
		if b, err = json.Marshal(fields); err != nil {
			return nil, fmt.Errorf("admission: Marshal: objs[%d], a %T: %w", i, o, err)
		}
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return nil, fmt.Errorf("admission: Marshal: objs[%d], a %T: %w", i, o, err)
		}
		if len(out) > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, y...)
	}
	return out, nil
}

// isNil is whether o is a nil pointer in an interface.
func isNil(o runtime.Object) bool {
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
