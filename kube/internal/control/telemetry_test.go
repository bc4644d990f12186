package control

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/z5labs/humus/kube/internal/teltest"

	"go.opentelemetry.io/otel/codes"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/z5labs/humus/humustest"
)

// reconcileSpansOf returns the reconcile spans of the object named name.
func reconcileSpansOf(tel *humustest.Telemetry, kind, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spansNamed(tel, "reconcile "+kind) {
		if spanAttrs(s)[AttrObjectName] == name {
			out = append(out, s)
		}
	}
	return out
}

// keysOf returns m's keys, sorted.
func keysOf[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// spanOf returns the span of tel whose span context r carries.
func spanOf(tel *humustest.Telemetry, r sdklog.Record) sdktrace.ReadOnlySpan {
	for _, s := range tel.Spans() {
		if s.SpanContext().TraceID() == r.TraceID() && s.SpanContext().SpanID() == r.SpanID() {
			return s
		}
	}
	return nil
}

// outcomes is a Reconciler whose reconcile of "ok" succeeds, after it
// starts a span of its own from its context, whose reconcile of "fail"
// fails, and whose reconcile of "boom" panics.
func outcomes(tel *humustest.Telemetry, calls *counter) reconcileFunc {
	tracer := tel.Telemetry().TracerProvider.Tracer("memcached-operator")
	return func(ctx context.Context, m memcached) (result, error) {
		calls.Inc(m.Name)
		switch m.Name {
		case "fail":
			return result{}, errors.New("the memcached image can't be pulled")
		case "boom":
			var replicas []int32
			_ = replicas[m.Spec.Size] // index out of range
		}
		_, span := tracer.Start(ctx, "get deployment")
		time.Sleep(2 * time.Second)
		span.End()
		return result{}, nil
	}
}

const (
	failMessage  = "the memcached image can't be pulled"
	panicMessage = "runtime error: index out of range [5] with length 0"
)

func outcomeObjects() []runtime.Object {
	return []runtime.Object{cacheObject("default", "ok", 1), cacheObject("default", "fail", 1), cacheObject("default", "boom", 5)}
}

func TestEveryReconcileIsARootSpanWithTheObject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, outcomeObjects()...)
		var calls counter
		// Serve's own context carries a span: the reconciles' must still be
		// roots of their own traces.
		ctx, outer := tel.Telemetry().TracerProvider.Tracer("test").Start(t.Context(), "main")
		stop := servedIn(t, ctx, newTestController(t, f, testSettings(), outcomes(tel, &calls), observed(tel)))
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		outer.End()

		for _, name := range []string{"ok", "fail", "boom"} {
			checkRootSpansOfEachReconcile(t, tel, &calls, name, outer.SpanContext().TraceID())
		}
		checkTheSucceededReconcilesSpan(t, tel)
		checkTheFailedReconcilesSpans(t, tel)
		checkThePanickedReconcilesSpan(t, tel)
	})
}

// checkRootSpansOfEachReconcile checks that each reconcile of the object
// name has a span of its own, the root of a trace other than Serve's
// context's (outer), an internal span of the package's scope with the
// object as its attributes.
func checkRootSpansOfEachReconcile(t *testing.T, tel *humustest.Telemetry, calls *counter, name string, outer trace.TraceID) {
	t.Helper()
	spans := reconcileSpansOf(tel, "Memcached", name)
	if len(spans) == 0 {
		t.Fatalf("no span reconcile Memcached for %s; spans: %v", name, spanNames(tel))
	}
	if got, want := len(spans), calls.Get(name); got != want {
		t.Errorf("%s: %d reconcile spans, want one per reconcile, %d", name, got, want)
	}
	for _, s := range spans {
		want := map[string]string{AttrNamespace: "default", AttrObjectName: name}
		if got := spanAttrs(s); !mapsEqual(got, want) {
			t.Errorf("%s: the span's attributes = %v, want %v", name, got, want)
		}
		if s.Parent().IsValid() {
			t.Errorf("%s: the span has parent %v, want a root span", name, s.Parent().SpanID())
		}
		if s.SpanContext().TraceID() == outer {
			t.Errorf("%s: the span is in Serve's context's trace, want a trace of its own", name)
		}
		if got := s.SpanKind(); got != trace.SpanKindInternal {
			t.Errorf("%s: the span's kind = %v, want internal", name, got)
		}
		if got := s.InstrumentationScope().Name; got != "github.com/z5labs/humus/kube" {
			t.Errorf("%s: the span's scope = %q, want github.com/z5labs/humus/kube", name, got)
		}
	}
}

// checkTheSucceededReconcilesSpan checks ok's span: no status, no event,
// as long as the reconcile, and the parent of the Reconciler's own span.
func checkTheSucceededReconcilesSpan(t *testing.T, tel *humustest.Telemetry) {
	t.Helper()
	ok := reconcileSpansOf(tel, "Memcached", "ok")[0]
	if got := ok.Status().Code; got != codes.Unset {
		t.Errorf("ok: the span's status = %v, want unset", ok.Status())
	}
	if got := len(ok.Events()); got != 0 {
		t.Errorf("ok: the span has %d events, want none", got)
	}
	if got := ok.EndTime().Sub(ok.StartTime()); got != 2*time.Second {
		t.Errorf("ok: the span lasted %v, want the reconcile's 2s", got)
	}
	// The Reconciler's context carries the span: its own spans are
	// children of it.
	children := spansNamed(tel, "get deployment")
	if len(children) != 1 {
		t.Fatalf("the Reconciler's spans = %d, want 1", len(children))
	}
	if p := children[0].Parent(); p.SpanID() != ok.SpanContext().SpanID() || p.TraceID() != ok.SpanContext().TraceID() {
		t.Errorf("the Reconciler's span has parent %v/%v, want the reconcile's %v/%v",
			p.TraceID(), p.SpanID(), ok.SpanContext().TraceID(), ok.SpanContext().SpanID())
	}
}

// checkTheFailedReconcilesSpans checks that each of fail's spans has the
// error as its status, and recorded as an exception.
func checkTheFailedReconcilesSpans(t *testing.T, tel *humustest.Telemetry) {
	t.Helper()
	for _, s := range reconcileSpansOf(tel, "Memcached", "fail") {
		if got := s.Status(); got.Code != codes.Error || got.Description != failMessage {
			t.Errorf("fail: the span's status = %+v, want Error %q", got, failMessage)
		}
		if ev := s.Events(); len(ev) != 1 || ev[0].Name != "exception" || attrStrings(ev[0].Attributes)[AttrExcMessage] != failMessage {
			t.Errorf("fail: the span's events = %+v, want the error recorded as an exception", ev)
		}
	}
}

// checkThePanickedReconcilesSpan checks boom's one span: the panic as its
// status, and as an exception whose stack shows the Reconciler.
func checkThePanickedReconcilesSpan(t *testing.T, tel *humustest.Telemetry) {
	t.Helper()
	boom := reconcileSpansOf(tel, "Memcached", "boom")
	if len(boom) != 1 {
		t.Fatalf("boom: %d spans, want 1: a panic isn't retried", len(boom))
	}
	if got := boom[0].Status(); got.Code != codes.Error || got.Description != "panic: "+panicMessage {
		t.Errorf("boom: the span's status = %+v, want Error %q", got, "panic: "+panicMessage)
	}
	ev := boom[0].Events()
	if len(ev) != 1 || ev[0].Name != "exception" {
		t.Fatalf("boom: the span's events = %+v, want one exception", ev)
	}
	got := attrStrings(ev[0].Attributes)
	if want := []string{AttrExcMessage, AttrExcStacktrace, AttrExcType}; !slices.Equal(keysOf(got), want) {
		t.Errorf("the exception's attributes = %v, want %v", keysOf(got), want)
	}
	if got[AttrExcType] != "runtime.boundsError" || got[AttrExcMessage] != panicMessage {
		t.Errorf("the exception = %s %q, want runtime.boundsError %q", got[AttrExcType], got[AttrExcMessage], panicMessage)
	}
	if st := got[AttrExcStacktrace]; !strings.Contains(st, "panic(") || !strings.Contains(st, "control.outcomes.func1") {
		t.Errorf("the exception's stack doesn't show the panic in the Reconciler:\n%s", st)
	}
}

func TestAFailedReconcileIsOneWarnRecordInItsSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, outcomeObjects()...)
		var calls counter
		s := testSettings()
		s.RetryBaseDelay = time.Second
		stop := served(t, newTestController(t, f, s, outcomes(tel, &calls), observed(tel)))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}

		recs := recordsWithBody(tel, "reconcile failed")
		if calls.Get("fail") < 2 {
			t.Fatalf("fail was reconciled %d times, want retries", calls.Get("fail"))
		}
		if got, want := len(recs), calls.Get("fail"); got != want {
			t.Errorf("%d records reconcile failed, want one per failed reconcile, %d", got, want)
		}
		seen := map[trace.SpanID]bool{}
		for _, r := range recs {
			if r.Severity() != otellog.SeverityWarn || r.SeverityText() != "WARN" {
				t.Errorf("the record's severity = %v %q, want WARN", r.Severity(), r.SeverityText())
			}
			want := map[string]string{
				AttrController: "memcached-controller", AttrResource: "memcacheds.cache.example.com",
				AttrNamespace: "default", AttrObjectName: "fail", "error": failMessage, AttrFailures: "1",
			}
			if got := recordAttrs(r); !mapsEqual(got, want) {
				t.Errorf("the record's attributes = %v, want %v", got, want)
			}
			if got := r.InstrumentationScope().Name; got != "github.com/z5labs/humus/kube" {
				t.Errorf("the record's scope = %q, want github.com/z5labs/humus/kube", got)
			}
			span := spanOf(tel, r)
			if span == nil || span.Name() != "reconcile Memcached" || spanAttrs(span)[AttrObjectName] != "fail" {
				t.Errorf("the record's trace context %v/%v isn't a reconcile span of fail", r.TraceID(), r.SpanID())
				continue
			}
			if seen[r.SpanID()] {
				t.Errorf("two records in the span %v", r.SpanID())
			}
			seen[r.SpanID()] = true
		}
	})
}

func TestAPanicIsOneErrorRecordInItsSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, outcomeObjects()...)
		var calls counter
		stop := served(t, newTestController(t, f, testSettings(), outcomes(tel, &calls), observed(tel)))
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}

		recs := recordsWithBody(tel, "reconcile panicked")
		if len(recs) != 1 {
			t.Fatalf("%d records reconcile panicked, want 1", len(recs))
		}
		r := recs[0]
		if r.Severity() != otellog.SeverityError || r.SeverityText() != "ERROR" {
			t.Errorf("the record's severity = %v %q, want ERROR", r.Severity(), r.SeverityText())
		}
		got := recordAttrs(r)
		if want := []string{AttrExcMessage, AttrExcStacktrace, AttrExcType, AttrController, AttrObjectName, AttrResource, AttrNamespace}; !slices.Equal(keysOf(got), want) {
			t.Errorf("the record's attributes = %v, want %v", keysOf(got), want)
		}
		if got[AttrNamespace] != "default" || got[AttrObjectName] != "boom" {
			t.Errorf("the record's object = %s/%s, want default/boom", got[AttrNamespace], got[AttrObjectName])
		}
		if got[AttrExcType] != "runtime.boundsError" || got[AttrExcMessage] != panicMessage {
			t.Errorf("the record's exception = %s %q, want runtime.boundsError %q", got[AttrExcType], got[AttrExcMessage], panicMessage)
		}
		if !strings.Contains(got[AttrExcStacktrace], "control.outcomes.func1") {
			t.Errorf("the record's stack doesn't show the Reconciler:\n%s", got[AttrExcStacktrace])
		}
		span := spanOf(tel, r)
		if span == nil || spanAttrs(span)[AttrObjectName] != "boom" {
			t.Fatalf("the record's trace context %v/%v isn't boom's reconcile span", r.TraceID(), r.SpanID())
		}
		if ev := span.Events(); len(ev) != 1 || attrStrings(ev[0].Attributes)[AttrExcStacktrace] != got[AttrExcStacktrace] {
			t.Errorf("the record's stack isn't the span's exception's")
		}
		counted := 0
		for _, r := range recordsWithBody(tel, "reconcile failed") {
			if name := recordAttrs(r)[AttrObjectName]; name != "fail" {
				t.Errorf("a record reconcile failed of %s: a panic is recorded once, as a panic", name)
			}
			counted += failuresOf(t, r)
		}
		if counted != calls.Get("fail") {
			t.Errorf("the records reconcile failed count %d failures, want fail's %d", counted, calls.Get("fail"))
		}
	})
}

func TestAKindIsTracedAndLoggedAsAResourceIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, object("v1", "Namespace", "", "team-a", nil))
		var calls counter
		rec := namespacesType(func(ctx context.Context, ns corev1.Namespace) (time.Duration, error) {
			if calls.Inc(ns.Name) == 1 {
				return 0, errors.New("the default-deny policy can't be applied")
			}
			if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
				t.Error("the KindReconciler's context carries no span")
			}
			return 0, nil
		})
		stop := served(t, newTestController(t, f, testSettings(), nil, observed(tel), ofNamespaces(rec)))
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}

		spans := spansNamed(tel, "reconcile Namespace")
		if len(spans) != 2 {
			t.Fatalf("%d spans reconcile Namespace, want 2 (a failure, then its retry); spans: %v", len(spans), spanNames(tel))
		}
		for _, s := range spans {
			want := map[string]string{AttrObjectName: "team-a"}
			if got := spanAttrs(s); !mapsEqual(got, want) {
				t.Errorf("the span's attributes = %v, want %v: a cluster-scoped object has no namespace", got, want)
			}
			if s.Parent().IsValid() {
				t.Errorf("the span has a parent, want a root span")
			}
		}
		if got := spans[0].Status(); got.Code != codes.Error || got.Description != "the default-deny policy can't be applied" {
			t.Errorf("the failed reconcile's status = %+v, want Error", got)
		}
		recs := recordsWithBody(tel, "reconcile failed")
		if len(recs) != 1 {
			t.Fatalf("%d records reconcile failed, want 1", len(recs))
		}
		want := map[string]string{
			AttrController: "memcached-controller", AttrResource: "namespaces",
			AttrObjectName: "team-a", "error": "the default-deny policy can't be applied", AttrFailures: "1",
		}
		if got := recordAttrs(recs[0]); !mapsEqual(got, want) {
			t.Errorf("the record's attributes = %v, want %v", got, want)
		}
		if recs[0].SpanID() != spans[0].SpanContext().SpanID() {
			t.Errorf("the record isn't in the failed reconcile's span")
		}
	})
}

func TestClientGosRecordsReachTheLoggerProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		var calls counter
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls), observed(tel)))
		time.Sleep(time.Minute) // the leader renews its Lease every 2s
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}

		for _, body := range []string{
			"Attempting to acquire leader lease...", // leader election's
			"Successfully acquired lease",
			"Caches are synced", // the cache's
		} {
			recs := recordsWithBody(tel, body)
			if len(recs) != 1 {
				t.Errorf("%d records %q, want 1; records: %v", len(recs), body, recordBodies(tel))
				continue
			}
			if got := recs[0].InstrumentationScope().Name; got != "github.com/z5labs/humus/kube" {
				t.Errorf("%q: the record's scope = %q, want github.com/z5labs/humus/kube", body, got)
			}
			if recs[0].Severity() != otellog.SeverityInfo {
				t.Errorf("%q: the record's severity = %v, want INFO", body, recs[0].Severity())
			}
		}
		if recs := recordsWithBody(tel, "Successfully acquired lease"); len(recs) == 1 {
			if got := recordAttrs(recs[0])["lock"]; got != "kube-system/memcached-controller" {
				t.Errorf("the record's lock = %q, want kube-system/memcached-controller", got)
			}
		}
		// Debugging levels are dropped: leader election's V(5), each renewal.
		if recs := recordsWithBody(tel, "Successfully renewed lease"); len(recs) != 0 {
			t.Errorf("%d records of leader election's V(5) renewals, want none", len(recs))
		}
	})
}

// failuresOf is how many failures a failure's record counts.
func failuresOf(t *testing.T, r sdklog.Record) int {
	t.Helper()
	n, err := strconv.Atoi(recordAttrs(r)[AttrFailures])
	if err != nil {
		t.Errorf("the record %q counts no failures: %v", r.Body().AsString(), err)
	}
	return n
}

func recordBodies(tel *humustest.Telemetry) []string {
	var out []string
	for _, r := range tel.Records() {
		out = append(out, r.Body().AsString())
	}
	return out
}

func TestAStandbyRecordsNoDebuggingLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := humustest.NewTelemetry()
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 3))
		heldByAnother(t, f, "kube-system", "memcached-controller", "replica-2")
		var calls counter
		stop := served(t, newTestController(t, f, testSettings(), readyReplicas(&calls), observed(tel)))
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		if got := len(recordsWithBody(tel, "Attempting to acquire leader lease...")); got != 1 {
			t.Errorf("%d records Attempting to acquire leader lease..., want 1", got)
		}
		// Its V(4) record of each failed attempt, every 2s, is dropped.
		if got := len(recordsWithBody(tel, "Failed to acquire lease")); got != 0 {
			t.Errorf("%d records of leader election's V(4) attempts, want none", got)
		}
		if got := len(recordsWithBody(tel, "Successfully acquired lease")); got != 0 {
			t.Errorf("a standby recorded Successfully acquired lease")
		}
	})
}

// TestWhatRetriesAKeyIsAFailedReconcile: a failed decode, status apply or
// finalizer add is a failed reconcile, as Reconcile's error is, and its
// record names it.
func TestWhatRetriesAKeyIsAFailedReconcile(t *testing.T) {
	for _, tt := range failedReconcileCases() {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tel := humustest.NewTelemetry()
				f := newFakeCluster(t, listKinds, tt.obj)
				if tt.fakes != nil {
					tt.fakes(f)
				}
				var calls counter
				s := testSettings()
				s.RetryBaseDelay = time.Second
				stop := served(t, newTestController(t, f, s, readyReplicas(&calls), append(tt.parts, observed(tel))...))
				time.Sleep(10 * time.Second)
				synctest.Wait()
				if err := stop(); err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
				checkEveryReconcileFailedWith(t, tel, tt.want)
			})
		})
	}
}

// failedReconcile is an object whose every reconcile fails, the fakes'
// part in it, and the error each reconcile fails with.
type failedReconcile struct {
	name  string
	obj   *unstructured.Unstructured
	fakes func(*fakeCluster)
	parts []option
	want  string
}

// failedReconcileCases are TestWhatRetriesAKeyIsAFailedReconcile's cases:
// a failed decode, and each write of the controller's refused.
func failedReconcileCases() []failedReconcile {
	rejected := errors.New("etcdserver: request timed out")
	refuse := func(subresource string) func(*fakeCluster) {
		return func(f *fakeCluster) {
			f.Dyn.PrependReactor("patch", "memcacheds", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == subresource {
					return true, nil, rejected
				}
				return false, nil, nil
			})
		}
	}
	return []failedReconcile{{
		name: "a failed decode",
		obj:  object("cache.example.com/v1alpha1", "Memcached", "default", "m", map[string]any{"size": "three"}),
		want: "kube: decoding Memcached default/m: field spec.size: a JSON string can't be a Go int32",
	}, {
		name:  "a failed status apply",
		obj:   cacheObject("default", "m", 3),
		fakes: refuse("status"),
		want:  "kube: applying the status of Memcached default/m: etcdserver: request timed out",
	}, {
		name:  "a failed finalizer add",
		obj:   cacheObject("default", "m", 3),
		fakes: refuse(""),
		parts: []option{finalizing(func(context.Context, memcached) error { return nil })},
		want:  "kube: adding the finalizer to Memcached default/m: etcdserver: request timed out",
	}, {
		name:  "a failed finalizer removal",
		obj:   deleting(cacheObject("default", "m", 3), "cache.example.com/finalizer"),
		fakes: refuse(""),
		parts: []option{finalizing(func(context.Context, memcached) error { return nil })},
		want:  "kube: removing the finalizer from Memcached default/m: etcdserver: request timed out",
	}}
}

// checkEveryReconcileFailedWith checks that the object was reconciled
// again, and that each reconcile failed with want: in its span's status,
// in its WARN record, and in reconcile.duration's outcome.
func checkEveryReconcileFailedWith(t *testing.T, tel *humustest.Telemetry, want string) {
	t.Helper()
	spans := spansNamed(tel, "reconcile Memcached")
	recs := recordsWithBody(tel, "reconcile failed")
	if len(spans) < 2 {
		t.Fatalf("%d reconciles, want retries", len(spans))
	}
	if len(recs) != len(spans) {
		t.Errorf("%d records reconcile failed, want one per reconcile, %d", len(recs), len(spans))
	}
	for _, r := range recs {
		if got := recordAttrs(r)["error"]; got != want {
			t.Errorf("the record's error = %q, want %q", got, want)
		}
	}
	for _, s := range spans {
		if got := s.Status(); got.Code != codes.Error || got.Description != want {
			t.Errorf("the span's status = %+v, want Error %q", got, want)
		}
	}
	points := reconcileDurations(t, tel)
	if got := points["error"].Count; got != uint64(len(spans)) {
		t.Errorf("reconcile.duration counted %d errors, want %d", got, len(spans))
	}
	if got := keysOf(points); !slices.Equal(got, []string{"error"}) {
		t.Errorf("reconcile.duration's outcomes = %v, want only error", got)
	}
}

// A Reconciler's own records go through the logger its context carries,
// klog.FromContext(ctx), as the docs say: each names the controller and
// its resource, as the controller's own records do, and its V levels are
// kept as client-go's are.
func TestAReconcilersOwnRecordsNameItsController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeCluster(t, listKinds, cacheObject("default", "m", 1))
		tel := humustest.NewTelemetry()
		rec := reconcileFunc(func(ctx context.Context, m memcached) (result, error) {
			klog.FromContext(ctx).Info("sizing the cache", "size", m.Spec.Size)
			klog.FromContext(ctx).V(5).Info("a debugging detail")
			return result{}, nil
		})
		served(t, newTestController(t, f, testSettings(), rec, observed(tel)))
		settle(10 * time.Second)
		got := recordsWithBody(tel, "sizing the cache")
		if len(got) != 1 {
			t.Fatalf("the Reconciler's records = %d, want 1", len(got))
		}
		if a := recordAttrs(got[0]); a["humus.kube.controller.name"] != "memcached-controller" || a["humus.kube.resource"] != "memcacheds.cache.example.com" || a["size"] != "1" {
			t.Errorf("its attributes = %v, want the controller, the resource and size 1", a)
		}
		if n := len(recordsWithBody(tel, "a debugging detail")); n != 0 {
			t.Errorf("V(5) records = %d, want none, as client-go's V(5) are dropped", n)
		}
	})
}

// The readers of what the telemetry recorded, kube/internal/teltest's.
var (
	spansNamed      = teltest.SpansNamed
	spanAttrs       = teltest.SpanAttrs
	attrStrings     = teltest.AttrStrings
	recordsWithBody = teltest.RecordsWithBody
	recordAttrs     = teltest.RecordAttrs
	spanNames       = teltest.SpanNames
	mapsEqual       = maps.Equal[map[string]string, map[string]string]
)
