package clustertest

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// TestClusterLink runs client-go, over TLS and HTTP/2, through a Link:
// held, its requests time out; released, the same connection serves them;
// refused, they fail with ECONNREFUSED; accepted, they work again.
func TestClusterLink(t *testing.T) {
	c := Get(t)
	ns := c.Namespace(t)
	link := NewLink(t)
	cfg := c.AdminConfig()
	cfg.Dial = link.Dial
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, client, ns, "through", nil)
	if d, o := link.Dials(), link.Open(); d != 1 || o != 1 {
		t.Errorf("Dials() = %d, Open() = %d; want 1, 1", d, o)
	}

	link.Hold()
	if err := getWithin(t, client, ns, "through", time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a get while held: %v, want the deadline exceeded", err)
	}
	link.Release()
	if err := getWithin(t, client, ns, "through", 10*time.Second); err != nil {
		t.Errorf("a get once released: %v", err)
	}
	if d := link.Dials(); d != 1 {
		t.Errorf("Dials() = %d once released, want the same connection", d)
	}

	link.Refuse()
	if err := getWithin(t, client, ns, "through", 10*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a get while refused: %v, want ECONNREFUSED", err)
	}
	link.Accept()
	if err := getWithin(t, client, ns, "through", 10*time.Second); err != nil {
		t.Errorf("a get once accepted: %v", err)
	}
}
