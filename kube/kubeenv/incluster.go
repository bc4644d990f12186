package kubeenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/kube"
)

// The service account's files, which the kubelet mounts in every pod that
// doesn't opt out (automountServiceAccountToken: false).
const (
	serviceAccountCA    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
)

// InCluster reads the Connection of a pod from h, as the kubelet sets it
// up:
//
//   - Server is KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT,
//     joined with net.JoinHostPort, so an IPv6 host is bracketed;
//   - TLS.RootCAs holds the service account's CA,
//     /var/run/secrets/kubernetes.io/serviceaccount/ca.crt;
//   - Token reads the service account's token, in the same folder, on
//     each call, as the kubelet rotates it. It is read once here too, so
//     a pod without one fails at start, naming the file.
//
// Everything is read through h: its LookupEnv and its FS. It returns every
// missing or invalid variable and file in one error, each named. When ctx
// is done, it reads nothing and returns an error wrapping ctx's.
func InCluster(ctx context.Context, h humus.Host) (kube.Connection, error) {
	if err := ctx.Err(); err != nil {
		return kube.Connection{}, fmt.Errorf("kubeenv: reading the pod's connection: %w", err)
	}
	var errs []error
	ca, err := readFile(h.FS, serviceAccountCA)
	errs = append(errs, named("kubeenv", err))
	roots, err := certPool(ca)
	if ca != nil && err != nil {
		errs = append(errs, fmt.Errorf("kubeenv: %s: %w", serviceAccountCA, err))
	}
	_, err = readTokenFile(h.FS, serviceAccountToken)
	errs = append(errs, named("kubeenv", err))

	env := func(name string) config.Source { return config.Env(h, name) }
	conn, err := config.Struct(func(r *config.Resolver) kube.Connection {
		return kube.Connection{
			Server: net.JoinHostPort(r.Get(env("KUBERNETES_SERVICE_HOST")), strconv.Itoa(config.Parse(r, env("KUBERNETES_SERVICE_PORT"), port))),
			TLS:    &tls.Config{RootCAs: roots},
			Token:  fileToken(h.FS, serviceAccountToken),
		}
	}).Read(ctx)
	errs = append(errs, prefixed(err)...)
	if err := errors.Join(errs...); err != nil {
		return kube.Connection{}, err
	}
	return conn, nil
}

// prefixed is each of the errors err joins, or err itself, prefixed with
// "kubeenv: " and wrapping it, so each line of an error joining them reads
// as kubeenv's, naming what config named.
func prefixed(err error) []error {
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]error, len(errs))
	for i, err := range errs {
		out[i] = fmt.Errorf("kubeenv: %w", err)
	}
	return out
}

// port parses a TCP port, 1 to 65535.
func port(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %d isn't from 1 to 65535", p)
	}
	return p, nil
}
