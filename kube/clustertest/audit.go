package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// The audit log's files, in the control plane's folder.
const (
	auditPolicyFile = "audit-policy.yaml"
	auditLogFile    = "audit.log"
)

// auditPolicy records every write at Metadata level, once its response is
// complete, and nothing else: no reads, no RequestReceived or
// ResponseStarted stage, no Panic stage.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

// An AuditEvent is one line of kube-apiserver's audit log: one write
// (create, update, patch, delete or deletecollection) by anyone, the
// control plane's own components included, recorded at Metadata level
// when its response was complete.
type AuditEvent struct {
	AuditID    string
	Verb       string // create, update, patch, delete or deletecollection
	User       string // the authenticated username, e.g. system:serviceaccount:NS:NAME
	UserAgent  string
	RequestURI string

	// The object written: its API group ("" for the core group), version,
	// resource (plural, lowercase), subresource, namespace and name. Name
	// is empty for a deletecollection, and may be for a create with
	// generateName.
	APIGroup    string
	APIVersion  string
	Resource    string
	Subresource string
	Namespace   string
	Name        string

	Code int // the response's HTTP status code

	// RequestReceived is when kube-apiserver received the request and
	// StageTime when its response was complete, both to the microsecond.
	RequestReceived time.Time
	StageTime       time.Time
}

// auditLine is the part of an audit.k8s.io/v1 Event that AuditEvent
// keeps.
type auditLine struct {
	Kind      string `json:"kind"`
	AuditID   string `json:"auditID"`
	URI       string `json:"requestURI"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	StageTime       time.Time `json:"stageTimestamp"`
}

// eventStart begins every JSON line of the audit log.
var eventStart = []byte(`{"kind":"Event"`)

// Audit returns the events kube-apiserver has written to its audit log so
// far, in the order written: every write to the API, the control plane's
// own included, by every kube-apiserver the control plane ran (the log
// survives KillAPIServer, StopAPIServer and their starts). A write's
// event is written before kube-apiserver's handler of it returns, but it
// may reach the file a moment after the client has the response: to wait
// for one, use AwaitAudit. A last line still being written is left out,
// and so is a line a killed kube-apiserver left unfinished. On an existing
// cluster (FromKubeconfig), whose audit log this package can't read, it
// fails t saying so, and so does AwaitAudit.
func (c *Cluster) Audit(t testing.TB) []AuditEvent {
	t.Helper()
	c.ownsProcesses(t, "the audit log")
	events, err := c.audit.read(filepath.Join(c.dir, auditLogFile))
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(events)
}

// AwaitAudit polls the audit log until an event satisfies match, and
// returns the first that does; it fails t if none does within within.
func (c *Cluster) AwaitAudit(t testing.TB, within time.Duration, match func(AuditEvent) bool) AuditEvent {
	t.Helper()
	var found AuditEvent
	Eventually(t, within, func(context.Context) error {
		events := c.Audit(t)
		i := slices.IndexFunc(events, match)
		if i < 0 {
			return fmt.Errorf("clustertest: no matching audit event among %d", len(events))
		}
		found = events[i]
		return nil
	})
	return found
}

// Writes is the events by user, in order, or all of them when user is
// "". Every event is a write: the audit policy records nothing else.
func Writes(events []AuditEvent, user string) []AuditEvent {
	var out []AuditEvent
	for _, e := range events {
		if user == "" || e.User == user {
			out = append(out, e)
		}
	}
	return out
}

// An auditReader reads an audit log as it grows: kube-apiserver only
// appends to it, so each read parses only the lines completed since the
// last.
type auditReader struct {
	mu     sync.Mutex
	offset int64        // where the first line not yet parsed begins
	events []AuditEvent // parsed so far; never modified, only appended to
}

// read returns every event of the log at path so far. The caller mustn't
// modify the slice's elements. A missing file has no events.
func (r *auditReader) read(path string) ([]AuditEvent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("clustertest: reading the audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(r.offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("clustertest: reading the audit log: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("clustertest: reading the audit log: %w", err)
	}
	complete := bytes.LastIndexByte(data, '\n') + 1
	r.events = append(r.events, parseAudit(data[:complete])...)
	r.offset += int64(complete)
	return r.events[:len(r.events):len(r.events)], nil
}

// parseAudit parses the complete lines of an audit log. The part after
// the last newline is a line still being written, and is left out. A line
// that doesn't parse was left unfinished by a killed kube-apiserver; when
// the next one appended its first event to it, that event is kept.
func parseAudit(data []byte) []AuditEvent {
	var events []AuditEvent
	for {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			return events
		}
		data = rest
		var l auditLine
		if err := json.Unmarshal(line, &l); err != nil {
			i := bytes.LastIndex(line, eventStart)
			if i <= 0 || json.Unmarshal(line[i:], &l) != nil {
				continue
			}
		}
		if l.Kind != "Event" {
			continue
		}
		e := AuditEvent{
			AuditID:         l.AuditID,
			Verb:            l.Verb,
			User:            l.User.Username,
			UserAgent:       l.UserAgent,
			RequestURI:      l.URI,
			RequestReceived: l.RequestReceived,
			StageTime:       l.StageTime,
		}
		if r := l.ObjectRef; r != nil {
			e.APIGroup, e.APIVersion, e.Resource, e.Subresource = r.APIGroup, r.APIVersion, r.Resource, r.Subresource
			e.Namespace, e.Name = r.Namespace, r.Name
		}
		if l.ResponseStatus != nil {
			e.Code = l.ResponseStatus.Code
		}
		events = append(events, e)
	}
}
