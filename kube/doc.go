// Package kube writes Kubernetes controllers as humus Services, on client-go
// alone: no controller-runtime, no code generation, no globals.
package kube
