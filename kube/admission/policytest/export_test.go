package policytest

import (
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/z5labs/humus/kube"
)

// KindCosts returns the estimated cost of a validation's expression of k's
// objects, typed by the schema ValidateKind reflects from T, and typed by
// server, the API server's own schema of the kind, as its type checking
// resolves it.
func KindCosts[T any](k kube.Kind[T], server *spec.Schema, expr string) (ours, theirs uint64, err error) {
	c, err := kindCRD(k)
	if err != nil {
		return 0, 0, err
	}
	t, err := newObjectType(c)
	if err != nil {
		return 0, 0, err
	}
	e := expression{accessor: &validating.ValidationCondition{Expression: expr}, opts: plugincel.OptionalVariableDeclarations{HasAuthorizer: true}}
	if ours, err = t.cost(t.decl, e); err != nil {
		return 0, 0, err
	}
	decl := common.SchemaDeclType(&openapi.Schema{Schema: server}, true).MaybeAssignTypeName("Server")
	theirs, err = t.cost(decl, e)
	return ours, theirs, err
}
