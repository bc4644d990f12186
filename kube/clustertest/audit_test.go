package clustertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two lines of a real audit log, as kube-apiserver v1.37.2 writes them.
const (
	auditCreate = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"05dfd500-ea34-48e9-9b89-a16aab9015a0","stage":"ResponseComplete","requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases","verb":"create","user":{"username":"system:apiserver","uid":"474e9b3d-305c-46cb-bb67-db10dbe961dd","groups":["system:authenticated","system:masters"]},"sourceIPs":["127.0.0.1"],"userAgent":"kube-apiserver/v0.0.0 (linux/amd64) kubernetes/$Format","objectRef":{"resource":"leases","namespace":"kube-system","name":"apiserver-wlv32tlttr4jl3gtroqexyxapa","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","message":"namespaces \"kube-system\" not found","reason":"NotFound","details":{"name":"kube-system","kind":"namespaces"},"code":404},"requestReceivedTimestamp":"2026-12-03T12:26:44.965623Z","stageTimestamp":"2026-12-03T12:26:45.019604Z","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""}}`
	auditPatch  = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"3c57bf8d-119a-4722-9977-aa7c04638317","stage":"ResponseComplete","requestURI":"/apis/networking.k8s.io/v1/servicecidrs/kubernetes/status?fieldManager=kubernetes-service-cidr-controller\u0026force=true","verb":"patch","user":{"username":"system:apiserver","uid":"474e9b3d-305c-46cb-bb67-db10dbe961dd","groups":["system:authenticated","system:masters"]},"sourceIPs":["127.0.0.1"],"userAgent":"kube-apiserver/v0.0.0 (linux/amd64) kubernetes/$Format","objectRef":{"resource":"servicecidrs","name":"kubernetes","apiGroup":"networking.k8s.io","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-12-03T12:26:45.102841Z","stageTimestamp":"2026-12-03T12:26:45.121061Z","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""}}`
)

func TestParseAudit(t *testing.T) {
	want := []AuditEvent{
		{
			AuditID: "05dfd500-ea34-48e9-9b89-a16aab9015a0", Verb: "create", User: "system:apiserver",
			UserAgent: "kube-apiserver/v0.0.0 (linux/amd64) kubernetes/$Format", RequestURI: "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
			APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: "kube-system", Name: "apiserver-wlv32tlttr4jl3gtroqexyxapa",
			Code:            404,
			RequestReceived: time.Date(2026, 12, 3, 12, 26, 44, 965623000, time.UTC),
			StageTime:       time.Date(2026, 12, 3, 12, 26, 45, 19604000, time.UTC),
		},
		{
			AuditID: "3c57bf8d-119a-4722-9977-aa7c04638317", Verb: "patch", User: "system:apiserver",
			UserAgent: "kube-apiserver/v0.0.0 (linux/amd64) kubernetes/$Format", RequestURI: "/apis/networking.k8s.io/v1/servicecidrs/kubernetes/status?fieldManager=kubernetes-service-cidr-controller&force=true",
			APIGroup: "networking.k8s.io", APIVersion: "v1", Resource: "servicecidrs", Subresource: "status", Name: "kubernetes",
			Code:            200,
			RequestReceived: time.Date(2026, 12, 3, 12, 26, 45, 102841000, time.UTC),
			StageTime:       time.Date(2026, 12, 3, 12, 26, 45, 121061000, time.UTC),
		},
	}
	for _, tc := range []struct {
		name string
		log  string
		want []AuditEvent
	}{
		{"empty", "", nil},
		{"complete lines", auditCreate + "\n" + auditPatch + "\n", want},
		// Being written: the last line has no newline yet.
		{"a partial last line", auditCreate + "\n" + auditPatch[:100], want[:1]},
		{"a whole last line without its newline", auditCreate + "\n" + auditPatch, want[:1]},
		// A killed kube-apiserver's unfinished line, the next one's first
		// event appended to it.
		{"an unfinished line continued", auditCreate[:200] + auditPatch + "\n", want[1:]},
		{"an unfinished line ended", auditCreate[:200] + "\n" + auditPatch + "\n", want[1:]},
		{"a line that isn't an event", "{}\n" + auditPatch + "\n", want[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseAudit([]byte(tc.log))
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				if !got[i].RequestReceived.Equal(tc.want[i].RequestReceived) || !got[i].StageTime.Equal(tc.want[i].StageTime) {
					t.Errorf("event %d's times are %s and %s, want %s and %s", i,
						got[i].RequestReceived, got[i].StageTime, tc.want[i].RequestReceived, tc.want[i].StageTime)
				}
				g, w := got[i].AuditEvent, tc.want[i]
				g.RequestReceived, g.StageTime, w.RequestReceived, w.StageTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
				if g != w {
					t.Errorf("event %d is\n%+v, want\n%+v", i, g, w)
				}
			}
		})
	}
}

func TestAuditReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), auditLogFile)
	var r auditReader
	if events, err := r.read(path); err != nil || events != nil {
		t.Errorf("a missing log: %v, %v; want no events, no error", events, err)
	}
	// The log grows: a line, half of the next, the rest of it.
	log := auditCreate + "\n" + auditPatch + "\n"
	for _, tc := range []struct {
		size int
		want int
	}{
		{len(auditCreate) + 1, 1},
		{len(auditCreate) + 100, 1},
		{len(log), 2},
		{len(log), 2},
	} {
		if err := os.WriteFile(path, []byte(log[:tc.size]), 0o600); err != nil {
			t.Fatal(err)
		}
		events, err := r.read(path)
		if err != nil || len(events) != tc.want {
			t.Fatalf("with %d bytes written, read = %d events, %v; want %d", tc.size, len(events), err, tc.want)
		}
	}
	records, _ := r.read(path)
	var events []AuditEvent
	for _, r := range records {
		events = append(events, r.AuditEvent)
	}
	if records[0].stage != "ResponseComplete" || records[0].message != `namespaces "kube-system" not found` {
		t.Errorf("the first record's stage and message are %q and %q, want ResponseComplete and the 404's", records[0].stage, records[0].message)
	}
	if events[0].Verb != "create" || events[1].Verb != "patch" {
		t.Errorf("read %+v, want the create and the patch", events)
	}
	if got := Writes(events, "system:apiserver"); len(got) != 2 {
		t.Errorf("Writes(system:apiserver) = %d events, want 2", len(got))
	}
	if got := Writes(events, "admin"); len(got) != 0 {
		t.Errorf("Writes(admin) = %d events, want none", len(got))
	}
	if got := Writes(events, ""); len(got) != 2 {
		t.Errorf(`Writes("") = %d events, want 2`, len(got))
	}
}

func TestAuditPolicy(t *testing.T) {
	for _, want := range []string{
		"omitStages: [RequestReceived, Panic]",
		"- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n  omitStages: [ResponseStarted]\n",
		"- level: None\n  userGroups: [\"system:serviceaccounts:kube-system\"]\n- level: Metadata\n  verbs: [get, list, watch]\n  userGroups: [\"system:serviceaccounts\"]\n- level: None\n",
	} {
		if !strings.Contains(auditPolicy, want) {
			t.Errorf("the audit policy lacks %q", want)
		}
	}
}
