package clustertest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

func TestClusterKillAPIServer(t *testing.T) {
	c := Get(t)
	testRestart(t, c, c.KillAPIServer, c.StartAPIServer)
}

func TestClusterKillEtcd(t *testing.T) {
	c := Get(t)
	testRestart(t, c, c.KillEtcd, c.StartEtcd)
}

// TestClusterFaultsRestoredAtCleanup checks that a component a test left
// killed or paused runs again, and answers, once the test is over.
func TestClusterFaultsRestoredAtCleanup(t *testing.T) {
	c := Get(t)
	client := adminClient(t, c)
	for _, tc := range []struct {
		name  string
		fault func(testing.TB)
	}{
		{"KillAPIServer", c.KillAPIServer},
		{"KillEtcd", c.KillEtcd},
		{"PauseAPIServer", c.PauseAPIServer},
		{"PauseEtcd", c.PauseEtcd},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fault(t) })
		ns := c.Namespace(t)
		createConfigMap(t, client, ns, "after-"+strings.ToLower(tc.name), nil)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range []*process{c.etcd, c.apiserver} {
		if !p.running() || p.paused {
			t.Errorf("%s: running %t, paused %t after the tests' cleanups; want running", p.name, p.running(), p.paused)
		}
	}
}

func TestClusterPauseAPIServer(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	client := adminClient(t, c)
	createConfigMap(t, client, ns, "before", nil)

	c.PauseAPIServer(t)
	// The kernel still accepts connections; nothing answers on them.
	conn, err := net.DialTimeout("tcp", c.Server(), 5*time.Second)
	if err != nil {
		t.Fatalf("dialling a paused kube-apiserver: %v, want a connection", err)
	}
	_ = conn.Close()
	if err := getWithin(t, client, ns, "before", time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a get from a paused kube-apiserver: %v, want the deadline exceeded", err)
	}

	c.ResumeAPIServer(t)
	if err := getWithin(t, client, ns, "before", 10*time.Second); err != nil {
		t.Errorf("a get once resumed: %v", err)
	}
}

func TestClusterPauseEtcd(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	client := adminClient(t, c)
	createConfigMap(t, client, ns, "before", nil)

	c.PauseEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "during"}}, metav1.CreateOptions{})
	cancel()
	if err == nil {
		t.Errorf("a create while etcd is paused succeeded, want it to hang")
	}

	c.ResumeEtcd(t)
	createConfigMap(t, client, ns, "after", nil)
}

// TestClusterCompactEtcd checks that, once etcd is compacted, a watch
// reaching etcd from an older resourceVersion gets 410 Gone, where it
// worked before; and that a ConfigMap watch, served by kube-apiserver's
// watch cache, doesn't.
func TestClusterCompactEtcd(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	client := adminClient(t, c)
	createEvent := func(name string) *corev1.Event {
		t.Helper()
		e, err := client.CoreV1().Events(ns).Create(t.Context(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: name, APIVersion: "v1"},
			Reason:         "Testing",
			Message:        name,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	oldEvent := createEvent("old").ResourceVersion
	createEvent("new")
	oldConfigMap := createConfigMap(t, client, ns, "old", nil).ResourceVersion
	createConfigMap(t, client, ns, "new", nil)

	watchEvents := func() (watch.Interface, error) {
		return client.CoreV1().Events(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: oldEvent})
	}
	watchConfigMaps := func() (watch.Interface, error) {
		return client.CoreV1().ConfigMaps(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: oldConfigMap})
	}
	if err := firstAdded(watchEvents, "new"); err != nil {
		t.Fatalf("watching Events from %s before compacting: %v", oldEvent, err)
	}

	rev := c.CompactEtcd(t)
	t.Logf("compacted etcd to revision %d", rev)
	if again := c.CompactEtcd(t); again < rev {
		t.Errorf("compacting again gave revision %d, want at least %d", again, rev)
	}

	err := firstAdded(watchEvents, "new")
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("watching Events from %s after compacting: %v, want 410 Gone", oldEvent, err)
	}
	if err := firstAdded(watchConfigMaps, "new"); err != nil {
		t.Errorf("watching ConfigMaps from %s, in the watch cache's history, after compacting: %v", oldConfigMap, err)
	}
}

// firstAdded starts a watch and checks that its first event adds the
// object named name; a watch ending with an error gives that error.
func firstAdded(start func() (watch.Interface, error), name string) error {
	w, err := start()
	if err != nil {
		return err
	}
	defer w.Stop()
	select {
	case e, ok := <-w.ResultChan():
		switch {
		case !ok:
			return errors.New("the watch ended with no event")
		case e.Type == watch.Error:
			return apierrors.FromObject(e.Object)
		case e.Type != watch.Added:
			return errors.New("the first event is " + string(e.Type))
		}
		if got, err := metaName(e.Object); err != nil || got != name {
			return errors.New("the first event adds " + got + ", want " + name)
		}
		return nil
	case <-time.After(callTimeout):
		return errors.New("no event")
	}
}

func metaName(obj any) (string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return "", errors.New("not an object")
	}
	return o.GetName(), nil
}

// getWithin gets ConfigMap ns/name, giving up after timeout.
func getWithin(t testing.TB, client kubernetes.Interface, ns, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	_, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	return err
}
