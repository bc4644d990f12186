package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/z5labs/humus/kube/internal/shard"
)

// Objects is the controller's resource, in a namespace or all of them,
// as the controller reads and writes it: the informer's list and watch,
// whose objects are cachedObjects, and the controller's applies, whose
// answer is the object's resourceVersion after the write.
type Objects interface {
	List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Apply(ctx context.Context, name string, body []byte, opts metav1.PatchOptions, subresource ...string) (resourceVersion string, err error)
}

// Clients are the API clients the cache lists and watches through: built
// from a Client's Config, or client-go's fakes in tests.
type Clients struct {
	Dynamic dynamic.Interface
	// REST is the client whole objects are listed, watched and applied
	// through (Objects); nil with the fakes, whose dynamic client does it.
	REST     rest.Interface
	Metadata metadata.Interface
}

// Objects is the API of gvr's objects in namespace (all of them when
// empty): through the REST client, or the dynamic client when the
// clients are client-go's fakes.
func (cl Clients) Objects(gvr schema.GroupVersionResource, namespace string) Objects {
	if cl.REST == nil {
		return dynamicObjects{cl.Dynamic.Resource(gvr).Namespace(namespace)}
	}
	return restObjects{rest: cl.REST, gvr: gvr, namespace: namespace}
}

// restObjects is Objects on the API server's JSON, decoded by
// cachedSerializer: a watch event's or a list's objects straight into
// cachedObjects, where the dynamic client scans a watch event three times
// and decodes its object into nested maps, which the informer's transform
// would encode and decode once more; an apply's answer for its
// resourceVersion only. The Memcached example's App spends a sixth less
// CPU an object for it (kube/BENCHMARKS.md).
type restObjects struct {
	rest      rest.Interface
	gvr       schema.GroupVersionResource
	namespace string
}

// NewObjectsREST is the REST client restObjects request through: the
// config's, with JSON for its content and cachedSerializer to decode it.
func NewObjectsREST(cfg *rest.Config) (*rest.RESTClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	cfg.NegotiatedSerializer = cachedSerializer{}
	return rest.UnversionedRESTClientFor(cfg)
}

// path is the URL path of the objects, or of the one named name and its
// subresource.
func (o restObjects) path(name string, subresource ...string) []string {
	p := []string{"api", o.gvr.Version}
	if o.gvr.Group != "" {
		p = []string{"apis", o.gvr.Group, o.gvr.Version}
	}
	if o.namespace != "" {
		p = append(p, "namespaces", o.namespace)
	}
	p = append(p, o.gvr.Resource)
	if name != "" {
		p = append(p, name)
	}
	return append(p, subresource...)
}

func (o restObjects) List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	list := &List{}
	err := o.rest.Get().AbsPath(o.path("")...).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		Do(ctx).Into(list)
	if err != nil {
		return nil, err
	}
	return list, nil
}

func (o restObjects) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return o.rest.Get().AbsPath(o.path("")...).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		Watch(ctx)
}

func (o restObjects) Apply(ctx context.Context, name string, body []byte, opts metav1.PatchOptions, subresource ...string) (string, error) {
	var w writtenObject
	err := o.rest.Patch(types.ApplyPatchType).AbsPath(o.path(name, subresource...)...).Body(body).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		Do(ctx).Into(&w)
	return w.resourceVersion, err
}

// dynamicObjects is Objects on a dynamic client (client-go's fake, in
// the package's tests): its objects turned into cachedObjects by compact.
type dynamicObjects struct{ res dynamic.ResourceInterface }

func (o dynamicObjects) List(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	l, err := o.res.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	list := &List{TypeMeta: metav1.TypeMeta{APIVersion: l.GetAPIVersion(), Kind: l.GetKind()}}
	list.ResourceVersion, list.Continue = l.GetResourceVersion(), l.GetContinue()
	for i := range l.Items {
		c, err := Compact(&l.Items[i])
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, c.(*Object))
	}
	return list, nil
}

func (o dynamicObjects) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := o.res.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return shard.FilterWatch(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type == watch.Error {
			return e, true // its Status, as the reflector reads it
		}
		if c, err := Compact(e.Object); err == nil {
			e.Object = c.(runtime.Object)
		}
		return e, true
	}), nil
}

func (o dynamicObjects) Apply(ctx context.Context, name string, body []byte, opts metav1.PatchOptions, subresource ...string) (string, error) {
	res, err := o.res.Patch(ctx, name, types.ApplyPatchType, body, opts, subresource...)
	if err != nil {
		return "", err
	}
	return res.GetResourceVersion(), nil
}

// List is a list of the resource's objects, decoded into the cache's
// form.
type List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []*Object `json:"items"`
}

// DeepCopyObject copies l and its objects.
func (l *List) DeepCopyObject() runtime.Object {
	c := &List{TypeMeta: l.TypeMeta, Items: make([]*Object, len(l.Items))}
	l.DeepCopyInto(&c.ListMeta)
	for i, o := range l.Items {
		c.Items[i] = o.DeepCopyObject().(*Object)
	}
	return c
}

// writtenObject is what the controller reads of an apply's answer: the
// object's resourceVersion after the write.
type writtenObject struct{ resourceVersion string }

// decode reads the resourceVersion of data, an object, without decoding
// anything else of it.
func (w *writtenObject) decode(data []byte) error {
	return topLevel(data, func(key, _, value []byte) error {
		if string(key) != "metadata" {
			return nil
		}
		return topLevel(value, func(key, _, value []byte) error {
			if string(key) != "resourceVersion" {
				return nil
			}
			return json.Unmarshal(value, &w.resourceVersion)
		})
	})
}

func (*writtenObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies w.
func (w *writtenObject) DeepCopyObject() runtime.Object { c := *w; return &c }

// cachedSerializer decodes the API server's JSON answers for restObjects:
// into a List or a writtenObject when asked to; a watch event into
// its type and its object's JSON, then the object into a Object; a
// Status, the answer of a failed request and the object of a watch's
// ERROR event, into a metav1.Status. It encodes nothing: restObjects sends
// the JSON it is given.
type cachedSerializer struct{}

func (cachedSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType:        "application/json",
		MediaTypeType:    "application",
		MediaTypeSubType: "json",
		EncodesAsText:    true,
		Serializer:       cachedCodec{},
		StreamSerializer: &runtime.StreamSerializerInfo{
			EncodesAsText: true,
			Serializer:    watchEventCodec{},
			Framer:        jsonLines{},
		},
	}}
}

func (cachedSerializer) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

func (cachedSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

var errNoEncoding = errors.New("kube: the objects' client encodes no object")

// cachedCodec decodes an answer or a watch event's object.
type cachedCodec struct{}

func (cachedCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch into := into.(type) {
	case *List:
		var l struct {
			metav1.TypeMeta `json:",inline"`
			metav1.ListMeta `json:"metadata"`
			Items           []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(data, &l); err != nil {
			return nil, nil, fmt.Errorf("kube: decoding a list: %w", err)
		}
		into.TypeMeta, into.ListMeta = l.TypeMeta, l.ListMeta
		into.Items = make([]*Object, 0, len(l.Items))
		// The API server leaves the kind out of a built-in resource's
		// list's items: each is the list's, as the dynamic client has it.
		kind := metav1.TypeMeta{APIVersion: l.APIVersion, Kind: strings.TrimSuffix(l.Kind, "List")}
		for _, item := range l.Items {
			o, err := Decode(item)
			if err != nil {
				return nil, nil, err
			}
			if o.APIVersion == "" && o.Kind == "" && kind.APIVersion != "" && kind.Kind != "" {
				o.setKind(kind)
			}
			into.Items = append(into.Items, o)
		}
		return into, nil, nil
	case *writtenObject:
		if err := into.decode(data); err != nil {
			return nil, nil, fmt.Errorf("kube: decoding an apply's answer: %w", err)
		}
		return into, nil, nil
	case nil:
	default:
		return nil, nil, fmt.Errorf("kube: the objects' client decodes no %T", into)
	}
	o, err := Decode(data)
	if err != nil {
		return nil, nil, err
	}
	if o.Kind == "Status" && (o.APIVersion == "v1" || o.APIVersion == "") {
		status := &metav1.Status{}
		if err := json.Unmarshal(data, status); err != nil {
			return nil, nil, fmt.Errorf("kube: decoding a Status: %w", err)
		}
		return status, nil, nil
	}
	return o, nil, nil
}

func (cachedCodec) Encode(runtime.Object, io.Writer) error { return errNoEncoding }

func (cachedCodec) Identifier() runtime.Identifier { return "kube-cached-json" }

// watchEventCodec decodes a watch event's frame into a metav1.WatchEvent:
// its type, and its object's JSON, for cachedCodec.
type watchEventCodec struct{}

func (watchEventCodec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	event, ok := into.(*metav1.WatchEvent)
	if !ok {
		return nil, nil, fmt.Errorf("kube: a watch event decodes into a metav1.WatchEvent, not a %T", into)
	}
	err := topLevel(data, func(key, _, value []byte) error {
		switch string(key) {
		case "type":
			return json.Unmarshal(value, &event.Type)
		case "object":
			event.Object.Raw = value
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kube: decoding a watch event: %w", err)
	}
	return event, nil, nil
}

func (watchEventCodec) Encode(runtime.Object, io.Writer) error { return errNoEncoding }

func (watchEventCodec) Identifier() runtime.Identifier { return "kube-watch-event-json" }

// Decode decodes an object's JSON into a Object: its metadata
// decoded, without managedFields but their digests, and the rest of its
// members as they are, without decoding them.
func Decode(data []byte) (*Object, error) {
	o := &Object{}
	var meta []byte
	rest := make([][]byte, 0, 4)
	size := 2
	err := topLevel(data, func(key, member, value []byte) error {
		if string(key) == "metadata" {
			meta = value
			return nil
		}
		rest = append(rest, member)
		size += len(member) + 1
		switch string(key) {
		case "apiVersion":
			return json.Unmarshal(value, &o.APIVersion)
		case "kind":
			return json.Unmarshal(value, &o.Kind)
		}
		return nil
	})
	if err == nil && meta != nil {
		err = json.Unmarshal(meta, &o.ObjectMeta)
	}
	if err != nil {
		return nil, fmt.Errorf("kube: caching an object: %w", err)
	}
	o.managed, o.Written = appendDigests(o.room[:0], o.ManagedFields), newestWrite(o.ManagedFields)
	o.ManagedFields = nil
	o.APIVersion, o.Kind, o.Namespace = shared(o.APIVersion), shared(o.Kind), shared(o.Namespace)
	for i, f := range o.Finalizers {
		o.Finalizers[i] = shared(f) // a controller's finalizer, on many objects
	}
	pack(&o.Name, (*string)(&o.UID), &o.ResourceVersion, &o.GenerateName)
	raw := make([]byte, 0, size)
	raw = append(raw, '{')
	for i, m := range rest {
		if i > 0 {
			raw = append(raw, ',')
		}
		raw = append(raw, m...)
	}
	o.Raw = append(raw, '}')
	return o, nil
}

// setKind gives o, an object without its API version and kind, those of
// kind: in its TypeMeta, and in its JSON, from which a reconcile decodes
// its copy.
func (o *Object) setKind(kind metav1.TypeMeta) {
	o.APIVersion, o.Kind = shared(kind.APIVersion), shared(kind.Kind)
	raw, _ := json.Marshal(kind) // {"kind":…,"apiVersion":…}, two strings
	if len(o.Raw) > 2 {          // not {}: its members follow
		raw = append(append(raw[:len(raw)-1], ','), o.Raw[1:]...)
	}
	o.Raw = raw
}

// compact turns the dynamic client's object into a Object, as
// Decode does the API server's JSON. Any other value, such as an
// object it already turned, is kept as it is.
func Compact(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("kube: caching %s: %w", u.GetName(), err)
	}
	o, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("kube: caching %s: %w", u.GetName(), err)
	}
	return o, nil
}
