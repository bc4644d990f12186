// Package control is kube's control loop: everything a Controller does
// once it is built, from the watch event of one of its objects to the
// status it applies. Package kube is its face: the public types, their
// checks and docs, and the wiring NewController does (New, from a
// Config); a user never reads this package.
//
// What it promises (package kube's doc says it to the user, step by step):
//
//   - One doorway to the work queue (queueNow, queueUnlessOwn): every
//     trigger, the resource's own events, an owned object's (ownerKeys), a
//     related object's by a mapping or an index (RelatedKeys), reduces to
//     a key, a priority and the time of its change, queued on each term's
//     Work; a key is reconciled by one worker at a time, and an event that
//     comes while it is in flight is held and queued once it ends.
//   - One writer at a time: workers run only inside a term of leading
//     (term.go), the one Lease's (lease.go) or each shard's (shards.go).
//     Every write of the controller's own, its status, its finalizer and
//     a Recorder's Events, carries the term's proof (Proof) and is aborted
//     at its deadline: the status and the finalizer are handed it by the
//     worker, explicitly; a Recorder, which only the end user's context
//     reaches, finds it there (ProofOf). A term that ends, lost or
//     released, stops taking keys, waits for its reconciles and the writes
//     they began, and only then hands its Lease back.
//   - Own writes are no news: the events of the controller's own writes
//     (WrittenVersions for its objects, OwnedWrites for what it owns or
//     reads, recorded by the Client's transport) queue nothing, and a
//     Reader's read with a reconcile's context waits for that reconcile's
//     writes (Source.AwaitOwnWrite), up to 5 seconds (ErrCacheBehind).
//   - A reconcile is bounded (ReconcileTimeout), its panic recovered and
//     not retried, its error backed off, its After kept; Serve ends on a
//     resource that stops being served, a Lease it may not write, or
//     ErrLostLeadership, and Shutdown finishes what is in flight and
//     leaves the backlog.
//   - Every reconcile and queue is measured, traced and logged through the
//     providers it is handed (telemetry.go), never global ones.
//
// Its unit tests run a Controller on client-go's fakes
// (kube/internal/fakeapi) through one fixture, fixture_test.go's
// newTestController, over a Type of a plain Go struct; package kube's
// tests keep what goes through the public API. The package's files tie
// into no cycle of more than 8 (tools/filecycles, in make lint): the
// Controller's field types each live in a file that ties back to none of
// its methods' files.
//
// What it may import: kube/internal/cache (the informers it runs on),
// elector, shard, priorityqueue and transport, client-go and apimachinery,
// and the core's humus and health packages. Never package kube: it knows
// the user's Go types only through Type and Decoded, which kube's generic
// resource and kind types implement, and the user's settings as Settings,
// a plain copy of kube.Settings.
package control
