package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/z5labs/humus/kube"
)

// Policy is admission the API server runs itself, with no webhook: the
// Validations of a resource's objects, as a ValidatingAdmissionPolicy and
// its binding, and their Defaults, as a MutatingAdmissionPolicy and its
// binding, each rule a CEL expression, its fields named by pointer.
// PolicyFor makes one; Objects returns what deploys it, and package
// kube/admission/policytest checks it as the API server would.
type Policy struct {
	settings PolicySettings
	target   target
	rules    []Rule
	base     unsafe.Pointer // the object the rules' fields are of
	root     reflect.Type
	err      error
}

// PolicySettings are what a Policy matches and how it fails.
type PolicySettings struct {
	// Name is the policies' and bindings' name: a DNS subdomain. Default
	// "<plural>.<group>", with the group "core" for Kubernetes' core kinds,
	// such as websites.example.com.
	Name string

	// Operations are the writes the policies check. Default Create and
	// Update; Delete has no object to check or default (the object before
	// it is oldObject).
	Operations []Operation

	// FailurePolicy is what the API server does with a write when a rule
	// fails to evaluate, such as one over its cost budget or one selecting
	// a field the object lacks without has(): Fail, the default, refuses
	// it; Ignore lets it through.
	FailurePolicy admissionregistrationv1.FailurePolicyType

	// MatchConditions are CEL expressions that must all be true for the
	// policies to apply, as Settings' are. Default none.
	MatchConditions []admissionregistrationv1.MatchCondition

	// NamespaceSelector and ObjectSelector limit the policies to objects in
	// namespaces whose labels match, and to objects whose labels match.
	// Default nil: every one.
	NamespaceSelector, ObjectSelector *metav1.LabelSelector

	// ValidationActions are what the binding does with a Validation that
	// fails: Deny, the default, refuses the write; Warn shows the client a
	// warning; Audit records it in the audit log. Deny and Warn don't go
	// together.
	ValidationActions []admissionregistrationv1.ValidationAction
}

// Rule is a Validation or a Default.
type Rule interface{ rule() }

// ValidationRule is a Validation: a Rule, whose refusal's message a CEL
// expression may compute (MessageExpression).
type ValidationRule struct {
	expression, message string
	fields              []Ref
	messageExpression   string
	messageFields       []Ref
	reason              metav1.StatusReason
}

func (ValidationRule) rule() {}

// Validation is a rule the object must keep: a CEL expression, true for
// an object the API server stores, with message as the refusal's, such as
//
//	admission.Validation("%s <= 3", "replicas must be 3 or less", admission.Field(&w.Spec.Replicas))
//
// Each %s in expression is the next of fields, as the expression selects
// it (object.spec.replicas); %% is CEL's modulo. The expression sees
// object, oldObject (null on a create), request, namespaceObject,
// authorizer and the Policy's variables (Variable), as the API server
// declares them. The refusal is Invalid (422), its message message, or
// the one MessageExpression computes.
func Validation(expression, message string, fields ...Ref) ValidationRule {
	return ValidationRule{expression: expression, message: message, fields: fields, reason: metav1.StatusReasonInvalid}
}

// MessageExpression returns v with its refusal's message computed by a CEL
// expression of type string, with fields as Validation's, such as
//
//	admission.Validation("%s <= 3", "replicas must be 3 or less", admission.Field(&w.Spec.Replicas)).
//		MessageExpression("'replicas must be 3 or less, not ' + string(%s)", admission.Field(&w.Spec.Replicas))
//
// It sees what the Validation's expression sees, but authorizer. Where it
// fails to evaluate, or gives an empty string or one with a line break,
// the API server refuses with the Validation's message instead.
func (v ValidationRule) MessageExpression(expression string, fields ...Ref) ValidationRule {
	v.messageExpression, v.messageFields = expression, fields
	return v
}

// variableRule is a Variable.
type variableRule struct {
	name, expression string
	fields           []Ref
}

func (variableRule) rule() {}

// Variable is a named CEL expression of the Policy's objects, which its
// Validations' expressions and message expressions read as
// variables.<name>, evaluated at most once a write, such as
//
//	admission.Variable("hosts", "%s.map(r, r.host)", admission.Field(&w.Spec.Routes)),
//	admission.Validation("variables.hosts.all(h, h.endsWith('.example.com'))", "hosts must be of example.com"),
//
// Each %s in expression is the next of fields, as Validation's. A
// variable reads the variables declared before it. name is a CEL
// identifier, unique in the Policy. The Variables are the
// ValidatingAdmissionPolicy's spec.variables, in their order.
func Variable(name, expression string, fields ...Ref) Rule {
	return variableRule{name: name, expression: expression, fields: fields}
}

// defaultRule is a Default.
type defaultRule struct {
	field Ref
	value any
}

func (defaultRule) rule() {}

// Default sets the field f to v on a create or an update of an object that
// lacks it, as a MutatingAdmissionPolicy's JSON patch, adding what it
// lacks above it too: an object whose field is set, to anything, is left
// as it is. v is encoded by encoding/json.
func Default[V any](f FieldOf[V], v V) Rule {
	return defaultRule{field: f, value: v}
}

// PolicyFor is a Policy of r's objects, whose rules name the fields of
// obj, a value of r's object type that only names them:
//
//	var w app.WebsiteObject
//	admission.PolicyFor(app.Website, &w, admission.PolicySettings{},
//		admission.Validation("%s <= 3", "replicas must be 3 or less", admission.Field(&w.Spec.Replicas)),
//		admission.Default(admission.Field(&w.Spec.Port), 8080),
//	)
//
// r is a kube.Resource or a kube.Kind, as Validating's. What is wrong is
// an error of Objects.
func PolicyFor[T any](r kube.ResourceOf[T], obj *T, s PolicySettings, rules ...Rule) Policy {
	p := Policy{settings: s, rules: rules, base: unsafe.Pointer(obj), root: reflect.TypeFor[T]()}
	p.target, p.err = targetOf(r)
	if obj == nil {
		p.err = errors.Join(p.err, errors.New("the object the rules' fields are of is nil"))
	}
	return p
}

// name is Settings.Name, or its default.
func (p Policy) name() string {
	if p.settings.Name != "" {
		return p.settings.Name
	}
	group := p.target.gvr.Group
	if group == "" {
		group = "core"
	}
	return p.target.gvr.Resource + "." + group
}

// Objects returns what deploys p: a ValidatingAdmissionPolicy and its
// ValidatingAdmissionPolicyBinding when it has Validations, a
// MutatingAdmissionPolicy and its MutatingAdmissionPolicyBinding when it
// has Defaults, all of admissionregistration.k8s.io/v1, each as the API
// server holds it once created, its defaults written out, for Marshal.
// Each policy matches the resource's group, version, plural and scope at
// its Operations, with matchPolicy Equivalent; each binding binds its
// policy to every object it matches, the validating one with
// ValidationActions.
//
// It returns every mistake at once: the resource's, a Name that isn't a
// DNS subdomain, an Operation, FailurePolicy, ValidationAction or match
// condition the API server refuses, a Policy without rules, and a Field
// that isn't a field of the object PolicyFor was given, or whose count
// doesn't match its expression's. It doesn't compile CEL: policytest.Validate
// does, with the API server's own compiler.
func (p Policy) Objects() ([]runtime.Object, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("admission: Policy %s: "+format, append([]any{p.name()}, args...)...))
	}
	if p.err != nil {
		bad("%w", p.err)
	}
	if p.settings.Name != "" {
		if msgs := validation.IsDNS1123Subdomain(p.settings.Name); len(msgs) > 0 {
			bad("Name %q: %s", p.settings.Name, strings.Join(msgs, "; "))
		}
	}
	errs = append(errs, matchErrs("admission: Policy "+p.name()+": PolicySettings.", p.settings.Operations, false, p.settings.FailurePolicy, p.settings.MatchConditions)...)
	actions := map[admissionregistrationv1.ValidationAction]bool{}
	for _, a := range p.settings.ValidationActions {
		switch {
		case a != admissionregistrationv1.Deny && a != admissionregistrationv1.Warn && a != admissionregistrationv1.Audit:
			bad("PolicySettings.ValidationActions: %q is none of Deny, Warn and Audit", a)
		case actions[a]:
			bad("PolicySettings.ValidationActions: %s is given twice", a)
		}
		actions[a] = true
	}
	if actions[admissionregistrationv1.Deny] && actions[admissionregistrationv1.Warn] {
		bad("PolicySettings.ValidationActions: Deny and Warn don't go together: a refused write's client is shown the refusal")
	}
	if len(p.rules) == 0 {
		bad("no rules: give a Validation or a Default")
	}
	if slices.Contains(p.settings.Operations, Delete) && slices.ContainsFunc(p.rules, func(r Rule) bool { _, ok := r.(defaultRule); return ok }) {
		bad("PolicySettings.Operations: a Default isn't applied on DELETE: there is no object to default, and the API server takes a MutatingAdmissionPolicy of CREATE and UPDATE alone")
	}
	var validations []admissionregistrationv1.Validation
	var mutations []admissionregistrationv1.Mutation
	var variables []admissionregistrationv1.Variable
	names := map[string]bool{}
	for i, r := range p.rules {
		switch r := r.(type) {
		case variableRule:
			v, err := p.variable(r, names)
			if err != nil {
				bad("rules[%d]: %w", i, err)
				continue
			}
			variables = append(variables, v)
		case ValidationRule:
			v, err := p.validation(r)
			if err != nil {
				bad("rules[%d]: %w", i, err)
				continue
			}
			validations = append(validations, v)
		case defaultRule:
			m, err := p.mutation(r)
			if err != nil {
				bad("rules[%d]: %w", i, err)
				continue
			}
			mutations = append(mutations, m)
		default:
			bad("rules[%d]: a %T, not a Validation, a Variable or a Default", i, r)
		}
	}
	if len(variables) > 0 && !slices.ContainsFunc(p.rules, func(r Rule) bool { _, ok := r.(ValidationRule); return ok }) {
		bad("Variables without a Validation: only Validations read them")
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p.objects(variables, validations, mutations), nil
}

// expression is expression with each %s the next of fields, as CEL
// selects it from object.
func (p Policy) expression(expression string, fields []Ref) (string, error) {
	args := make([]any, len(fields))
	for i, f := range fields {
		if f == nil {
			return "", fmt.Errorf("fields[%d] is nil", i)
		}
		names, err := f.path(p.base, p.root)
		if err != nil {
			return "", fmt.Errorf("fields[%d]: %w", i, err)
		}
		if args[i], err = celPath(names); err != nil {
			return "", fmt.Errorf("fields[%d]: %w", i, err)
		}
	}
	expr := fmt.Sprintf(expression, args...)
	if strings.Contains(expr, "%!") {
		return "", fmt.Errorf("the expression %q names %d fields, and its verbs don't match: %s", expression, len(fields), expr)
	}
	return expr, nil
}

// variable is r as the policy's variable, its name one of names no more.
func (p Policy) variable(r variableRule, names map[string]bool) (admissionregistrationv1.Variable, error) {
	if !celName(r.name) {
		return admissionregistrationv1.Variable{}, fmt.Errorf("the Variable %q: its name should be a CEL identifier (letters, digits and _, not first a digit)", r.name)
	}
	if names[r.name] {
		return admissionregistrationv1.Variable{}, fmt.Errorf("the Variable %q is declared twice", r.name)
	}
	names[r.name] = true
	if strings.TrimSpace(r.expression) == "" {
		return admissionregistrationv1.Variable{}, fmt.Errorf("the Variable %s without an expression", r.name)
	}
	expr, err := p.expression(r.expression, r.fields)
	if err != nil {
		return admissionregistrationv1.Variable{}, fmt.Errorf("the Variable %s: %w", r.name, err)
	}
	return admissionregistrationv1.Variable{Name: r.name, Expression: expr}, nil
}

// validation is r as the policy's validation.
func (p Policy) validation(r ValidationRule) (admissionregistrationv1.Validation, error) {
	if strings.TrimSpace(r.expression) == "" {
		return admissionregistrationv1.Validation{}, errors.New("a Validation without an expression")
	}
	expr, err := p.expression(r.expression, r.fields)
	if err != nil {
		return admissionregistrationv1.Validation{}, err
	}
	v := admissionregistrationv1.Validation{Expression: expr, Message: r.message, Reason: &r.reason}
	if r.messageExpression != "" || len(r.messageFields) > 0 {
		if strings.TrimSpace(r.messageExpression) == "" {
			return admissionregistrationv1.Validation{}, errors.New("a Validation's MessageExpression without an expression")
		}
		if v.MessageExpression, err = p.expression(r.messageExpression, r.messageFields); err != nil {
			return admissionregistrationv1.Validation{}, fmt.Errorf("a Validation's MessageExpression: %w", err)
		}
	}
	return v, nil
}

// mutation is r as the policy's mutation: a JSON patch adding the field,
// or the first of its parents the object lacks, unless the field is set.
func (p Policy) mutation(r defaultRule) (admissionregistrationv1.Mutation, error) {
	if r.field == nil {
		return admissionregistrationv1.Mutation{}, errors.New("a Default of a nil field")
	}
	names, err := r.field.path(p.base, p.root)
	if err != nil {
		return admissionregistrationv1.Mutation{}, err
	}
	value, err := json.Marshal(r.value)
	if err != nil {
		return admissionregistrationv1.Mutation{}, fmt.Errorf("the Default %v: %w", r.value, err)
	}
	// From the field up: has(object.a.b.c) ? [] : has(object.a.b) ? [add
	// c] : has(object.a) ? [add b: {c}] : [add a: {b: {c}}].
	expr := "[]"
	v := string(value)
	for i := len(names); i >= 1; i-- {
		sel, err := celPath(names[:i])
		if err != nil {
			return admissionregistrationv1.Mutation{}, err
		}
		ptr := ""
		for _, n := range names[:i] {
			ptr += "/" + escape(n)
		}
		quoted, _ := json.Marshal(ptr)
		add := fmt.Sprintf("[JSONPatch{op: \"add\", path: %s, value: %s}]", quoted, v)
		if i == len(names) {
			expr = fmt.Sprintf("has(%s) ? [] : %s", sel, add)
		} else {
			expr = fmt.Sprintf("has(%s) ? (%s) : %s", sel, expr, add)
		}
		key, _ := json.Marshal(names[i-1])
		v = fmt.Sprintf("{%s: %s}", key, v)
	}
	return admissionregistrationv1.Mutation{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expr},
	}, nil
}

// objects are the policies and bindings of validations and mutations.
func (p Policy) objects(variables []admissionregistrationv1.Variable, validations []admissionregistrationv1.Validation, mutations []admissionregistrationv1.Mutation) []runtime.Object {
	name := p.name()
	fp := admissionregistrationv1.Fail
	if p.settings.FailurePolicy != "" {
		fp = p.settings.FailurePolicy
	}
	var ops []admissionregistrationv1.OperationType
	for _, op := range (Webhook{settings: Settings{Operations: p.settings.Operations}}).operations() {
		ops = append(ops, admissionregistrationv1.OperationType(op))
	}
	scope := admissionregistrationv1.ScopeType(p.target.scope)
	equivalent := admissionregistrationv1.Equivalent
	match := func() *admissionregistrationv1.MatchResources {
		return &admissionregistrationv1.MatchResources{
			NamespaceSelector: orEmpty(p.settings.NamespaceSelector),
			ObjectSelector:    orEmpty(p.settings.ObjectSelector),
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: ops,
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{p.target.gvr.Group}, APIVersions: []string{p.target.gvr.Version},
					Resources: []string{p.target.gvr.Resource}, Scope: &scope,
				},
			}}},
			MatchPolicy: &equivalent,
		}
	}
	typeMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: kind}
	}
	var out []runtime.Object
	if len(validations) > 0 {
		actions := p.settings.ValidationActions
		if len(actions) == 0 {
			actions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
		}
		out = append(out,
			&admissionregistrationv1.ValidatingAdmissionPolicy{
				TypeMeta: typeMeta("ValidatingAdmissionPolicy"), ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
					MatchConstraints: match(), Validations: validations, Variables: variables, FailurePolicy: &fp,
					MatchConditions: append([]admissionregistrationv1.MatchCondition(nil), p.settings.MatchConditions...),
				},
			},
			&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
				TypeMeta: typeMeta("ValidatingAdmissionPolicyBinding"), ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: append([]admissionregistrationv1.ValidationAction(nil), actions...)},
			})
	}
	if len(mutations) > 0 {
		out = append(out,
			&admissionregistrationv1.MutatingAdmissionPolicy{
				TypeMeta: typeMeta("MutatingAdmissionPolicy"), ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
					MatchConstraints: match(), Mutations: mutations, FailurePolicy: &fp,
					MatchConditions:    append([]admissionregistrationv1.MatchCondition(nil), p.settings.MatchConditions...),
					ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				},
			},
			&admissionregistrationv1.MutatingAdmissionPolicyBinding{
				TypeMeta: typeMeta("MutatingAdmissionPolicyBinding"), ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
			})
	}
	return out
}

func orEmpty(s *metav1.LabelSelector) *metav1.LabelSelector {
	if s == nil {
		return &metav1.LabelSelector{}
	}
	return s.DeepCopy()
}
