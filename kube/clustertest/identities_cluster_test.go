package clustertest

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestClusterServiceAccount(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	createConfigMap(t, adminClient(t, c), ns, "seen", nil)
	token := c.ServiceAccount(t, ns, "reader")
	cfg := c.AdminConfig()
	cfg.BearerToken = token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":reader"

	_, err = client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	want := fmt.Sprintf(`User %q cannot list resource "configmaps" in API group "" in the namespace %q`, user, ns)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("listing ConfigMaps with no rules: %v, want 403 %s", err, want)
	}

	c.ServiceAccount(t, ns, "reader",
		Grant{Namespace: ns, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}},
		Grant{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}}},
	)
	cms, err := client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing ConfigMaps with the first token once granted: %v", err)
	}
	var names []string
	for _, cm := range cms.Items {
		names = append(names, cm.Name)
	}
	if !slices.Contains(names, "seen") {
		t.Errorf("ConfigMaps listed = %v, want seen among them", names)
	}
	if got, err := client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); err != nil || got.Name != ns {
		t.Errorf("getting namespace %s through the cluster grant: %v", ns, err)
	}

	// Exactly the rights granted: not another resource, verb or namespace.
	if _, err := client.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets: %v, want 403", err)
	}
	if err := client.CoreV1().ConfigMaps(ns).Delete(t.Context(), "seen", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting a ConfigMap: %v, want 403", err)
	}
	if _, err := client.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing ConfigMaps in default: %v, want 403", err)
	}
}

func TestClusterClientCert(t *testing.T) {
	c := Get(t)
	whoami := func(cert tls.Certificate) (status int, user string, groups []string) {
		t.Helper()
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.CA(), Certificates: []tls.Certificate{cert}}}}
		defer client.CloseIdleConnections()
		resp, err := client.Post("https://"+c.Server()+"/apis/authentication.k8s.io/v1/selfsubjectreviews", "application/json",
			strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var review struct {
			Status struct {
				UserInfo struct {
					Username string
					Groups   []string
				}
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
			t.Fatal(err)
		}
		list, err := client.Get("https://" + c.Server() + "/api/v1/namespaces")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, list.Body)
		_ = list.Body.Close()
		return list.StatusCode, review.Status.UserInfo.Username, review.Status.UserInfo.Groups
	}

	status, user, groups := whoami(c.ClientCert(t, "alice", "team-a"))
	if user != "alice" || !slices.Contains(groups, "team-a") || !slices.Contains(groups, "system:authenticated") {
		t.Errorf("alice's certificate authenticates as %q in %v, want alice in team-a and system:authenticated", user, groups)
	}
	if status != http.StatusForbidden {
		t.Errorf("alice listing namespaces: %d, want 403", status)
	}
	if status, user, _ := whoami(c.ClientCert(t, "root", "system:masters")); status != http.StatusOK || user != "root" {
		t.Errorf("root in system:masters listing namespaces: %d as %q, want 200 as root", status, user)
	}
}
