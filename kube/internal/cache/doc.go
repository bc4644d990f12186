// Package cache keeps the objects kube's controllers read: the informers a
// Client's controllers share, the forms their objects are kept in, and the
// wire codecs that decode the API server's JSON straight into those forms.
//
// What it promises:
//
//   - One informer for each resource, namespace and selector (Key), however
//     many controllers, owners and Readers of one Client declare it (Shared,
//     Entry): one list and one watch on the API server, one copy of each
//     object in the heap. An informer runs from its first user's Join to
//     its last user's Leave; a user that joins a running informer is handed
//     every object it holds as its initial list.
//   - An object is kept in the smallest form its users need, chosen when its
//     informer starts: Owned (what maps a change to its owner: namespace,
//     name, resourceVersion, controller reference) for a resource only
//     owned; Object (its metadata without managedFields, and the JSON of
//     the rest, decoded by each reader into a copy of its own) for one read
//     whole; an Object trimmed to what one Go type decodes (Trim) for one
//     read only through that type. What is cached is never written.
//   - Each kept object carries a digest of each of its managedFields
//     entries (Digest), which tells whose write made a version, and
//     whether a list brought it rather than a watch event (Listed): a
//     version a relist brought is never taken for anyone's own write.
//   - Objects (the resource's list, watch and apply, on the API server's
//     JSON) decodes a watch event or a list in one pass, framed a line at a
//     time (the framing in framing.go), never into nested maps.
//
// What it may import: client-go, apimachinery, klog and logr, and
// kube/internal/shard. It sits at the bottom of kube's engine: it is handed
// its clients (Clients) and the logger each informer runs with (NewShared),
// and imports nothing of kube's face or of the rest of the engine, which
// import it; the compiler refuses the cycle either would make.
package cache
