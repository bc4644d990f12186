package policytest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/mutation"

	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/internal/crd"
)

// Validate checks objs, ValidatingAdmissionPolicies and
// MutatingAdmissionPolicies of admissionregistration.k8s.io/v1 and their
// bindings, and the match conditions of Validating and
// MutatingWebhookConfigurations, as the API server does: each CEL expression compiled with the
// API server's own compiler and environment, as it compiles them when a
// policy is created. Where crd, which may be nil, is the CRD of a
// resource a policy matches, each expression is also compiled against the
// CRD's schema, as object and oldObject, which the API server only warns
// of (in the policy's status.typeChecking) and fails on at a write, and
// its cost estimated, as the API server's estimator does, against the
// limit the API server stops one expression at, celconfig.PerCallLimit.
// An expression over that limit is said with the bounds that bring it
// under it: for each list, map or string it reaches whose size the
// schema doesn't bound, the greatest maxItems, maxProperties or maxLength
// (kube's MaxItems, MaxProperties and MaxLength) under which it fits.
//
// A policy's variables are typed and costed too, each as a program of its
// own, as the API server runs it; an expression reading a variable that
// selects a field is sized by the field's bounds, and one reading any
// other variable is typed but its cost not said, the variable's size
// unknown to the estimate.
//
// It returns nil when the API server would take and run objs, and
// otherwise one error joining every mistake, each naming the policy, the
// expression's place (spec.validations[0].expression) and the expression.
// A binding is checked for the policy it names: one among objs, or, when
// objs holds none of its kind, any.
func Validate(crd *apiextensionsv1.CustomResourceDefinition, objs ...runtime.Object) error {
	return validate(crd, false, objs...)
}

// validate is Validate, of a kind's synthetic CRD when kind.
func validate(crd *apiextensionsv1.CustomResourceDefinition, kind bool, objs ...runtime.Object) error {
	var typed *objectType
	var errs []error
	if crd != nil {
		var err error
		if typed, err = newObjectType(crd); err != nil {
			errs = append(errs, err)
		} else {
			typed.kind = kind
		}
	}
	policies := map[string]bool{}
	for _, o := range objs {
		switch o := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			policies["ValidatingAdmissionPolicy/"+o.Name] = true
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			policies["MutatingAdmissionPolicy/"+o.Name] = true
		}
	}
	for i, o := range objs {
		switch o := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			errs = append(errs, validatingPolicy(o, typed)...)
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			errs = append(errs, mutatingPolicy(o, typed)...)
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			errs = append(errs, binding("ValidatingAdmissionPolicy", o.Name, o.Spec.PolicyName, policies)...)
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			errs = append(errs, binding("MutatingAdmissionPolicy", o.Name, o.Spec.PolicyName, policies)...)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for j, w := range o.Webhooks {
				errs = append(errs, matchConditions("ValidatingWebhookConfiguration "+o.Name, fmt.Sprintf("webhooks[%d]", j), w.MatchConditions)...)
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for j, w := range o.Webhooks {
				errs = append(errs, matchConditions("MutatingWebhookConfiguration "+o.Name, fmt.Sprintf("webhooks[%d]", j), w.MatchConditions)...)
			}
		case nil:
			errs = append(errs, fmt.Errorf("policytest: objs[%d] is nil", i))
		default:
			errs = append(errs, fmt.Errorf("policytest: objs[%d] is a %T, not an admission policy, binding or webhook configuration of admissionregistration.k8s.io/v1", i, o))
		}
	}
	return errors.Join(errs...)
}

// ValidateKind is Validate for the policies of k's objects, a kind with
// no CRD, such as one of Kubernetes' own: their expressions are also
// compiled against the schema of T, reflected from the Go type as
// encoding/json writes it (as kube reflects a CRD's: a metav1.Time a
// date-time string, a resource.Quantity and an intstr.IntOrString
// x-kubernetes-int-or-string, embedded structs inlined, omitempty fields
// optional), and their costs estimated as Validate estimates them given
// a CRD. Kubernetes' schemas bound no list, map or string, so the API
// server sizes each by the most a 3 MiB object could hold, and so does
// the estimate; an expression over the limit is said with the sizes of
// objects it fits, and what brings it under is reading each list fewer
// times, not a bound.
func ValidateKind[T any](k kube.Kind[T], objs ...runtime.Object) error {
	c, err := kindCRD(k)
	if err != nil {
		return err
	}
	return validate(c, true, objs...)
}

// kindCRD is a CRD of k's objects, of the schema reflected from T, for
// what Validate reads of one: the resource, the kind and the schema.
func kindCRD[T any](k kube.Kind[T]) (*apiextensionsv1.CustomResourceDefinition, error) {
	schema, err := crd.KindSchema(reflect.TypeFor[T]())
	if err != nil {
		return nil, fmt.Errorf("policytest: the schema of %s: %w", k.Kind, err)
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: k.GVR.GroupResource().String()},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: k.GVR.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: k.GVR.Resource, Kind: k.Kind},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: k.GVR.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema},
			}},
		},
	}, nil
}

// matchConditions compiles a webhook's match conditions as the API server
// does (with its stateless compiler, no params, an authorizer).
func matchConditions(config, where string, conds []admissionregistrationv1.MatchCondition) []error {
	if len(conds) == 0 {
		return nil
	}
	c := plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	var errs []error
	for i, m := range conds {
		r := c.CompileCELExpression(&matchconditions.MatchCondition{Name: m.Name, Expression: m.Expression},
			plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.NewExpressions)
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("policytest: %s: %s.matchConditions[%d].expression %q: %s", config, where, i, m.Expression, r.Error.Detail))
		}
	}
	return errs
}

func binding(kind, name, policy string, policies map[string]bool) []error {
	if policy == "" {
		return []error{fmt.Errorf("policytest: %sBinding %s: spec.policyName is required", kind, name)}
	}
	any := false
	for k := range policies {
		any = any || strings.HasPrefix(k, kind+"/")
	}
	if any && !policies[kind+"/"+policy] {
		return []error{fmt.Errorf("policytest: %sBinding %s: spec.policyName %q names no %s given", kind, name, policy, kind)}
	}
	return nil
}

// expression is one CEL expression of a policy, and how the API server
// compiles it.
type expression struct {
	where     string // such as spec.validations[0].expression
	accessor  plugincel.ExpressionAccessor
	opts      plugincel.OptionalVariableDeclarations
	stateless bool // a match condition: compiled without the variables
	// vars are the policy's variables it sees, when typed: all of them, or
	// for a variable, those declared before it.
	vars []plugincel.NamedExpressionAccessor
}

func validatingPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy, typed *objectType) []error {
	hasParams := p.Spec.ParamKind != nil
	var exprs []expression
	for i, c := range p.Spec.MatchConditions {
		exprs = append(exprs, expression{where: fmt.Sprintf("spec.matchConditions[%d].expression", i), accessor: &matchconditions.MatchCondition{Expression: c.Expression},
			opts: plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, stateless: true})
	}
	for i, v := range p.Spec.Validations {
		exprs = append(exprs, expression{where: fmt.Sprintf("spec.validations[%d].expression", i), accessor: &validating.ValidationCondition{Expression: v.Expression},
			opts: plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}})
		if v.MessageExpression != "" {
			exprs = append(exprs, expression{where: fmt.Sprintf("spec.validations[%d].messageExpression", i), accessor: &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression},
				opts: plugincel.OptionalVariableDeclarations{HasParams: hasParams}})
		}
	}
	for i, a := range p.Spec.AuditAnnotations {
		exprs = append(exprs, expression{where: fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), accessor: &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression},
			opts: plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}})
	}
	var vars []plugincel.NamedExpressionAccessor
	for _, v := range p.Spec.Variables {
		vars = append(vars, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	var errs []error
	if len(p.Spec.Validations) == 0 && len(p.Spec.AuditAnnotations) == 0 {
		errs = append(errs, fmt.Errorf("policytest: ValidatingAdmissionPolicy %s: spec.validations: none, and no auditAnnotations: the API server requires one", p.Name))
	}
	return append(errs, check("ValidatingAdmissionPolicy "+p.Name, p.Spec.MatchConstraints, vars, hasParams, exprs, typed)...)
}

func mutatingPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy, typed *objectType) []error {
	hasParams := p.Spec.ParamKind != nil
	var exprs []expression
	for i, c := range p.Spec.MatchConditions {
		exprs = append(exprs, expression{where: fmt.Sprintf("spec.matchConditions[%d].expression", i), accessor: &matchconditions.MatchCondition{Expression: c.Expression},
			opts: plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, stateless: true})
	}
	var errs []error
	for i, m := range p.Spec.Mutations {
		opts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true, HasPatchTypes: true}
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			exprs = append(exprs, expression{where: fmt.Sprintf("spec.mutations[%d].jsonPatch.expression", i), accessor: &patch.JSONPatchCondition{Expression: strings.TrimSpace(m.JSONPatch.Expression)}, opts: opts})
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			exprs = append(exprs, expression{where: fmt.Sprintf("spec.mutations[%d].applyConfiguration.expression", i), accessor: &patch.ApplyConfigurationCondition{Expression: strings.TrimSpace(m.ApplyConfiguration.Expression)}, opts: opts})
		default:
			errs = append(errs, fmt.Errorf("policytest: MutatingAdmissionPolicy %s: spec.mutations[%d]: patchType %q without its jsonPatch or applyConfiguration", p.Name, i, m.PatchType))
		}
	}
	if len(p.Spec.Mutations) == 0 {
		errs = append(errs, fmt.Errorf("policytest: MutatingAdmissionPolicy %s: spec.mutations: none, and the API server requires one", p.Name))
	}
	var vars []plugincel.NamedExpressionAccessor
	for _, v := range p.Spec.Variables {
		vars = append(vars, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	return append(errs, check("MutatingAdmissionPolicy "+p.Name, p.Spec.MatchConstraints, vars, hasParams, exprs, typed)...)
}

// check compiles a policy's expressions as the API server does, and,
// when typed is the type of the objects the policy matches, against it,
// with their costs.
func check(policy string, match *admissionregistrationv1.MatchResources, vars []plugincel.NamedExpressionAccessor, hasParams bool, exprs []expression, typed *objectType) []error {
	var errs []error
	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	composited, err := plugincel.NewCompositedCompiler(base)
	if err != nil {
		return []error{fmt.Errorf("policytest: %s: the API server's compiler: %w", policy, err)}
	}
	stateless := plugincel.NewCompiler(base)
	for i, v := range vars {
		r := composited.CompileAndStoreVariable(v, plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, environment.NewExpressions)
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("policytest: %s: spec.variables[%d].expression %q: %s", policy, i, v.GetExpression(), r.Error.Detail))
		}
	}
	for _, e := range exprs {
		var c plugincel.Compiler = composited
		if e.stateless {
			c = stateless
		}
		if r := c.CompileCELExpression(e.accessor, e.opts, environment.NewExpressions); r.Error != nil {
			errs = append(errs, fmt.Errorf("policytest: %s: %s %q: %s", policy, e.where, e.accessor.GetExpression(), r.Error.Detail))
		}
	}
	if len(errs) > 0 || typed == nil || !typed.matchedBy(match) {
		return errs // the expressions the API server refuses; or nothing to type them by
	}
	// Each variable is a program of its own, which the API server stops at
	// the limit for one expression as it does the others; they see the
	// variables before it.
	var typedExprs []expression
	for i, v := range vars {
		typedExprs = append(typedExprs, expression{where: fmt.Sprintf("spec.variables[%d].expression", i), accessor: v,
			opts: plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, vars: vars[:i]})
	}
	for _, e := range exprs {
		if !e.stateless {
			e.vars = vars
		}
		typedExprs = append(typedExprs, e)
	}
	for _, e := range typedExprs {
		if err := typed.check(e); err != nil {
			errs = append(errs, fmt.Errorf("policytest: %s: %s %q: %w", policy, e.where, e.accessor.GetExpression(), err))
		}
	}
	return errs
}

// objectType is the type of a CRD's objects, as object and oldObject.
type objectType struct {
	kind   bool // a kind's, with no CRD: ValidateKind
	crd    *apiextensionsv1.CustomResourceDefinition
	schema *apiextensions.JSONSchemaProps // the stored version's, metadata's fields given
	decl   *apiservercel.DeclType
}

func newObjectType(crd *apiextensionsv1.CustomResourceDefinition) (*objectType, error) {
	var v *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Storage || v == nil {
			v = &crd.Spec.Versions[i]
		}
	}
	if v == nil || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("policytest: the CRD %s has no version with a schema", crd.Name)
	}
	var in apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &in, nil); err != nil {
		return nil, fmt.Errorf("policytest: the CRD %s's schema: %w", crd.Name, err)
	}
	in.Properties["metadata"] = metadataSchema()
	t := &objectType{crd: crd, schema: &in}
	decl, err := declType(&in)
	if err != nil {
		return nil, fmt.Errorf("policytest: the CRD %s's schema: %w", crd.Name, err)
	}
	t.decl = decl
	return t, nil
}

func declType(s *apiextensions.JSONSchemaProps) (*apiservercel.DeclType, error) {
	structural, err := structuralschema.NewStructural(s)
	if err != nil {
		return nil, err
	}
	decl := model.SchemaDeclType(structural, true)
	if decl == nil {
		return nil, errors.New("it has no CEL type")
	}
	unescape(decl, map[*apiservercel.DeclType]bool{})
	return decl.MaybeAssignTypeName("Object"), nil
}

// unescape gives each field of t, and of the types below it, whose name
// is a CEL reserved word that the schema's CEL type escapes, as a CRD's
// rules select it (self.metadata.__namespace__), its own name too: an
// admission policy's object is its JSON, whose keys aren't escaped, so
// the API server evaluates object.metadata.namespace.
func unescape(t *apiservercel.DeclType, seen map[*apiservercel.DeclType]bool) {
	if t == nil || seen[t] {
		return
	}
	seen[t] = true
	for name, f := range t.Fields {
		if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") && len(name) > 4 {
			if raw := name[2 : len(name)-2]; !strings.Contains(raw, "__") {
				if _, taken := t.Fields[raw]; !taken {
					t.Fields[raw] = f
				}
			}
		}
		unescape(f.Type, seen)
	}
	unescape(t.ElemType, seen)
	unescape(t.KeyType, seen)
}

// metadataSchema is the schema of an object's metadata that CEL reads, as
// the API server's OpenAPI gives it: a CRD's own schema says only "type:
// object".
func metadataSchema() apiextensions.JSONSchemaProps {
	str := apiextensions.JSONSchemaProps{Type: "string"}
	strMap := apiextensions.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensions.JSONSchemaPropsOrBool{Schema: &str}}
	return apiextensions.JSONSchemaProps{Type: "object", Properties: map[string]apiextensions.JSONSchemaProps{
		"name": str, "generateName": str, "namespace": str, "uid": str, "resourceVersion": str,
		"generation":        {Type: "integer", Format: "int64"},
		"creationTimestamp": {Type: "string", Format: "date-time"},
		"deletionTimestamp": {Type: "string", Format: "date-time"},
		"labels":            strMap,
		"annotations":       strMap,
		"finalizers":        {Type: "array", Items: &apiextensions.JSONSchemaPropsOrArray{Schema: &str}},
	}}
}

// matchedBy is whether match names the CRD's resource.
func (t *objectType) matchedBy(match *admissionregistrationv1.MatchResources) bool {
	if match == nil {
		return false
	}
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range match.ResourceRules {
		if has(r.APIGroups, t.crd.Spec.Group) && has(r.Resources, t.crd.Spec.Names.Plural) {
			return true
		}
	}
	return false
}

// check compiles e against t, and estimates its cost.
func (t *objectType) check(e expression) error {
	cost, err := t.cost(t.decl, e)
	if err != nil {
		return err
	}
	if cost <= celconfig.PerCallLimit {
		return nil
	}
	if unsized := unsizedVariables(e); len(unsized) > 0 {
		// The estimate takes what it reads of them as of any size: the API
		// server's own would too, had it one, and it counts each
		// variable's cost in the variable's program, estimated by itself.
		return nil
	}
	consequence := "the API server stops it and the write fails (or, under failurePolicy Ignore, goes through unchecked)"
	if strings.HasSuffix(e.where, ".messageExpression") {
		consequence = "the API server stops it and refuses the write with the Validation's message instead"
	}
	msg := fmt.Sprintf("its estimated cost, %d, exceeds the API server's limit for one expression, %d: on a large enough object, %s", cost, celconfig.PerCallLimit, consequence)
	return errors.New(msg + t.bounds(e))
}

// reads is whether expr selects variables.<name>, not a longer name.
func reads(expr, name string) bool {
	sel := "variables." + name
	for i := strings.Index(expr, sel); i >= 0; {
		end := i + len(sel)
		if c := rune((expr + " ")[end]); c != '_' && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return true
		}
		next := strings.Index(expr[end:], sel)
		if next < 0 {
			return false
		}
		i = end + next
	}
	return false
}

// unsizedVariables are the variables e reads whose size the estimate
// doesn't know: those that don't select a field (fieldVariables).
func unsizedVariables(e expression) []string {
	fields := fieldVariables(e.vars)
	var out []string
	for _, v := range e.vars {
		if _, ok := fields[v.GetName()]; !ok && reads(e.accessor.GetExpression(), v.GetName()) {
			out = append(out, v.GetName())
		}
	}
	return out
}

// cost compiles e with object and oldObject of type decl, as the API
// server's type checking does, and returns its estimated cost's maximum.
func (t *objectType) cost(decl *apiservercel.DeclType, e expression) (uint64, error) {
	cost, _, err := t.estimate(decl, e)
	return cost, err
}

// estimate is cost, and the sizes the estimate read: the paths from the
// object's root, each item, value or key "[*]", joined by "/".
func (t *objectType) estimate(decl *apiservercel.DeclType, e expression) (uint64, map[string]bool, error) {
	env, err := typedEnv(decl, e.opts, e.vars)
	if err != nil {
		return 0, nil, fmt.Errorf("against the schema of %s, as the API server type-checks it: %w", t.crd.Name, err)
	}
	ast, issues := env.Compile(e.accessor.GetExpression())
	if issues != nil && issues.Err() != nil {
		return 0, nil, fmt.Errorf("against the schema of %s, as the API server type-checks it (it warns in the policy's status.typeChecking, and the expression fails at a write): %w", t.crd.Name, issues.Err())
	}
	sizes := &sizeEstimator{root: decl, vars: fieldVariables(e.vars), read: map[string]bool{}}
	est, err := env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: sizes})
	if err != nil {
		return 0, nil, fmt.Errorf("estimating its cost: %w", err)
	}
	return est.Max, sizes.read, nil
}

// typedEnv is the environment the API server compiles a policy's
// expressions in (plugincel's createEnvForOpts), with object and oldObject
// of type decl rather than dyn, and variables, as the API server's type
// checking declares them, each of the type its expression has.
func typedEnv(decl *apiservercel.DeclType, opts plugincel.OptionalVariableDeclarations, variables []plugincel.NamedExpressionAccessor) (*cel.Env, error) {
	request, namespace := plugincel.BuildRequestType(), plugincel.BuildNamespaceType()
	vars := []cel.EnvOption{
		cel.Variable(plugincel.ObjectVarName, decl.CelType()),
		cel.Variable(plugincel.OldObjectVarName, decl.CelType()),
		cel.Variable(plugincel.NamespaceVarName, namespace.CelType()),
		cel.Variable(plugincel.RequestVarName, request.CelType()),
	}
	if opts.HasParams {
		vars = append(vars, cel.Variable(plugincel.ParamsVarName, cel.DynType))
	}
	if opts.HasAuthorizer {
		vars = append(vars, cel.Variable(plugincel.AuthorizerVarName, library.AuthorizerType),
			cel.Variable(plugincel.RequestResourceAuthorizerVarName, library.ResourceCheckType))
	}
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        vars,
		DeclTypes:         []*apiservercel.DeclType{namespace, request, decl},
	}, environment.StrictCostOpt)
	if err != nil {
		return nil, err
	}
	if opts.HasPatchTypes {
		if set, err = set.Extend(environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions: []cel.EnvOption{
				common.ResolverEnvOption(&mutation.DynamicTypeResolver{}),
				environment.UnversionedLib(library.JSONPatch),
			},
		}); err != nil {
			return nil, err
		}
	}
	if len(variables) == 0 {
		return set.Env(environment.NewExpressions)
	}
	c, err := plugincel.NewCompositedCompilerForTypeChecking(set)
	if err != nil {
		return nil, err
	}
	c.Compiler = typingCompiler{c}
	for _, v := range variables {
		if r := c.CompileAndStoreVariable(v, opts, environment.NewExpressions); r.Error != nil {
			return nil, fmt.Errorf("the variable %s: %s", v.GetName(), r.Error.Detail)
		}
	}
	return c.Env(environment.NewExpressions)
}

// typingCompiler compiles a variable in the typed environment, for its
// type, as the API server's type checking does (its typeCheckingCompiler).
type typingCompiler struct{ c *plugincel.CompositedCompiler }

func (t typingCompiler) CompileCELExpression(e plugincel.ExpressionAccessor, _ plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	env, err := t.c.Env(mode)
	if err != nil {
		return plugincel.CompilationResult{Error: &apiservercel.Error{Type: apiservercel.ErrorTypeInternal, Detail: err.Error()}}
	}
	ast, issues := env.Compile(e.GetExpression())
	if issues != nil && issues.Err() != nil {
		return plugincel.CompilationResult{Error: &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: issues.Err().Error()}}
	}
	return plugincel.CompilationResult{OutputType: ast.OutputType()}
}

// fieldVariables are the variables among vars whose expression selects a
// field of object or oldObject, by name, with the path of the field: the
// size of what they give is the field's.
func fieldVariables(vars []plugincel.NamedExpressionAccessor) map[string][]string {
	out := map[string][]string{}
	for _, v := range vars {
		path := strings.Split(strings.TrimSpace(v.GetExpression()), ".")
		if path[0] != plugincel.ObjectVarName && path[0] != plugincel.OldObjectVarName {
			continue
		}
		ok := true
		for _, n := range path {
			ok = ok && n != "" && strings.IndexFunc(n, func(r rune) bool { return r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) }) < 0
		}
		if ok {
			out[v.GetName()] = path
		}
	}
	return out
}

// sizeEstimator sizes what an expression reaches from object and
// oldObject by the schema's bounds, as the API server's CRD rules are
// sized (apiextensions' sizeEstimator, from self).
type sizeEstimator struct {
	root *apiservercel.DeclType
	vars map[string][]string // fieldVariables
	read map[string]bool     // the paths sized, as estimate returns them
}

func (s *sizeEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) >= 2 && path[0] == "variables" && s.vars[path[1]] != nil {
		path = append(slices.Clip(s.vars[path[1]]), path[2:]...)
	}
	if len(path) == 0 || (path[0] != plugincel.ObjectVarName && path[0] != plugincel.OldObjectVarName) {
		return nil
	}
	cur := s.root
	var steps []string
	for _, name := range path[1:] {
		if strings.HasPrefix(name, "@") {
			steps = append(steps, "[*]")
		} else {
			steps = append(steps, name)
		}
		if s.read != nil {
			s.read[strings.Join(steps, "/")] = true
		}
		switch name {
		case "@items", "@values":
			if cur.ElemType == nil {
				return nil
			}
			cur = cur.ElemType
		case "@keys":
			if cur.KeyType == nil {
				return nil
			}
			cur = cur.KeyType
		default:
			f, ok := cur.Fields[name]
			if !ok || f.Type == nil {
				return nil
			}
			cur = f.Type
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(cur.MaxElements)}
}

func (s *sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
