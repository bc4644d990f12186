package config_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"testing/fstest"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/humustest"
)

// Connection and Settings stand for kube.Connection and kube.Settings,
// which this module can't import: the shape and the sourcing are the same.
type Connection struct {
	Server string
	TLS    *tls.Config
	Token  func(ctx context.Context) (string, error)
}

type LeaderElection struct {
	Namespace string // the Lease's namespace, such as the pod's
	Identity  string // this replica's name in the Lease, such as its pod's
}

type Settings struct {
	Name           string
	Workers        int
	LeaderElection LeaderElection
}

const serviceAccount = "/var/run/secrets/kubernetes.io/serviceaccount/"

// readFile reads a file of the Host's FS, whose paths have no leading slash.
func readFile(fsys fs.FS, path string) ([]byte, error) {
	b, err := fs.ReadFile(fsys, strings.TrimPrefix(path, "/"))
	if err != nil {
		return nil, fmt.Errorf("app: reading %s: %w", path, err)
	}
	return b, nil
}

// readSettings sources a Connection from what the kubelet provides in a
// pod, and the Settings from the downward API's POD_NAMESPACE and POD_NAME:
// the proposal's "In use".
func readSettings(ctx context.Context, s *humus.Setup) (Connection, Settings, error) {
	env := func(name string) config.Source { return config.Env(s.Host, name) }

	ca, err := readFile(s.Host.FS, serviceAccount+"ca.crt")
	if err != nil {
		return Connection{}, Settings{}, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)

	conn, connErr := config.Struct(func(r *config.Resolver) Connection {
		return Connection{
			// The kubelet sets both in every container. JoinHostPort
			// brackets an IPv6 host.
			Server: net.JoinHostPort(r.Get(env("KUBERNETES_SERVICE_HOST")), r.Get(env("KUBERNETES_SERVICE_PORT"))),
			TLS:    &tls.Config{RootCAs: roots},
			Token: func(context.Context) (string, error) {
				b, err := readFile(s.Host.FS, serviceAccount+"token")
				return string(bytes.TrimSpace(b)), err
			},
		}
	}).Read(ctx)

	settings, settingsErr := config.Struct(func(r *config.Resolver) Settings {
		return Settings{
			Name:    "memcached-controller",
			Workers: config.Int(r, config.Default(env("WORKERS"), "2")),
			LeaderElection: LeaderElection{
				Namespace: r.Get(env("POD_NAMESPACE")),
				Identity:  r.Get(env("POD_NAME")),
			},
		}
	}).Read(ctx)

	if err := errors.Join(connErr, settingsErr); err != nil {
		return Connection{}, Settings{}, err
	}
	return conn, settings, nil
}

// A pod's environment and service account files, on humustest's Host.
func podHost() *humustest.Host {
	h := humustest.NewHost()
	h.Env["KUBERNETES_SERVICE_HOST"] = "fd00::1"
	h.Env["KUBERNETES_SERVICE_PORT"] = "443"
	h.Env["POD_NAMESPACE"] = "memcached-system"
	h.Env["POD_NAME"] = "memcached-controller-7d9f-x2k4q"
	h.Files["var/run/secrets/kubernetes.io/serviceaccount/ca.crt"] = &fstest.MapFile{Data: []byte("")}
	h.Files["var/run/secrets/kubernetes.io/serviceaccount/token"] = &fstest.MapFile{Data: []byte("eyJhbGciOi.payload.sig\n")}
	return h
}

// Struct sources a plain struct from the Host's environment and files.
func ExampleStruct() {
	s := &humus.Setup{Host: podHost().Host()}

	conn, settings, err := readSettings(context.Background(), s)
	if err != nil {
		fmt.Println(err)
		return
	}
	token, err := conn.Token(context.Background())
	fmt.Println("server:", conn.Server)
	fmt.Println("token:", token, err)
	fmt.Printf("settings: %+v\n", settings)
	// Output:
	// server: [fd00::1]:443
	// token: eyJhbGciOi.payload.sig <nil>
	// settings: {Name:memcached-controller Workers:2 LeaderElection:{Namespace:memcached-system Identity:memcached-controller-7d9f-x2k4q}}
}

// Every missing or invalid value is named, all in one error.
func ExampleStruct_errors() {
	h := podHost()
	delete(h.Env, "KUBERNETES_SERVICE_PORT")
	delete(h.Env, "POD_NAME")
	h.Env["WORKERS"] = "many"
	s := &humus.Setup{Host: h.Host()}

	_, _, err := readSettings(context.Background(), s)
	fmt.Println(err)
	// Output:
	// config: environment variable "KUBERNETES_SERVICE_PORT" is not set
	// config: environment variable "WORKERS": invalid value "many": not a whole number
	// config: environment variable "POD_NAME" is not set
}

// A File is read through the Host's FS, dropping one trailing newline.
func ExampleFile() {
	h := humustest.NewHost()
	h.Files["etc/app/replicas"] = &fstest.MapFile{Data: []byte("3\n")}
	host := h.Host()

	replicas, err := config.Struct(func(r *config.Resolver) int {
		return config.Int(r, config.File(host, "/etc/app/replicas"))
	}).Read(context.Background())
	fmt.Println(replicas, err)

	_, err = config.Struct(func(r *config.Resolver) string {
		return r.Get(config.File(host, "/etc/app/missing"))
	}).Read(context.Background())
	fmt.Println(err)
	// Output:
	// 3 <nil>
	// config: file "/etc/app/missing" is not set
}

// Checked checks a value after parsing it, with a library's own check of
// the setting, so that a value the check refuses is named by its source,
// in the same error as every other problem. AsIs lets it check a string.
func ExampleChecked() {
	h := humustest.NewHost()
	h.Env["WORKERS"] = "0"
	h.Env["POD_NAME"] = ""
	host := h.Host()
	atLeastOne := func(n int) error {
		if n < 1 {
			return fmt.Errorf("workers %d must be at least 1", n)
		}
		return nil
	}
	notEmpty := func(s string) error {
		if s == "" {
			return errors.New("empty")
		}
		return nil
	}

	_, err := config.Struct(func(r *config.Resolver) Settings {
		return Settings{
			Workers: config.Parse(r, config.Env(host, "WORKERS"), config.Checked(strconv.Atoi, atLeastOne)),
			LeaderElection: LeaderElection{
				Identity: config.Parse(r, config.Env(host, "POD_NAME"), config.Checked(config.AsIs, notEmpty)),
			},
		}
	}).Read(context.Background())
	fmt.Println(err)
	// Output:
	// config: environment variable "WORKERS": invalid value "0": workers 0 must be at least 1
	// config: environment variable "POD_NAME": invalid value "": empty
}
