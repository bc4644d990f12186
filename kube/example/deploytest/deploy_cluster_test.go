package deploytest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/example/deploytest"
)

// fieldManager is the field manager of this test's applies.
const fieldManager = "deploytest"

// TestClusterDeploy applies every document of each example's deploy/
// folder to the real control plane, as `kubectl apply --server-side
// --dry-run=server --validate=strict` would: server-side apply, dry run
// All, field validation Strict. Any refusal fails it: an unknown or
// duplicate field, a value the API server's validation refuses, a kind it
// doesn't serve.
//
// A dry-run namespaced object needs its namespace to exist, and a custom
// resource its CRD, so the Namespaces and CRDs are dry-run first, then
// applied for real (strictly too) and deleted at the test's cleanup. The
// control plane is this test binary's own.
func TestClusterDeploy(t *testing.T) {
	c := clustertest.Get(t)
	a := newApplier(t, c)
	for _, ex := range examples {
		t.Run(ex.name(), func(t *testing.T) {
			docs, err := deploytest.Read(ex.dir)
			if err != nil {
				t.Fatal(err)
			}
			a.applyEach(t, c, docs)
			if t.Failed() {
				return
			}
			a.checkPodSecurityIsInEffect(t, docs)
		})
	}
	t.Run("an unknown field is refused", a.refusesAnUnknownField)
}

// An applier applies documents to the control plane as the admin, and
// keeps the API server's warnings.
type applier struct {
	dyn      dynamic.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	warnings *warningRecorder
}

// newApplier is an applier of c's, with discovery's mapping of kinds to
// resources.
func newApplier(t *testing.T, c *clustertest.Cluster) *applier {
	t.Helper()
	cfg := c.AdminConfig()
	warnings := &warningRecorder{}
	cfg.WarningHandler = warnings
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	return &applier{dyn: dyn, mapper: mapper, warnings: warnings}
}

// applyEach dry-runs each of docs, in order, and applies the Namespaces
// and CRDs for real, to be deleted at t's cleanup. A refusal or a warning
// fails t.
func (a *applier) applyEach(t *testing.T, c *clustertest.Cluster, docs []deploytest.Doc) {
	// A namespaced object that names no namespace, such as a sample, goes
	// where kubectl's context would put it: here, a namespace of the
	// test's own.
	var defaultNS string
	for _, d := range docs {
		apply := func(dryRun bool) error {
			a.warnings.take()
			err := a.applyDoc(t, d, dryRun, func() string {
				if defaultNS == "" {
					defaultNS = c.Namespace(t)
				}
				return defaultNS
			})
			if w := a.warnings.take(); err == nil && len(w) > 0 {
				return fmt.Errorf("warnings: %s", strings.Join(w, "; "))
			}
			return err
		}
		if err := apply(true); err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		if prerequisite(d) {
			if err := apply(false); err != nil {
				t.Errorf("%s: applying it for real: %v", d, err)
				continue
			}
			a.deleteAtCleanup(t, d)
			if d.Obj.GetKind() == "CustomResourceDefinition" {
				c.AwaitCRD(t, d.Obj.GetName())
				a.mapper.Reset()
			}
		}
		t.Logf("%s: accepted", d)
	}
}

// checkPodSecurityIsInEffect checks that the namespace's Pod Security
// level is in effect: the same Deployment, with a pod that may escalate
// its privileges, is applied with PodSecurity's warning. So no warning in
// applyEach means its pods meet the level.
func (a *applier) checkPodSecurityIsInEffect(t *testing.T, docs []deploytest.Doc) {
	for _, d := range docs {
		if d.Obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(d.Obj.Object, "spec", "template", "spec", "containers")
		if len(containers) == 0 {
			t.Fatalf("%s: no containers", d)
		}
		if err := unstructured.SetNestedField(containers[0].(map[string]any), true, "securityContext", "allowPrivilegeEscalation"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(d.Obj.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
		var err error
		if d.JSON, err = d.Obj.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
		a.warnings.take()
		if err := a.applyDoc(t, d, true, nil); err != nil {
			t.Fatalf("%s, escalating: %v", d, err)
		}
		if w := strings.Join(a.warnings.take(), "; "); !strings.Contains(w, "allowPrivilegeEscalation") {
			t.Errorf("%s, escalating: warnings %q, want PodSecurity's on allowPrivilegeEscalation", d, w)
		}
	}
}

// refusesAnUnknownField dry-runs the defaultdeny example's Deployment with
// a field no Deployment has, and checks the error names it.
func (a *applier) refusesAnUnknownField(t *testing.T) {
	docs, err := deploytest.Read(examples[1].dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Obj.GetKind() != "Deployment" {
			continue
		}
		// In the namespace default, since the example's own is gone.
		d.Obj.SetNamespace("default")
		if err := unstructured.SetNestedField(d.Obj.Object, int64(1), "spec", "replicaz"); err != nil {
			t.Fatal(err)
		}
		if d.JSON, err = d.Obj.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
		err := a.applyDoc(t, d, true, nil)
		if err == nil || !strings.Contains(err.Error(), "replicaz") {
			t.Errorf("a Deployment with spec.replicaz: %v, want an error naming the field", err)
		}
		return
	}
	t.Fatal("no Deployment")
}

// A warningRecorder keeps the API server's warnings, such as PodSecurity
// admission's on a Deployment whose pods the namespace's level refuses.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// take returns the warnings since the last take.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.warnings
	w.warnings = nil
	return ws
}

// prerequisite reports whether other documents need d to exist: a
// Namespace, or a CRD.
func prerequisite(d deploytest.Doc) bool {
	switch d.Obj.GroupVersionKind().GroupKind().String() {
	case "Namespace", "CustomResourceDefinition.apiextensions.k8s.io":
		return true
	}
	return false
}

// applyDoc applies d with server-side apply and strict field validation,
// as a dry run or not; a namespaced object without a namespace goes in
// defaultNS().
func (a *applier) applyDoc(t *testing.T, d deploytest.Doc, dryRun bool, defaultNS func() string) error {
	gvk := d.Obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := d.Obj.GetNamespace()
		if ns == "" {
			ns = defaultNS()
		}
		r = a.dyn.Resource(m.Resource).Namespace(ns)
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager, FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = r.Patch(ctx, d.Obj.GetName(), types.ApplyPatchType, d.JSON, opts)
	return err
}

// deleteAtCleanup deletes d, a cluster-scoped object, at t's cleanup.
func (a *applier) deleteAtCleanup(t *testing.T, d deploytest.Doc) {
	gvk := d.Obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Errorf("%s: %v", d, err)
		return
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.dyn.Resource(m.Resource).Delete(ctx, d.Obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s at cleanup: %v", d, err)
		}
	})
}
