package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/z5labs/humus/kube"
)

// Operation is a write an admission webhook is called for.
type Operation string

const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// Request is what the API server says of the write a webhook is called
// for, besides the objects.
type Request struct {
	// UID is the review's, the same in each webhook called for one write.
	UID types.UID

	// Operation is Create, Update or Delete.
	Operation Operation

	// Namespace and Name are the object's; Name is "" on a create whose
	// object has a generateName instead.
	Namespace, Name string

	// UserInfo is who asks: their user name, groups and UID, as the API
	// server authenticated them.
	UserInfo authenticationv1.UserInfo

	// DryRun is true on a dry run (kubectl --dry-run=server): the API
	// server stores nothing, and a webhook with Settings.SideEffects must
	// make none.
	DryRun bool
}

// ValidateFunc checks a write of an object of type T. old is the object
// before the write (nil on a create), obj the object the write would store
// (nil on a delete). Each is the function's own copy.
//
// It returns the warnings the client is shown (kubectl prints each as
// "Warning: ..."), whatever it decides, and nil to allow the write, or an
// error to refuse it:
//
//   - field.Error values (k8s.io/apimachinery/pkg/util/validation/field),
//     such as field.ErrorList's ToAggregate(), or errors.Join of
//     field.Invalid's: the API server refuses the write as Invalid (422),
//     each field's path and message shown as it shows a schema error's,
//     and apierrors.IsInvalid recognises it;
//   - an apierrors.APIStatus, such as apierrors.NewForbidden's, answered as
//     it says;
//   - any other error: refused as Forbidden (403), with its message.
type ValidateFunc[T any] func(ctx context.Context, req Request, old, obj *T) (warnings []string, err error)

// DefaultFunc sets the defaults of obj, the object a create or an update
// would store, by changing it; old is the object before an update (nil on
// a create). What it changes is sent back to the API server as a JSON
// patch computed from the change. Its warnings and error are
// ValidateFunc's: an error refuses the write.
type DefaultFunc[T any] func(ctx context.Context, req Request, old, obj *T) (warnings []string, err error)

// Settings are a webhook's entry in its configuration.
type Settings struct {
	// Name is the webhook's name in its configuration, and the last
	// segment of the path it is served at: a DNS subdomain of at least
	// three segments. Default "validate.<plural>.<group>" for Validating,
	// "default.<plural>.<group>" for Defaulting, with the group "core" for
	// Kubernetes' core kinds, such as validate.websites.example.com.
	Name string

	// Operations are the writes the webhook is called for. Default Create
	// and Update; Delete, for Validating only, hands the ValidateFunc the
	// object deleted as old.
	Operations []Operation

	// FailurePolicy is what the API server does with a write when the
	// webhook can't answer (down, timed out, an answer it can't read):
	// Fail, the default, refuses the write; Ignore stores it unchecked.
	// A refusal the webhook answers, its function's error or panic,
	// refuses the write either way. See the package doc for the trade-off.
	FailurePolicy admissionregistrationv1.FailurePolicyType

	// Timeout is how long the API server waits for the webhook: 1 to 30
	// seconds, whole. Default 10s, the API server's.
	Timeout time.Duration

	// MatchConditions are CEL expressions the API server evaluates before
	// calling the webhook: it calls it only when all are true, such as
	// {Name: "not-the-operator", Expression: "request.userInfo.username !=
	// 'system:serviceaccount:ops:website-operator'"}. Default none: every
	// write of Operations.
	MatchConditions []admissionregistrationv1.MatchCondition

	// NamespaceSelector and ObjectSelector limit the webhook to the
	// objects in namespaces whose labels match, and to objects whose
	// labels match. Default nil: every one.
	NamespaceSelector, ObjectSelector *metav1.LabelSelector

	// SideEffects, false by default, says the function changes nothing
	// but its answer (sideEffects: None). True says it changes something
	// else, such as a record outside the cluster, and skips that on a
	// Request's DryRun (sideEffects: NoneOnDryRun): the API server refuses
	// a dry run of a write that a webhook with side effects it can't skip
	// would see, so there is no third value.
	SideEffects bool
}

// Webhook is one admission webhook: a function of the objects of one
// resource, and its Settings. Validating and Defaulting make one; a
// Webhooks serves several and reflects their configurations.
type Webhook struct {
	mutating bool
	settings Settings
	target   target
	review   func(ctx context.Context, req Request, old, obj []byte) (reviewed, error)
	err      error // what is wrong with the resource, or nil
}

// target is what a Webhook knows of its resource.
type target struct {
	gvr   schema.GroupVersionResource
	kind  string
	scope kube.Scope
}

// reviewed is what a webhook's function answered: its warnings and, for a
// defaulting webhook, the object it was handed and the object it changed,
// each as decoding its JSON encoding gives it (jsonValue).
type reviewed struct {
	warnings      []string
	before, after any // defaulting only
}

// Validating is a validating webhook of r's objects, calling f for each
// write Settings.Operations names. r is a kube.Resource, whose objects
// are kube.Object[Spec, Status], or a kube.Kind[T], such as one of
// Kubernetes' own kinds:
//
//	admission.Validating(app.Website, admission.Settings{}, validateWebsite)
//
// What is wrong with r, or with s, is an error of Webhooks' methods.
func Validating[T any](r kube.ResourceOf[T], s Settings, f ValidateFunc[T]) Webhook {
	w := newWebhook(r, s, false)
	if f == nil {
		w.err = errors.Join(w.err, errors.New("the ValidateFunc is nil"))
		return w
	}
	w.review = func(ctx context.Context, req Request, oldRaw, objRaw []byte) (reviewed, error) {
		old, obj, err := decodePair[T](oldRaw, objRaw)
		if err != nil {
			return reviewed{}, err
		}
		warnings, err := f(ctx, req, old, obj)
		return reviewed{warnings: warnings}, err
	}
	return w
}

// Defaulting is a mutating webhook of r's objects, calling f for each
// create and update Settings.Operations names, and answering with the JSON
// patch of what f changed. r is as Validating's.
//
// The patch is computed from the object f was handed and the one it
// returns, each as encoding/json encodes it, and applied to the object as the
// API server sent it: a field the Go type doesn't have, which the decode
// dropped, is left as it was, not removed; a list f changed is replaced
// whole unless it kept its length, when its items are patched one by one.
func Defaulting[T any](r kube.ResourceOf[T], s Settings, f DefaultFunc[T]) Webhook {
	w := newWebhook(r, s, true)
	if f == nil {
		w.err = errors.Join(w.err, errors.New("the DefaultFunc is nil"))
		return w
	}
	w.review = func(ctx context.Context, req Request, oldRaw, objRaw []byte) (reviewed, error) {
		old, obj, err := decodePair[T](oldRaw, objRaw)
		if err != nil {
			return reviewed{}, err
		}
		if obj == nil {
			return reviewed{}, errors.New("the review has no object to default")
		}
		before, err := jsonOf(obj)
		if err != nil {
			return reviewed{}, err
		}
		warnings, err := f(ctx, req, old, obj)
		if err != nil {
			return reviewed{warnings: warnings}, err
		}
		after, err := jsonOf(obj)
		if err != nil {
			return reviewed{warnings: warnings}, err
		}
		return reviewed{warnings: warnings, before: before, after: after}, nil
	}
	return w
}

func newWebhook[T any](r kube.ResourceOf[T], s Settings, mutating bool) Webhook {
	w := Webhook{mutating: mutating, settings: s}
	w.target, w.err = targetOf(r)
	return w
}

// targetOf reads r: a kube.Kind[T] by its fields, a kube.Resource by its
// fields and its CRD's errors. kube.ResourceOf is satisfied by those two
// alone, whose method is kube's own.
func targetOf[T any](r kube.ResourceOf[T]) (target, error) {
	if r == nil {
		return target{}, errors.New("the resource is nil: give a kube.Resource or a kube.Kind")
	}
	if k, ok := r.(kube.Kind[T]); ok {
		var errs []error
		if k.GVR.Version == "" || k.GVR.Resource == "" {
			errs = append(errs, fmt.Errorf("Kind.GVR %s: its version and resource are required", k.GVR))
		}
		if k.Kind == "" {
			errs = append(errs, errors.New("Kind.Kind is required"))
		}
		if k.Scope != kube.Namespaced && k.Scope != kube.Cluster {
			errs = append(errs, fmt.Errorf("Kind.Scope %q is neither %s nor %s", k.Scope, kube.Namespaced, kube.Cluster))
		}
		return target{gvr: k.GVR, kind: k.Kind, scope: k.Scope}, errors.Join(errs...)
	}
	v := reflect.ValueOf(r)
	crd := v.MethodByName("CRD")
	if v.Kind() != reflect.Struct || !crd.IsValid() || !v.FieldByName("Plural").IsValid() {
		return target{}, fmt.Errorf("%T is neither a kube.Resource nor a kube.Kind", r)
	}
	str := func(name string) string { return v.FieldByName(name).String() }
	t := target{
		gvr:   schema.GroupVersionResource{Group: str("Group"), Version: str("Version"), Resource: str("Plural")},
		kind:  str("Kind"),
		scope: kube.Scope(str("Scope")),
	}
	out := crd.Call(nil)
	err, _ := out[1].Interface().(error)
	return t, err
}

// name is the webhook's name: Settings.Name, or its default.
func (w Webhook) name() string {
	if w.settings.Name != "" {
		return w.settings.Name
	}
	verb := "validate"
	if w.mutating {
		verb = "default"
	}
	group := w.target.gvr.Group
	if group == "" {
		group = "core"
	}
	return verb + "." + w.target.gvr.Resource + "." + group
}

// operations are Settings.Operations, or their default.
func (w Webhook) operations() []Operation {
	if len(w.settings.Operations) == 0 {
		return []Operation{Create, Update}
	}
	return w.settings.Operations
}

// timeout is Settings.Timeout, or its default.
func (w Webhook) timeout() time.Duration {
	if w.settings.Timeout == 0 {
		return 10 * time.Second
	}
	return w.settings.Timeout
}

// failurePolicy is Settings.FailurePolicy, or its default.
func (w Webhook) failurePolicy() admissionregistrationv1.FailurePolicyType {
	if w.settings.FailurePolicy == "" {
		return admissionregistrationv1.Fail
	}
	return w.settings.FailurePolicy
}

// decodePair decodes a review's old object and object, each absent when
// its JSON is empty.
func decodePair[T any](oldRaw, objRaw []byte) (old, obj *T, err error) {
	if old, err = decodeObject[T](oldRaw, "oldObject"); err != nil {
		return nil, nil, err
	}
	if obj, err = decodeObject[T](objRaw, "object"); err != nil {
		return nil, nil, err
	}
	return old, obj, nil
}

func decodeObject[T any](raw []byte, what string) (*T, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, decodeError{fmt.Errorf("decoding the review's %s as a %s: field %s: a JSON %s can't be a Go %s", what, reflect.TypeFor[T](), te.Field, te.Value, te.Type)}
		}
		return nil, decodeError{fmt.Errorf("decoding the review's %s as a %s: %w", what, reflect.TypeFor[T](), err)}
	}
	return v, nil
}
