package health_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/health"
	"github.com/z5labs/humus/humustest"
)

// A Binary is unhealthy, with its reason, until its owner marks it healthy.
func ExampleBinary() {
	synced := health.NewBinary(errors.New("caches not synced"))
	fmt.Println(synced.Healthy(context.Background()))
	synced.MarkHealthy()
	fmt.Println(synced.Healthy(context.Background()))
	// Output:
	// caches not synced
	// <nil>
}

// All answers every unhealthy Monitor's reason at once.
func ExampleAll() {
	m := health.All(
		health.NewBinary(errors.New("caches not synced")),
		health.NewBinary(errors.New("no lease")),
	)
	fmt.Println(m.Healthy(context.Background()))
	// Output:
	// caches not synced
	// no lease
}

// The probes' Service, as an App serves a controller's health.Readiness
// (ctrl.Synced()): here on humustest's Host, and asked over real HTTP.
func ExampleNewService() {
	h := humustest.NewHost()
	s := &humus.Setup{Host: h.Host()}
	synced := health.NewBinary(errors.New("caches not synced"))
	probes := health.NewService(s, "127.0.0.1:0", health.Readiness(synced))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- probes.Serve(ctx) }()
	addr, err := probes.Addr(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}

	client := &http.Client{Transport: &http.Transport{DialContext: s.Host.Dial}}
	get := func(path string) {
		resp, err := client.Get("http://" + addr.String() + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	get("/readyz")
	synced.MarkHealthy()
	get("/readyz")
	get("/livez")

	client.CloseIdleConnections()
	cancel()
	fmt.Println("Serve:", <-served)
	fmt.Println("Shutdown:", probes.Shutdown(context.Background()))
	// Output:
	// GET /readyz: 503 caches not synced
	// GET /readyz: 200 ok
	// GET /livez: 200 ok
	// Serve: <nil>
	// Shutdown: <nil>
}
