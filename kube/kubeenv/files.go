package kubeenv

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// readFile reads the file at p, an absolute slash-separated path such as
// "/etc/kube/ca.crt", from fsys, a Host's FS, whose paths have no leading
// slash. Its error names p, not the FS's own name for it.
//
// The files are read with it rather than with config.File: config names
// in its error a value it can't parse, and these files hold tokens and
// keys.
func readFile(fsys fs.FS, p string) ([]byte, error) {
	b, err := fs.ReadFile(fsys, strings.TrimPrefix(p, "/"))
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return b, nil
}

// readTokenFile reads a token file, such as the pod's projected token, and
// drops the newline around it. An empty file is an error, as no token
// authenticates.
func readTokenFile(fsys fs.FS, p string) (string, error) {
	b, err := readFile(fsys, p)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", p)
	}
	return token, nil
}

// fileToken is a Connection.Token that reads the token file at p again on
// each call, so a token rotated in the file, as the kubelet rotates a
// pod's, is picked up.
func fileToken(fsys fs.FS, p string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		token, err := readTokenFile(fsys, p)
		if err != nil {
			return "", fmt.Errorf("kubeenv: %w", err)
		}
		return token, nil
	}
}

// certPool is a pool of the PEM certificates in pem.
func certPool(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}
