// Package record writes the Events a controller's reconciles record:
// kube.Recorder's engine. kube's Recorder doc says what it promises the
// user; here is how.
//
//   - Record never blocks: it checks the Event as the API server would,
//     and queues it on a backlog of at most MaxBacklog, under the proof of
//     the Lease its context carries (control.ProofOf); Serve writes the
//     backlog one Event at a time, in order.
//   - Repeats are one series: an Event is known by a 16-byte digest of
//     what makes it the same (eventDigest); of each seen in the last
//     SeriesWindow only its times and counts are kept, of at most
//     MaxSeries, the oldest forgotten first. Repeats recorded while a
//     write of theirs waits ride on that write.
//   - A write is begun only while its proof holds, ends at the proof's
//     deadline, and holds the proof's term open until it is answered, so
//     no Event is written after its Lease is handed back. What a retry
//     can mend is retried with backoff for a minute; the rest is dropped,
//     counted and recorded at a slowing rate.
//
// What it may import: kube/internal/control, for the proof of the Lease
// and the telemetry's shared names; client-go's events client; the core's
// humus package. Never package kube: kube.Event reaches it as Event, a
// plain copy.
package record
