package humus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/humustest"
)

// greeter is a Service that writes its greeting and returns, which ends the
// App.
type greeter struct {
	out      io.Writer
	greeting string
}

func (g greeter) Serve(context.Context) error {
	_, err := fmt.Fprintln(g.out, g.greeting)
	return err
}

func (greeter) Shutdown(context.Context) error { return nil }

// appInit builds the App from the Host it is handed: it reads no global.
func appInit(_ context.Context, s *humus.Setup) ([]humus.Service, error) {
	greeting, ok := s.Host.LookupEnv("GREETING")
	if !ok {
		return nil, errors.New(`app: environment variable "GREETING" is not set`)
	}
	return []humus.Service{greeter{out: s.Host.Stdout, greeting: greeting}}, nil
}

// Run is Main on a Host of the caller's choosing: here, humustest's.
func ExampleRun() {
	h := humustest.NewHost()
	h.Env["GREETING"] = "hello"

	code := humus.Run(context.Background(), h.Host(), appInit)

	fmt.Println("exit code:", code)
	fmt.Print("stdout: ", h.Stdout())
	// Output:
	// exit code: 0
	// stdout: hello
}

// An error from Init ends the App with exit code 1, and is written once to
// the Host's stderr.
func ExampleRun_failingInit() {
	h := humustest.NewHost()

	code := humus.Run(context.Background(), h.Host(), appInit)

	fmt.Println("exit code:", code)
	fmt.Print("stderr: ", h.Stderr())
	// Output:
	// exit code: 1
	// stderr: app: environment variable "GREETING" is not set
}

// A program's main is one call. Main runs on OSHost, stops on SIGINT or
// SIGTERM and exits with the App's code.
func ExampleMain() {
	humus.Main(appInit, humus.WithGracePeriod(10*time.Second))
}

// WithTelemetry builds the providers from the Host before Init, and Run
// shuts them down, flushing them, once the Services have ended.
func ExampleWithTelemetry() {
	h := humustest.NewHost()
	tel := humustest.NewTelemetry()
	build := func(context.Context, humus.Host) (humus.Telemetry, error) {
		// A real App builds the SDK's providers here, such as one
		// exporting over OTLP to an address read from h.LookupEnv.
		return tel.Telemetry(), nil
	}
	init := func(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
		_, span := s.Telemetry.TracerProvider.Tracer("example").Start(ctx, "init")
		span.End()
		return nil, nil
	}

	code := humus.Run(context.Background(), h.Host(), init, humus.WithTelemetry(build))

	fmt.Println("exit code:", code)
	for _, span := range tel.Spans() {
		fmt.Println("span:", span.Name())
	}
	// Output:
	// exit code: 0
	// span: init
}
