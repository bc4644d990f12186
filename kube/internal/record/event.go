package record

import corev1 "k8s.io/api/core/v1"

// Event is kube.Event, as the Recorder writes it.
type Event struct {
	Regarding corev1.ObjectReference
	Related   *corev1.ObjectReference
	Type      EventType
	Reason    string
	Action    string
	Note      string
}

// EventType is kube.EventType.
type EventType string

// The two types the API server takes, as kube's.
const (
	Normal  EventType = "Normal"
	Warning EventType = "Warning"
)
