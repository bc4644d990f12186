package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/admission"
	"github.com/z5labs/humus/kube/clustertest"
)

var configMaps = kube.Kind[corev1.ConfigMap]{GVR: corev1.SchemeGroupVersion.WithResource("configmaps"), Kind: "ConfigMap", Scope: kube.Namespaced}

// TestClusterKind runs a defaulting webhook and a validating policy of
// one of Kubernetes' own kinds, ConfigMaps, limited to the test's
// namespace: the webhook labels each ConfigMap with its count of keys, and
// the policy refuses one with a key named password.
func TestClusterKind(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	only := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	served := serveWebhooks(t, humustest.NewTelemetry(), admission.Webhooks{
		Name: "configmaps-" + ns,
		Hooks: []admission.Webhook{admission.Defaulting(configMaps, admission.Settings{Name: "keys.configmaps.admission.example.com", NamespaceSelector: only},
			func(_ context.Context, _ admission.Request, _, cm *corev1.ConfigMap) ([]string, error) {
				if cm.Labels == nil {
					cm.Labels = map[string]string{}
				}
				cm.Labels["admission.example.com/keys"] = strings.Repeat("k", len(cm.Data))
				return nil, nil
			})},
	})
	install(t, c, served.hooks)
	var cm corev1.ConfigMap
	installPolicy(t, c, admission.PolicyFor(configMaps, &cm, admission.PolicySettings{Name: "configmaps-" + ns, NamespaceSelector: only},
		admission.Validation("!has(%s) || !('password' in %[1]s)", "a ConfigMap holds no password: use a Secret", admission.Field(&cm.Data))))
	cms := kubernetes.NewForConfigOrDie(c.AdminConfig()).CoreV1().ConfigMaps(ns)
	ctx := t.Context()

	deadline := time.Now().Add(30 * time.Second)
	for {
		_, refused := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Data: map[string]string{"password": "x"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsInvalid(refused) && err == nil && got.Labels["admission.example.com/keys"] == "k" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook and the policy weren't in effect within 30s: the dry runs answered %v, and %v with labels %v", refused, err, got.Labels)
		}
		time.Sleep(100 * time.Millisecond)
	}

	got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "1", "b": "2"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["admission.example.com/keys"] != "kk" {
		t.Errorf("the ConfigMap's labels are %v, want the webhook's admission.example.com/keys: kk", got.Labels)
	}
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "secret"}, Data: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "a ConfigMap holds no password: use a Secret") {
		t.Errorf("a ConfigMap with a password answered %v, want the policy's refusal", err)
	}
}
