// Package review answers the API server's ConversionReviews: the
// conversion webhook's http.Handler that kube's Versions.Handler returns.
// Package kube converts one object (Converter, through the hub, with what a
// version can't hold kept in an annotation); this package reads the
// review, converts its objects with it, and answers.
//
// What it promises:
//
//   - A review costs what its largest object and its answer cost, not a
//     multiple of its count: at most MaxBytes of body is read, its objects
//     are decoded one at a time into one reused buffer and converted as
//     they come, room is never made for the count a caller sends, and the
//     answer is bounded at twice MaxBytes.
//   - The first failure fails the review (the API server then fails its
//     request), with the object's name and index; a panic anywhere in a
//     conversion is a Panic, recovered, never a dropped connection.
//   - What a review names is clipped before it reaches a span, a record or
//     a message, and a version the resource doesn't have is recorded as
//     "", so no caller can grow the telemetry without bound: the webhook's
//     port answers anyone who reaches it.
//   - Each review is a span and two instruments, and its failures are
//     recorded at the slowing rate a reconcile's are (control.FailureLog).
//
// What it may import: kube/internal/control, for the telemetry's shared
// names and the failure log; OpenTelemetry's API; the core's humus
// package. Never package kube.
package review
