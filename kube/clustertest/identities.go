package clustertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ClientCert is a client certificate signed by the CA for user in groups,
// which kube-apiserver authenticates as that user. It grants nothing by
// itself: the user has the RBAC rules bound to it or to its groups
// (system:masters has every right). On an existing cluster
// (FromKubeconfig), whose CA's key this package doesn't hold, it fails t
// saying so.
func (c *Cluster) ClientCert(t testing.TB, user string, groups ...string) tls.Certificate {
	t.Helper()
	c.ownsProcesses(t, "ClientCert, which signs with the control plane's CA,")
	certPEM, keyPEM, err := c.ca.client(user, groups)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("clustertest: client certificate for %q: %v", user, err)
	}
	return cert
}

// Namespace creates a namespace named after the test, with a random
// suffix, and deletes it at the test's cleanup, without waiting for its
// contents to be deleted. A namespace the test deleted itself is no error.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	ns, err := c.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("clustertest: creating a namespace for %s: %v", t.Name(), err)
	}
	t.Cleanup(func() {
		c.cleanup(t, "namespace "+ns.Name, func(ctx context.Context) error {
			return c.admin.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		})
	})
	return ns.Name
}

// namespacePrefix is a namespace's generateName for a test: the test's
// name lowercased, each run of other characters than [a-z0-9] a dash,
// cut to leave room for the server's suffix.
func namespacePrefix(test string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(test) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	prefix := b.String()
	if len(prefix) > 50 {
		prefix = prefix[:50]
	}
	prefix = strings.TrimSuffix(prefix, "-")
	if prefix == "" {
		prefix = "test"
	}
	return prefix + "-"
}

// A Grant is RBAC rules for a ServiceAccount: a Role and RoleBinding in
// Namespace, or a ClusterRole and ClusterRoleBinding when Namespace is "".
type Grant struct {
	Namespace string
	Rules     []rbacv1.PolicyRule
}

// ServiceAccount creates ServiceAccount name in namespace, grants it each
// Grant (a Role+RoleBinding in Grant.Namespace, or a
// ClusterRole+ClusterRoleBinding when it is ""), and returns a token
// minted with the TokenRequest API, valid for a day.
//
// It returns once the token authenticates and each rule's first verb on
// its first resource (or non-resource URL) is allowed, so the rights are in
// effect. Called again with the same name, it keeps the ServiceAccount
// (earlier tokens stay valid) and adds the new grants. The ServiceAccount,
// roles and bindings are deleted at the test's cleanup.
func (c *Cluster) ServiceAccount(t testing.TB, namespace, name string, grants ...Grant) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	subject := fmt.Sprintf("serviceaccount %s/%s", namespace, name)

	_, err := c.admin.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
	}, metav1.CreateOptions{})
	switch {
	case err == nil:
		t.Cleanup(func() {
			c.cleanup(t, subject, func(ctx context.Context) error {
				return c.admin.CoreV1().ServiceAccounts(namespace).Delete(ctx, name, metav1.DeleteOptions{})
			})
		})
	case !apierrors.IsAlreadyExists(err):
		t.Fatalf("clustertest: creating %s: %v", subject, err)
	}

	for _, g := range grants {
		if err := c.grant(ctx, t, namespace, name, g); err != nil {
			t.Fatalf("clustertest: granting %s: %v", subject, err)
		}
	}

	tr, err := c.admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(24 * 60 * 60))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("clustertest: minting a token for %s: %v", subject, err)
	}
	if err := c.waitInEffect(ctx, tr.Status.Token, grants); err != nil {
		t.Fatalf("clustertest: %s's token: %v", subject, err)
	}
	return tr.Status.Token
}

// grant creates g's role and binding for the service account, with names
// the server generates, and deletes them at t's cleanup.
func (c *Cluster) grant(ctx context.Context, t testing.TB, namespace, name string, g Grant) error {
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}}
	rbac := c.admin.RbacV1()
	if g.Namespace == "" {
		role, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{GenerateName: namespace + "-" + name + "-"},
			Rules:      g.Rules,
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		t.Cleanup(func() {
			c.cleanup(t, "clusterrole "+role.Name, func(ctx context.Context) error {
				return rbac.ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
			})
		})
		binding, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   subjects,
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		t.Cleanup(func() {
			c.cleanup(t, "clusterrolebinding "+binding.Name, func(ctx context.Context) error {
				return rbac.ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
			})
		})
		return nil
	}
	role, err := rbac.Roles(g.Namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"},
		Rules:      g.Rules,
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	t.Cleanup(func() {
		c.cleanup(t, "role "+g.Namespace+"/"+role.Name, func(ctx context.Context) error {
			return rbac.Roles(g.Namespace).Delete(ctx, role.Name, metav1.DeleteOptions{})
		})
	})
	binding, err := rbac.RoleBindings(g.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   subjects,
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	t.Cleanup(func() {
		c.cleanup(t, "rolebinding "+g.Namespace+"/"+binding.Name, func(ctx context.Context) error {
			return rbac.RoleBindings(g.Namespace).Delete(ctx, binding.Name, metav1.DeleteOptions{})
		})
	})
	return nil
}

// waitInEffect polls, as token, until it authenticates and every grant's
// rules are allowed (by their first verb on their first resource).
func (c *Cluster) waitInEffect(ctx context.Context, token string, grants []Grant) error {
	cfg := rest.AnonymousClientConfig(c.AdminConfig())
	cfg.BearerToken = token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var reviews []*authorizationv1.SelfSubjectAccessReview
	for _, g := range grants {
		for _, r := range g.Rules {
			if review := accessReview(g.Namespace, r); review != nil {
				reviews = append(reviews, review)
			}
		}
	}
	for {
		err := inEffect(ctx, client, reviews)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func inEffect(ctx context.Context, client kubernetes.Interface, reviews []*authorizationv1.SelfSubjectAccessReview) error {
	if _, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, review := range reviews {
		got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !got.Status.Allowed {
			return fmt.Errorf("not yet allowed %+v", review.Spec)
		}
	}
	return nil
}

// accessReview asks whether the rule's first verb on its first resource
// (or non-resource URL) is allowed, or is nil for a rule naming neither.
func accessReview(namespace string, r rbacv1.PolicyRule) *authorizationv1.SelfSubjectAccessReview {
	if len(r.Verbs) == 0 {
		return nil
	}
	var spec authorizationv1.SelfSubjectAccessReviewSpec
	switch {
	case len(r.Resources) > 0:
		attrs := &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: r.Verbs[0]}
		if len(r.APIGroups) > 0 {
			attrs.Group = r.APIGroups[0]
		}
		attrs.Resource, attrs.Subresource, _ = strings.Cut(r.Resources[0], "/")
		if len(r.ResourceNames) > 0 {
			attrs.Name = r.ResourceNames[0]
		}
		spec.ResourceAttributes = attrs
	case len(r.NonResourceURLs) > 0:
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.NonResourceURLs[0], Verb: r.Verbs[0]}
	default:
		return nil
	}
	return &authorizationv1.SelfSubjectAccessReview{Spec: spec}
}

// cleanup runs a deletion at a test's cleanup, bounded by callTimeout; an
// object already gone is no error.
func (c *Cluster) cleanup(t testing.TB, what string, del func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := del(ctx); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("clustertest: deleting %s at cleanup: %v", what, err)
	}
}
