// Package kube writes Kubernetes controllers as humus Services, on client-go
// alone: no controller-runtime, no code generation, no globals.
//
// A custom resource is a Resource of two plain Go types, its spec and its
// status; its CustomResourceDefinition is reflected from them by CRD, with
// constraints attached to fields by pointer, so a misspelled constraint
// doesn't compile. One of Kubernetes' own kinds, such as a Namespace, is a
// Kind. NewController and NewKindController return a Controller, which is a
// humus.Service; NewClient is how it, and the end user's own clientsets,
// reach the API server through the Host.
//
// # Where things are
//
// This package is the face: the public types, their checks and their
// docs, and the wiring NewController does. The engine is below it, in
// packages of its own, each opening with what it promises and what it may
// import, none importing this one:
//
//   - kube/internal/control, the control loop: the workers and the work
//     queue's one doorway, the event handlers of the resource, its owned
//     and related objects, own writes and reading them back, the status
//     and finalizer applies, the terms of leading (one Lease, or a Lease
//     per shard), Serve and Shutdown, and the telemetry of it all.
//   - kube/internal/cache, the informers a Client's controllers share, the
//     forms objects are kept in, and the wire codecs.
//   - kube/internal/crd, the CRD reflected from Go types; kube/internal/merge,
//     what a version can't hold merged back, list item by list item.
//   - kube/internal/elector, shard, priorityqueue and transport: the Lease,
//     the shards' ranges, the queue's priorities, and the Client's
//     connections with the writes they record; kube/internal/record and
//     review, the Recorder's Events and the conversion webhook's reviews;
//     kube/internal/rbac, the RBAC MarshalRBAC writes; kube/internal/webhooks,
//     what the conversion and admission webhooks share (where the API
//     server reaches one, a review's gate).
//
// Beside it, public packages of their own: kube/admission (validating and
// defaulting webhooks in Go, and admission policies the API server runs),
// kube/kubeenv (a Connection from a kubeconfig or a pod), kube/clustertest
// and kube/crdtest (the real control plane, and a CRD's validation, for
// tests).
//
// # Custom resources and their CRD
//
// A Resource names a custom resource: its group, version, kind, plural and
// Scope. Resource.CRD reflects its CustomResourceDefinition from the Spec and
// Status types, with no markers and no generated code: one version, served
// and stored, with the status subresource, named <Plural>.<Group>; a root
// with apiVersion, kind, metadata, a required spec and a status (nullable,
// so an apply can empty it); a structural schema, every subschema inlined,
// in OpenAPI 3.0's dialect, so a pointer is nullable: true, never a type
// array.
//
// What kubectl shows of the objects is on the Resource too, typed, and
// checked by CRD against the API server's rules and the reflected schema:
//
//	ShortNames: []string{"mc"},       // kubectl get mc
//	Categories: []string{"example"},  // kubectl get example
//	Columns: []kube.Column{
//		{Name: "Size", JSONPath: ".spec.size"}, // type integer, from the schema
//		{Name: "Available", JSONPath: `.status.conditions[?(@.type=="Available")].status`},
//		{Name: "Age", JSONPath: ".metadata.creationTimestamp"}, // type date: an age
//	},
//	Scale: &kube.Scale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.readyReplicas"},
//
// Where the API server would take a path that names nothing, CRD refuses it:
//
//   - A column's JSONPath must name a field of the schema (or of the
//     object's metadata): a typo is an error from CRD, not a column that is
//     always empty. Its Type, when not given, is the field's.
//   - Scale's replicas paths name int32 fields of the spec and the status,
//     as a Scale's replicas are; kubectl scale then writes the spec's, and
//     the schema's rules validate it.
//
// The schema is encoding/json's encoding of the types:
//
//	Go                                      schema
//	bool                                    type: boolean
//	int8 to int32, uint8, uint16            type: integer, format: int32
//	int, int64, uint, uint32, uint64        type: integer, format: int64
//	float32, float64                        type: number
//	string                                  type: string
//	[]byte                                  type: string, format: byte
//	a slice or an array                     type: array, with items
//	map[string]V                            type: object, with additionalProperties
//	a struct                                type: object, a property per field encoding/json writes
//	*T                                      T's schema, nullable unless omitempty or omitzero
//	metav1.Time, metav1.MicroTime           type: string, format: date-time
//	metav1.Duration                         type: string
//	resource.Quantity, intstr.IntOrString   x-kubernetes-int-or-string, anyOf integer and string
//	runtime.RawExtension                    type: object, x-kubernetes-preserve-unknown-fields
//	metav1.ObjectMeta, in a template        type: object: name, namespace, labels, annotations, finalizers
//	metav1.Condition                        type: object, constrained as its kubebuilder markers say
//	an encoding.TextMarshaler               type: string
//
//	  - A struct's properties are the fields encoding/json writes: exported,
//	    named by their json tags, json:"-" left out; an embedded struct without
//	    a json name is inlined, with encoding/json's rules for two fields of
//	    one name.
//	  - A field is required unless its json tag has omitempty or omitzero, it
//	    has a Default, or it is promoted through an embedded pointer: a field
//	    the encoder always writes is always there.
//	  - A metav1.Condition carries the constraints Kubernetes' own types
//	    and controller-gen's CRDs give it: status one of True, False and
//	    Unknown; type a qualified name (with an optional DNS prefix) of at
//	    most 316 characters; reason CamelCase, 1 to 1024 characters;
//	    message at most 32768; observedGeneration at least 0; all but
//	    observedGeneration required.
//	  - Below the root, the API server prunes, or under fieldValidation=Strict
//	    refuses, every metadata field a schema doesn't name, so a template's
//	    ObjectMeta names the ones a template sets, as controller-gen does.
//
// Constraints are typed values, attached to a field by pointer:
//
//	kube.Rules(&spec, kube.Field(&spec.Size).Minimum(1).Maximum(3))
//
// Each and Values name the items of a slice and the values of a map, whose
// constraints are typed by the item's type:
//
//	kube.Rules(&spec,
//		kube.Field(&spec.Targets).MaxItems(16),
//		kube.Each(&spec.Targets).Pattern(dns1123Label).MaxLength(63),
//		kube.Values(&spec.Labels).MaxLength(63),
//	)
//
//	  - A misspelled constraint, or a value of the wrong type, doesn't compile.
//	  - Rules belong to a type: Rules[T] constrains T's own fields, promoted
//	    ones included, wherever T appears. A field of a struct that T holds by
//	    name is constrained by that struct's own Rules.
//	  - Schema gives the schema of a type that implements json.Marshaler,
//	    whose fields aren't its encoding.
//	  - CRD doesn't compile CEL: the API server compiles each Validation when
//	    the CRD is created, and refuses one that doesn't compile, or whose
//	    estimated cost exceeds its budget, as a rule over a list without
//	    MaxItems, or over strings without MaxLength, can. Package
//	    kube/crdtest checks a CRD with the API server's own code, in a
//	    test, and names the bounds that bring a rule under the budget:
//	    kube doesn't link CEL's compiler, about 10 MB, into every
//	    controller.
//
// CRD returns one error, errors.Join of every mistake, each naming the Go
// type, the field and where it is in the schema:
//
//	kube: app.MemcachedSpec.Image (spec.image): Minimum needs a number, and the field's schema is type: string
//
// A nil slice or map, and a zero metav1.Time, encode as null. In a field
// without omitempty, which is required and not nullable, the API server
// refuses null, so a status applied with one fails: give such a field
// omitempty, or keep it set.
//
// The controller never installs its CRD. Whatever deploys the controller
// applies the CRD's YAML, which MarshalCRD writes (without the status that
// yaml.Marshal would write empty), and a golden test keeps the YAML in step
// with the types, so a change to them that isn't in the YAML fails go test:
//
//	var update = flag.Bool("update", false, "rewrite the golden CRD")
//
//	func TestMemcachedCRD(t *testing.T) {
//		crd, err := app.Memcached.CRD()
//		if err != nil {
//			t.Fatal(err)
//		}
//		if err := crdtest.Validate(crd); err != nil { // as the API server will
//			t.Fatal(err)
//		}
//		got, err := kube.MarshalCRD(crd)
//		if err != nil {
//			t.Fatal(err)
//		}
//		const golden = "../deploy/crds/memcacheds.cache.example.com.yaml"
//		if *update {
//			if err := os.WriteFile(golden, got, 0o644); err != nil {
//				t.Fatal(err)
//			}
//		}
//		want, err := os.ReadFile(golden)
//		if err != nil {
//			t.Fatal(err)
//		}
//		if string(got) != string(want) {
//			t.Errorf("the CRD isn't %s: go test -run TestMemcachedCRD -update rewrites it", golden)
//		}
//	}
//
// The reflection itself is in kube/internal/crd, whose package doc lists
// what it promises.
//
// # Several versions
//
// Versions is a resource of several versions: one CRD, each version a
// Resource of its own types and Rules, one of them the Hub, the others
// tied to it by VersionOf and two plain functions, to the hub and from it:
//
//	var Memcacheds = kube.Versions[v1beta1.Spec, v1beta1.Status]{
//		Hub:     v1beta1.Memcached,
//		Others:  []kube.Version[v1beta1.Spec, v1beta1.Status]{kube.VersionOf(v1alpha1.Memcached, v1alpha1.ToHub, v1alpha1.FromHub)},
//		Storage: "v1beta1",
//		Webhook: kube.ConversionWebhook{Service: &kube.ServiceReference{Namespace: "memcached-system", Name: "memcached-webhook", Path: "/convert"}},
//	}
//
// What it gives:
//
//   - Versions.CRD is the one CRD, with every mistake across the versions
//     in one error.
//   - Versions.Handler is the conversion webhook, an http.Handler answering
//     the API server's ConversionReviews through the hub, for the core's
//     webhook.Service to serve on every replica, before the controller
//     (webhook.Service.Before). A function's error or panic, or a
//     converted object with another name, namespace, UID or kind, fails
//     the review, and is recorded; the App goes on.
//   - Nothing is lost in a round trip: what a version can't hold of
//     another is kept in the annotation <group>/<version> on the object
//     converted to it, and restored on the way back. RoundTrip checks it in
//     a test, for examples, and that the hub alone holds every version's
//     fields.
//   - Versions.Migrate rewrites the objects stored at an old version at
//     Storage, then brings the CRD's status.storedVersions down to it.
//
// A controller reconciles one version, its Resource's; objects written at
// another reach it converted. Give it the storage version: its lists and
// watches then need no webhook, nor do its writes, except to an object
// once written at another version: the API server converts it, on every
// write, to the version of each of its field managers.
// docs/evolving-your-api.md goes through adding, moving and removing a
// version.
//
// # Connecting
//
// NewClient takes a Connection: the API server's host:port, the TLS config
// it is dialled with, and a function returning the bearer token. kube
// itself reads no KUBERNETES_SERVICE_HOST, no token file and no
// kubeconfig. Package github.com/z5labs/humus/kube/kubeenv fills a
// Connection from them, through the Host:
//
//   - kubeenv.Connection(ctx, s.Host) reads the current context of the
//     kubeconfig that KUBECONFIG names, when it is set, and otherwise, in a
//     pod, the pod's service account;
//   - kubeenv.Kubeconfig(ctx, s.Host, path, context) reads a context of the
//     kubeconfig at path, its current context for "";
//   - kubeenv.InCluster(ctx, s.Host) reads the pod's service account:
//     KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, joined, for
//     Server, and ca.crt and token in
//     /var/run/secrets/kubernetes.io/serviceaccount/, the token inside
//     Token, so the kubelet's rotation is picked up.
//
// An App's Init connects with it:
//
//	conn, err := kubeenv.Connection(ctx, s.Host)
//	if err != nil {
//		return nil, err
//	}
//	client, err := kube.NewClient(s, conn)
//	if err != nil {
//		return nil, err
//	}
//
// Client.Config gives client-go's clientsets, and the Controller's dynamic
// and metadata clients, one transport that kube builds instead of
// client-go (its code is kube/internal/transport, whose package doc
// states these guarantees):
//
//   - It dials Server with s.Host.Dial, and never through a proxy, whatever
//     HTTPS_PROXY says.
//   - It speaks TLS with a clone of Connection.TLS, whose ServerName
//     defaults to Server's host, and HTTP/2, pinging a connection after 30s
//     without a frame and closing it when the ping has no answer within
//     15s, client-go's own values, which kube reads from no environment
//     variable.
//   - It asks for every answer uncompressed, where Go's transport and
//     client-go ask for gzip: kube-apiserver would gzip a watch-list's
//     events a flush at a time for each watcher, and each list over 128
//     KiB, CPU on both sides for bandwidth a cluster's network doesn't
//     lack.
//   - It calls Connection.Token at most once a minute, never twice at once,
//     and keeps the last token while a call fails. A 401 to a request that
//     carried the cached token drops it, so the next request calls Token
//     again, at most once a second. A nil Token sends none, for a client
//     certificate in Connection.TLS.
//   - It records a client span for every request, named by its method and
//     its path with the namespace and the name replaced, such as
//     "GET /api/v1/namespaces/{namespace}/pods/{name}", and otelhttp's
//     client metrics, with s.Telemetry's providers and propagator. A watch
//     is neither traced nor measured: it lasts as long as its informer.
//   - A 401 is an error naming the server, which apierrors.IsUnauthorized
//     still recognises.
//   - client-go limits no rate: the API server's priority and fairness does.
//
// NewTypedClient gives a typed client of a Resource's objects, each an
// Object[Spec, Status], or of a Kind's, each a T, with no generated
// clientset: Get, List (by labels and fields), Create, Apply (server-side
// apply of all but the status, as a field manager), ApplyStatus (the
// status subresource), Delete, and Watch, a sequence of typed events. It
// asks the API server each time, for a test, a command or a second
// controller, and its errors are the API server's own, which
// apierrors.IsNotFound, IsConflict and IsInvalid recognise.
// NewTypedClientOn builds one on a dynamic.Interface, such as client-go's
// dynamic fake:
//
//	memcacheds := kube.NewTypedClient(client, app.Memcached)
//	m, err := memcacheds.Get(ctx, "shop", "sessions")
//
// # Reading other objects, and following them
//
// A Reconciler reads objects other than its own from the cache every
// Controller built on one Client shares: Read (or ReadResource) declares a
// read of one resource's objects that a Selector keeps, and returns a
// typed, read-only Reader, whose Get and List decode a copy of their own;
// Reads gives it to a controller, whose Serve keeps its cache warm and
// whose Synced waits for it. Related and References reconcile the
// controller's objects when a related object changes: by a function of
// the related object (before and after each change), or by an index of
// the controller's own objects, kept by a function naming what each
// refers to. Nothing is started inside a reconcile, and nothing is
// global: a resource owned or read by several controllers of one Client,
// in one namespace with one Selector, is listed and watched once
// (kube/internal/cache). Settings.ReconcileTimeout bounds each reconcile.
//
// A read resource is cached whole (without managedFields), a resource only
// owned as the metadata that maps a change to its owner. ReadTrimmed
// declares a read of which the cache keeps only what the Reader's type
// decodes, and the objects' metadata: a Reconciler that reads a
// Deployment's replicas and status declares a type of those fields, and
// the kilobytes of its pod template are never kept. What is read and what
// is kept are one type, so a field that isn't kept can't be read. Owns of
// the same resource shares its informer, and follows owners and own writes
// as a whole cache does. Two Readers of one resource, namespace and
// Selector trimmed to two types are refused at construction; a Read of it
// too keeps it whole.
//
// # What a Controller promises
//
//   - Every replica lists and watches its resource, and the resources it
//     Owns and reads, and keeps its caches warm; only the holder of its Lease, named
//     Settings.Name in LeaderElection.Namespace, reconciles. Leader election
//     has no off switch.
//   - One writer at a time: a replica reconciles and writes only while it
//     can prove it holds the Lease, that is until RenewDeadline after its
//     last renewal that the API server accepted began. Each of its own
//     writes carries that deadline. From the deadline on, whatever the API
//     server does (refuses, hangs, answers slowly), it takes no new key,
//     cancels the reconciles in flight, aborts the Client's connections, so
//     nothing it queued is sent late, and makes no write of its own; Serve
//     returns ErrLostLeadership by halfway from RenewDeadline to
//     LeaseDuration after that renewal (12.5s with the defaults), whether
//     or not every Reconciler has returned, before any other replica can
//     take the Lease. A write already on the wire when the network stalled
//     can still land later: Kubernetes has no fencing token for a write.
//   - With Settings.Shards above 1, the objects are divided by the hash of
//     their UID (or namespace) into that many shards, each with a Lease of
//     its own named Name-i-of-Shards (Name-i-of-Shards-by-namespace with
//     ShardByNamespace); each rule here holds for each shard,
//     but a replica that loses a shard keeps running and takes shards
//     again. The replicas share the shards evenly, a shard handed over only
//     once its reconciles in flight have finished, and each replica lists,
//     watches and caches only the shards it holds, with the API server's
//     shard selector (filtering on its own side too). A rollout that
//     changes Shards or ShardBy never has two writers for one object: a
//     replica takes no shard while a Lease of another count or key that
//     covers any of its objects is held (one of another key covers them
//     all), so the new replicas wait for the old ones to release theirs,
//     on shutdown, or for them to expire. See Scaling out in
//     docs/kubernetes-controllers.md.
//   - A standby reads the Lease every RetryPeriod and tries to take it the
//     moment it has expired by its own clock: it takes a released Lease
//     within RetryPeriod, and a dead holder's within LeaseDuration and
//     RetryPeriod of the holder's death (or of its own start, if later).
//   - Two processes with one LeaderElection.Identity (a StatefulSet's pod
//     deleted by force and recreated, a hostname reused) never lead
//     together: the Lease names the holding process too, in the
//     annotation kube.humus.z5labs.dev/holder-process, and a Lease of this
//     identity but another process is another holder's.
//   - A Lease deleted while held counts as held: a standby that saw it held
//     takes it only LeaseDuration after it first saw it missing, and the
//     holder stops at the renewal that finds it gone, RetryPeriod after
//     the deletion at most. A replica whose first look finds no Lease (the
//     controller's first start) takes it at once.
//   - The Lease is released only on shutdown, after the workers stopped,
//     and only while this replica is still its holder: a read, then an
//     update conditioned on the resourceVersion read, so a release can
//     never blank a newer holder's record.
//   - Serve's first step lists the resource, and each resource it Owns,
//     once. NotFound or Forbidden ends Serve at once, with an error naming
//     the resource and what the API server said. A transient error (no
//     answer, a 429 or a 5xx) is retried with backoff for a minute first,
//     so a rolling upgrade of the API server doesn't crash-loop the
//     controller. While it runs, a resource whose list or watch keeps
//     answering NotFound or Forbidden for 10s, such as one whose CRD was
//     deleted or whose RBAC was taken away, ends Serve the same way: each
//     is listed and watched again every 10s, since an open watch outlives
//     its rights, so Serve ends within 20s of list or watch taken away
//     (a list of one name, humus-kube-rights-probe, which the API server
//     reads by its key, where a list with a limit goes through every
//     object of the namespace; and a watch from that list's
//     resourceVersion, which begins with no object: one without would
//     begin with them all). A
//     patch taken away makes each reconcile fail with the 403 instead. A
//     Lease this replica may not read or write, or can never write, ends it
//     too: any answer to a request of the Lease that no retry mends ends
//     Serve, naming the Lease and the answer: a 400, 405, 406, 413, 415
//     or 422, or a 404 to its create (its namespace missing), at once; a
//     403 once 403s to one kind of request (a read, a create, an update,
//     which takes a released Lease and renews a held one) have come for
//     10s with no success of that kind between, since a restarted API
//     server refuses with 403s while it loads RBAC: a read that succeeds
//     before each take refused doesn't reset it. So Synced never stays
//     healthy on a controller that does nothing.
//   - Synced is unhealthy until the caches have synced, and healthy from
//     then until Serve returns, on every replica.
//   - One object is never reconciled twice at once. A reconcile is handed its
//     own copy of the object, decoded from the cache: nothing it does
//     changes the cache. Fields the Go type lacks are ignored; a value of the
//     wrong type is an error naming the object and the field.
//   - A key is not reconciled on a cache older than the resourceVersion its
//     own last write returned: a reconcile never applies again what the
//     previous one already applied, however late the watch event arrives.
//     A remembered version is forgotten after 30s, and the key reconciled
//     then, so one the cache never reaches (etcd restored, its
//     resourceVersions gone backwards) can't hold a key back forever.
//   - Every write of the controller's own is conditioned on the object it
//     was computed from: the finalizer's apply carries the object's UID,
//     and the status apply its UID and resourceVersion (the API server
//     ignores a UID on the status subresource). A cache that is stale, its
//     object deleted or replaced by a new one of the same name, never
//     recreates the object nor writes onto the new one: the API server
//     refuses the write, and the key is dropped, not retried, since the
//     watch event of the change queues it again. The record is one DEBUG,
//     reconcile skipped a stale object: a clean delete meets it too.
//   - The status a Reconciler returns is applied to the status subresource
//     with server-side apply, under Settings.Name, forced, and only when it
//     differs from the object's by JSON, whether or not Reconcile returned
//     an error. A nil status leaves it alone. A Kind's status is never
//     applied.
//   - An error retries the object with a backoff of its own, from
//     RetryBaseDelay doubling to RetryMaxDelay, and at most 10 retries a
//     second overall, bursting to 100. Result.After reconciles it again
//     after that long. Otherwise it waits for a change to it, or to a
//     resource it owns, or for the resync. A change, or a reconcile that
//     succeeds, replaces a pending After or backoff, so no reconcile fires
//     for a wait that a change already ended. A failed decode, status apply
//     or finalizer add or remove is an error like Reconcile's own. No error
//     ends the Service.
//   - A change never waits behind a backlog: the work queue hands out the
//     keys that changes queued before those of a cold start or a resync
//     (see The work queue).
//   - The decode comes before the finalizer: an object that can't be
//     decoded gets no finalizer, and a deleting one that can't be decoded
//     keeps it, its error naming the object and the field once per
//     backoff. A deleting object that needs nothing (no Finalize, or its
//     finalizer already removed) is left alone without a decode.
//   - A panic in a Reconciler or a finalizer's f is recovered and recorded,
//     and never retried: the object is reconciled again only once it, or
//     something it owns, changes, at the resync, or under a new leader. A
//     panicking f keeps the object's finalizer.
//   - A Finalize's finalizer is added with server-side apply before the
//     first reconcile; once the object is being deleted, f runs in place of
//     the Reconciler, and the finalizer is removed once f returns nil.
//   - On shutdown (Serve's context done), the controller stops taking keys,
//     lets the reconciles in flight finish, leaves its backlog for the next
//     leader, releases the Lease, stops its informers, and Serve returns
//     nil. When Shutdown's context ends first, the reconciles in flight and
//     the Lease's release are cancelled, the reconciles waited for, and
//     Shutdown returns an error wrapping the context's, never waiting on a
//     slow API server. A lost Lease stops taking keys, cancels the
//     reconciles in flight, and Serve returns ErrLostLeadership. No
//     goroutine outlives Serve.
//   - The controller never installs its CRD: that would give its
//     ServiceAccount write access to every CRD in the cluster, and a CRD
//     outlives the controller's pods. Serve fails, naming the resource,
//     when the resource isn't served.
//   - Nothing reads the environment, the disk or the network but through
//     the Host, and nothing reads or sets a global: client-go's own records
//     reach s.Telemetry's LoggerProvider through the logger the controller
//     puts in their context, and its work queue's metrics come through a
//     provider of the controller's own.
//
// # The work queue
//
// The work queue is client-go's (workqueue.Typed) with an order of its
// own: client-go v0.37.2 has no priority queue, and Typed takes the order
// it hands keys out in from a workqueue.Queue in its config, calling that
// Queue's Touch when a waiting key is added again, where a key moves up.
// So one worker per key, the folding of adds, shutdown and the metrics are
// client-go's, and the order is the controller's. The queue promises:
//
//   - Two priorities. A key goes in at normal priority when a change
//     queues it: an update of the object that differs from what the cache
//     held in anything the controller reads (its generation, labels,
//     annotations, deletion, owner references or finalizers other than the
//     controller's own; anything at all, for a kind that keeps no
//     generation), its creation or deletion, or any change, creation or
//     deletion of an object it Owns. It goes in at low priority when the
//     initial list queues it, a resync, or a status another wrote. A relist
//     (a watch expired, listed again) queues only what changed: an object
//     it finds as the cache held it queues nothing.
//   - A worker takes a normal key while one waits, and a low key only when
//     none does, or once the oldest low key has waited
//     Settings.LowPriorityMaxWait (from the term's start at the earliest):
//     then every other key a worker takes is a low one, until no low key
//     has waited that long, so a steady stream of changes can't hold the
//     backlog back forever, nor the backlog a change by more than a key.
//     At normal priority namespaces take turns: each take hands
//     out the key that has waited longest in the namespace whose turn it
//     is, and that namespace's next turn comes after every other namespace
//     with a normal key waiting has had one (a cluster-scoped resource's
//     keys are all of one), so a burst of changes in one namespace holds
//     back a change in another by one key a namespace, not by the burst.
//     Within a namespace, and at low priority, first in, first out. A
//     change to an object whose key waits at low moves it up, once, to the
//     back of its namespace's normal keys.
//   - A key waits at most once: a change to an object whose key waits
//     queues nothing more. A key is never on two workers: a change while
//     its object is reconciled queues it again once the reconcile ends, at
//     the highest priority of the changes meanwhile.
//   - A retry after an error, Result.After, and the wait to read its own
//     write come back after their wait, which no priority shortens or
//     lengthens, at the priority the key was taken at. A change during the
//     wait ends it, and queues the key at the higher of the two.
//   - A new leader's backlog is low priority: when a replica takes the
//     Lease (or a shard), the keys that have waited at normal priority for
//     longer than LeaseDuration, changes the former leader had to handle,
//     move down among the low keys in the order they came; the changes
//     since then, which the former leader may never have taken, stay ahead.
//   - Shutdown and a lost Lease stop the workers taking keys: the backlog,
//     at both priorities, is left for the next leader. The queue is shut
//     down with ShutDown, never drained, and no goroutine of it outlives
//     Serve.
//   - A low key waits at most Settings.LowPriorityMaxWait behind normal
//     keys, then its turn among the low keys aged up, which have every
//     other take: with changes faster than the workers reconcile them,
//     the backlog is reconciled at half the workers' pace at least.
//
// # How one key is reconciled
//
// Serve (serve.go) runs these steps. informers_served.go checks that the
// resources are served (step 1), and goes on checking while the
// controller runs; lease.go runs steps 2 to 5 on the one Lease, shards.go
// on a Lease of each shard, with kube/internal/shard's ranges, plan and
// filtered list and watch, each starting its informers and waiting for
// their caches through informers.go's informing (those of what it Owns
// and reads are the Client's shared informers, kube/internal/cache).
// kube/internal/elector campaigns for each Lease and renews it; term.go is
// one term of leading, whose workers worker.go starts beside its worker
// loop:
//
//  1. Check that the resource and each resource it Owns or reads are
//     served: list each once.
//  2. Start the informers: the resources it reads, shared with the
//     Client's other controllers (kube/internal/cache), first; then the resource's
//     own, with an index for each References, and a metadata informer for
//     each it Owns, shared too, limited to Settings.Namespace; one it Owns
//     and reads is cached whole, as the resource's objects are. The resource's cache
//     keeps each object as its metadata, decoded, and the JSON of the
//     rest, without managedFields but for a 16-byte digest of each entry
//     (kube/internal/cache), decoded into that form straight from the API server's
//     JSON, a watch's stream framed a line at a time (its objects.go and
//     framing.go); an owned resource's keeps each object's namespace,
//     name, resourceVersion, controller owner reference, and a 16-byte
//     digest of each managedFields entry.
//  3. Wait for the caches to sync; Synced is healthy from then.
//  4. Campaign for the Lease. Every replica runs steps 1 to 4 and keeps
//     its caches warm; the holder runs Settings.Workers workers.
//  5. Reconcile: each worker takes a key from the work queue, which never
//     hands one key to two workers at once and hands out the keys changes
//     queued first, and reconciles it.
//
// A key is reconciled in these steps, which worker.go's step comments
// name:
//
//  1. Look it up in the cache. An object that is gone needs nothing: its
//     owned resources are garbage collected through their owner
//     references. Read your own writes: a cache older than the key's last
//     write of the controller's own holds the key back until the write's
//     watch event brings it (at most 30s), since reconciling the older
//     object would apply again what the write did.
//  2. Decode it into a new Object, the end user's own copy, decoded from
//     the cached JSON as encoding/json would: nothing the Reconciler does
//     changes the cache.
//     An object that can't be decoded is retried with backoff, its error
//     naming the object and the field, and gets no finalizer. A status
//     that can't be decoded, for whatever reason (a field of the wrong
//     type, a time or a quantity that doesn't parse, any type's own
//     UnmarshalJSON), written by an older version of the type or through
//     a looser CRD, is the controller's own output, which only its status
//     apply can mend: the reconcile is handed the object with a zero
//     status, with a WARN record naming the field, and the status it
//     returns is applied, even the zero status.
//  3. Handle the finalizer, when Finalize is given: add it before the
//     first reconcile; once the object is being deleted, call Finalize
//     instead of the Reconciler, and remove the finalizer once it returns
//     nil.
//  4. Leave an object that is being deleted alone, when it has no
//     finalizer of the controller's (no Finalize, or Finalize has run).
//  5. Call the Reconciler, with a context that carries the reconcile's
//     span and is cancelled only when Shutdown's context ends or the Lease
//     is lost.
//  6. Apply the status, when Result's status isn't nil and differs from
//     the object's, whether or not the Reconciler returned an error: a
//     server-side apply of the status subresource, forced, with
//     Settings.Name as field manager, conditioned on the object's UID and
//     resourceVersion.
//  7. Settle the key: an error retries it after a backoff of its own, from
//     RetryBaseDelay doubling to RetryMaxDelay; Result.After reconciles it
//     again after that long, unless it changes first; a panic is recovered,
//     recorded and never retried; otherwise the key waits for a change to
//     the object or to a resource it owns, or the resync. A write refused
//     because the cache's object was deleted or replaced (a 404, a 409, or
//     another UID) is dropped: the watch event that says so queues the key
//     again.
//
// A key's walk, by file: a watch event reaches the event handlers
// (handlers.go), which queue its key on the term's work queue unless the
// event is a reconcile's own write (ownwrites.go tells); a key is queued,
// whatever queues it, by queue.go, over kube/internal/priorityqueue, and
// waits there too. A worker (worker.go) takes it, looks it up in the
// cache, whose objects kube/internal/cache keeps, holding it back for its own last
// write (ownwrites.go), decodes it (decode.go), handles the finalizer and
// calls the Reconciler (worker.go), applies the status and the
// finalizer (apply.go, through kube/internal/cache's objects.go, which reads the answer's
// resourceVersion alone), each write sent only under the term's proof of
// the Lease (term.go), and settles the key (worker.go, with queue.go's
// waits and backoff).
//
// A reconcile's own writes are its outcome, so their watch events queue
// nothing, and an object settles in one reconcile: its finalizer and its
// status, unless the object the event brings changed in anything else
// since the reconcile's (its generation, labels, annotations, owner
// references, others' finalizers, a deletion begun, or any managedFields
// entry but the controller's own applies: a relist can fold another's
// change into the event of the controller's write, and a Kind such as a
// ConfigMap bumps no generation), and the Reconciler's
// writes to the resources it Owns, made through the Client's transport
// (a clientset built from Client.Config) with the reconcile's context,
// which record the resourceVersion each answer carries. Such a write's
// event queues nothing only when the write made that version, and
// nobody else changed the object since the version before: the writer's
// managedFields entry changed in it and no other entry did (or the write
// created the object). A write that changed nothing is answered with the stored
// object, whose version can be another client's change the informer
// hasn't brought yet: that change's event still queues the owner. A write
// made any other way reconciles its owner once more, as anyone's change
// does, and so does a write of the Reconciler's within a second of its
// last one to fields it already owned (the API server keeps an entry's
// time to the second). A version a relist brought (a watch expired, or the
// API server restarted, and the informer listed again) is never taken for
// an own write, even at the very version a write answered: the versions
// between the cache's and it, which the cache never saw, can be another
// manager's writes whose entry a second write within the same second left
// byte-equal (kube-controller-manager writing a Deployment's status twice).
// So after a watch gap, a key whose write the relist folded in is
// reconciled once more: one reconcile more, never one less. ownwrites.go
// holds this, and reading the reconcile's own last writes (step 1).
//
// # Events
//
// A Recorder writes the Events a controller's reconciles record, as
// events.k8s.io/v1 Events, through the Client's transport, reported by the
// controller and this replica. It is a humus.Service, returned from Init
// beside the Controller; a reconcile records with its own context:
//
//	events.Record(ctx, kube.Event{
//		Regarding: kube.Ref(&obj), Type: kube.Normal,
//		Reason: "DeploymentCreated", Action: "Create", Note: "Created Deployment " + name,
//	})
//
// What it promises:
//
//   - Record never blocks: Serve writes the Events one at a time, in order,
//     and at most 1,000 wait; one more is dropped.
//   - Repeats of an Event within 6 minutes of the last are one Event with a
//     series, whose count and lastObservedTime each repeat patches, as
//     client-go's recorder does. No copy of an Event is kept once written:
//     only a digest and the counts of each seen in the last 6 minutes.
//   - What a retry can mend (no answer, a 429, a 5xx) is tried again for up
//     to a minute; a 4xx drops the Event.
//   - An Event is written only under the proof of the Lease its context
//     carries, a reconcile's, and its write ends at the proof's deadline,
//     as the controller's own writes do: one whose proof ran out is
//     dropped, never written late. The proof ends with the term of
//     leading, at the latest when the Lease is released or lost.
//   - Shutdown writes what still waits, within its context.
//
// A dropped Event is a WARN record, dropped an Event, saying why.
//
// # What client-go still reads from the process
//
// client-go and apimachinery read a few variables of the real process's
// environment themselves, with os.Getenv, on first use; no Host can close
// these, and kube sets none of them:
//
//   - KUBE_FEATURE_<name>, for each of client-go's feature gates (its
//     features package), such as KUBE_FEATURE_WatchListClient;
//   - KUBE_CLIENT_BACKOFF_BASE and KUBE_CLIENT_BACKOFF_DURATION, the REST
//     client's backoff on a 5xx or a 429 (rest.NewRESTClient);
//   - KUBE_CACHE_MUTATION_DETECTOR, which makes every informer's cache
//     check that nothing changed its objects (tools/cache);
//   - KUBE_WATCHLIST_INCONSISTENCY_DETECTOR, which compares a watch list's
//     result with a list's (util/consistencydetector);
//   - KUBE_PATCH_CONVERSION_DETECTOR, which checks apimachinery's
//     unstructured converter against a round trip through JSON
//     (runtime.DefaultUnstructuredConverter).
//
// The transport kube builds reads none of client-go's transport variables
// (DISABLE_HTTP2, HTTP2_READ_IDLE_TIMEOUT_SECONDS,
// HTTP2_PING_TIMEOUT_SECONDS, HTTPS_PROXY, NO_PROXY), and nothing calls
// rest.InClusterConfig, which reads KUBERNETES_SERVICE_HOST.
//
// # What a Controller records
//
// Everything comes from s.Telemetry, under the instrumentation scope
// github.com/z5labs/humus/kube; nothing reads or sets an OpenTelemetry
// global.
//
//   - Every reconcile is a root span, reconcile <Kind>, with
//     k8s.namespace.name (none for a cluster-scoped object) and
//     humus.kube.object.name. The Reconciler's context carries it, so its
//     own API calls are its children. An error sets its status to Error; a
//     panic adds an exception event, with exception.type,
//     exception.message and exception.stacktrace, and sets Error.
//   - Every API request through the Client is an otelhttp client span, and
//     is measured by otelhttp's client instruments, except a watch, which
//     lasts as long as its informer.
//   - Every record a controller writes names it,
//     humus.kube.controller.name (Settings.Name), and its resource,
//     humus.kube.resource, as kubectl names it ("configmaps",
//     "memcacheds.cache.example.com"). An informer the Client's
//     controllers share is the Client's: its records name its resource,
//     and no controller.
//   - A failed reconcile is a WARN record, reconcile failed, in the span's
//     context, with the object, the error and failures. A failed decode,
//     status apply or finalizer add or remove is a failed reconcile, named
//     in the record. A key that keeps failing is recorded as client-go
//     records its own repeated errors: its first failure at once, and each
//     later one once a wait has passed since its last record, a wait that
//     doubles from a second with each record up to five minutes; failures
//     counts those since the record before, itself included. Every failure
//     is still a span and a reconcile.duration. A key that settles (a
//     reconcile without an error, a panic, its object gone) starts again.
//     A panic is one ERROR record, reconcile panicked, with the object and
//     the three exception attributes. A panic isn't retried.
//   - client-go's own records (the reflector's, the cache sync's, leader
//     election's) reach the LoggerProvider through the logger the
//     controller puts in their context, never klog's global logger: up to
//     its V(2) for a LoggerProvider that takes every severity, and, for
//     one that chooses by severity (the telemetry package's, by its
//     Verbosity), as far as it takes them.
//
// The controller has eight instruments of its own, each with
// humus.kube.controller.name (Settings.Name) on every data point, and
// humus.kube.controller.shard with Settings.Shards above 1, and nothing
// per object; their Prometheus names are last:
//
//	humus.kube.controller.queue.depth                            Int64UpDownCounter  {object}  humus_kube_controller_queue_depth
//	humus.kube.controller.queue.adds                             Int64Counter        {object}  humus_kube_controller_queue_adds_total
//	humus.kube.controller.queue.duration                         Float64Histogram    s         humus_kube_controller_queue_duration_seconds
//	humus.kube.controller.queue.oldest_wait                      Float64Gauge        s         humus_kube_controller_queue_oldest_wait_seconds
//	humus.kube.controller.reconcile.duration                     Float64Histogram    s         humus_kube_controller_reconcile_duration_seconds
//	humus.kube.controller.reconcile.change_latency               Float64Histogram    s         humus_kube_controller_reconcile_change_latency_seconds
//	humus.kube.controller.reconcile.unfinished_duration          Float64Gauge        s         humus_kube_controller_reconcile_unfinished_duration_seconds
//	humus.kube.controller.reconcile.longest_unfinished_duration  Float64Gauge        s         humus_kube_controller_reconcile_longest_unfinished_duration_seconds
//
// A Recorder has one instrument, with humus.kube.controller.name (its
// reporting controller): humus.kube.controller.events, an Int64Counter
// of {event}, humus_kube_controller_events_total, which counts each Event
// recorded once its fate is known, by humus.kube.controller.event.outcome:
// created, counted (a repeat written into its series) or dropped, and
// for a drop humus.kube.controller.event.dropped_because: invalid,
// not_leading, backlog_full, refused, gave_up or shutdown.
//
// queue.depth is +1 when a key is added and -1 when a worker takes it;
// queue.adds counts a key unless it is already waiting; queue.duration is
// the time from a key's add to its take, so the wait of Result.After or of
// a backoff isn't counted; reconcile.duration is the reconcile span's time,
// with humus.kube.controller.reconcile.outcome: success, error (the key is
// retried with backoff) or panic (recovered, and not retried). The two
// unfinished gauges are set every 500ms by the work queue while it runs.
// The proposal defines those six; the other two measure the latency a
// change sees:
//
//   - queue.oldest_wait is, for each priority,
//     humus.kube.controller.queue.priority (low or normal), how long the
//     key that has waited longest at it has waited, from its add or from
//     when this replica took the Lease, if later; 0 when none waits, and on
//     a standby. The work queue sets it every 500ms, and 0 when it shuts
//     down. Its normal point is how late the changes are; its low point
//     is how far the backlog is.
//   - reconcile.change_latency is the time from a change's write to the end
//     of the first reconcile after it that succeeds (or finds the object
//     gone): what a user's kubectl apply waits. The API server stamps a
//     write to the second only (the newest time in its managedFields, or
//     its creation or deletion), and its watch event can't come before the
//     write, so the write is taken as the end of the stamped second, or as
//     the event's arrival if that is earlier: it reads at most a second
//     less than the truth, and, when the watch is prompt, less only by the
//     watch's delay. A key no change queued, a cold start's or a resync's,
//     records nothing, and neither does a failed reconcile: the change
//     waits for the retry.
//
// The three histograms' boundaries are OpenTelemetry's for a duration in
// seconds: 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5,
// 5, 7.5, 10. The work queue's work duration and retries aren't recorded:
// the first is reconcile.duration without its outcome, and the queue would
// count every Result.After as a retry. A standby records them too: its
// queue.depth holds a key for every object, its reconcile.duration records
// nothing and its gauges read 0 until it takes the Lease, so read
// queue.depth per replica.
//
// # The RBAC a Controller needs
//
// Every resource and verb a Controller uses is declared when it is built,
// so its rights are derived, not written: MarshalRBAC returns the RBAC
// manifest of an App's Services (its Controllers and Recorders, and those
// a Service such as webhook.Service.Before's holds) as YAML kubectl
// applies unchanged, and a golden test writes it to deploy/rbac.yaml, as
// the CRD's golden test writes the CRD. What the Reconciler writes itself,
// through a clientset, is the one thing the rest can't show: Writes
// declares it, beside Owns. The rules derived are:
//
//   - list and watch on its resource; patch on it with Finalize, and on
//     its status subresource for a Resource (a Kind's status isn't
//     applied). The proposal lists get too: the controller reads objects
//     from its cache, and never gets one, so it isn't derived;
//   - list and watch on each owned resource (Owns, OwnsSelected), and on
//     each resource it reads (Reads, Related, References) in the Reader's
//     Selector's namespace;
//   - each Writes' verbs, Apply as create and patch, since an apply that
//     creates an object is authorized as a create too;
//   - get, create and update on its Lease (its shards' Leases, with
//     Settings.Shards above 1), and list on Leases, in the Lease's
//     namespace;
//   - for a Recorder, create and patch on events in the events.k8s.io
//     group: it patches an Event to count a repeat.
//
// They are granted where they are needed and no wider: in
// Settings.Namespace (a Role), or in every namespace when it is "" (a
// ClusterRole); the Leases in LeaderElection.Namespace. Each rule is
// commented with what declared each of its verbs, so a change of rights
// reads in review as the change of code that made it. Package
// kube/internal/rbac merges, orders and writes them, knowing nothing of
// the controller; kube/clustertest's Cluster.CheckRights proves them in a
// whole-App test, from the API server's audit log: a request refused with
// 403, or a rule never used, fails it.
package kube
