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
// complete; and the reads (get, list and watch) of ServiceAccounts outside
// kube-system, such as PodHost's, for CheckRights: once their response is
// complete, and a watch also once it has started, so a watch still open
// is seen. Nothing else: no other reads, no RequestReceived or Panic
// stage. The control plane's own components read as users of their own,
// not as ServiceAccounts, so their many lists and watches aren't logged.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  omitStages: [ResponseStarted]
- level: None
  userGroups: ["system:serviceaccounts:kube-system"]
- level: Metadata
  verbs: [get, list, watch]
  userGroups: ["system:serviceaccounts"]
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

// auditWrites are the verbs of the writes the audit policy records of
// everyone.
var auditWrites = []string{"create", "update", "patch", "delete", "deletecollection"}

// An auditRecord is one line of the audit log: a write's, or a
// ServiceAccount's read's, at one stage.
type auditRecord struct {
	AuditEvent
	stage   string // ResponseComplete, or ResponseStarted for a watch
	message string // the response's Status's, for an error
}

// auditLine is the part of an audit.k8s.io/v1 Event that auditRecord
// keeps.
type auditLine struct {
	Kind      string `json:"kind"`
	Stage     string `json:"stage"`
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
		Code    int    `json:"code"`
		Message string `json:"message"`
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
	var events []AuditEvent
	for _, r := range c.auditRecords(t) {
		if slices.Contains(auditWrites, r.Verb) {
			events = append(events, r.AuditEvent)
		}
	}
	return events
}

// auditRecords returns every line of the audit log so far, in the order
// written; it fails t as Audit does.
func (c *Cluster) auditRecords(t testing.TB) []auditRecord {
	t.Helper()
	c.ownsProcesses(t, "the audit log")
	records, err := c.audit.read(filepath.Join(c.dir, auditLogFile))
	if err != nil {
		t.Fatal(err)
	}
	return records
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
	mu      sync.Mutex
	offset  int64         // where the first line not yet parsed begins
	records []auditRecord // parsed so far; never modified, only appended to
}

// read returns every event of the log at path so far. The caller mustn't
// modify the slice's elements. A missing file has no events.
func (r *auditReader) read(path string) ([]auditRecord, error) {
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
	r.records = append(r.records, parseAudit(data[:complete])...)
	r.offset += int64(complete)
	return r.records[:len(r.records):len(r.records)], nil
}

// parseAudit parses the complete lines of an audit log. The part after
// the last newline is a line still being written, and is left out. A line
// that doesn't parse was left unfinished by a killed kube-apiserver; when
// the next one appended its first event to it, that event is kept.
func parseAudit(data []byte) []auditRecord {
	var records []auditRecord
	for {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			return records
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
		e := auditRecord{stage: l.Stage, AuditEvent: AuditEvent{
			AuditID:         l.AuditID,
			Verb:            l.Verb,
			User:            l.User.Username,
			UserAgent:       l.UserAgent,
			RequestURI:      l.URI,
			RequestReceived: l.RequestReceived,
			StageTime:       l.StageTime,
		}}
		if r := l.ObjectRef; r != nil {
			e.APIGroup, e.APIVersion, e.Resource, e.Subresource = r.APIGroup, r.APIVersion, r.Resource, r.Subresource
			e.Namespace, e.Name = r.Namespace, r.Name
		}
		if l.ResponseStatus != nil {
			e.Code, e.message = l.ResponseStatus.Code, l.ResponseStatus.Message
		}
		records = append(records, e)
	}
}
