// Package config reads an App's plain values, such as a server's address or
// a worker count, from the Host's environment and files into a struct.
//
// What it promises:
//
//   - Every value comes through a humus.Host: Env looks a variable up with
//     Host.LookupEnv, and File reads through Host.FS. Nothing reads the
//     process's environment or disk directly.
//   - Struct's function is run once per Read, with a Resolver. Every missing
//     or invalid value it asks for is recorded, and Read returns them all in
//     one error, each naming its source: which variable, which file.
//   - A value's surrounding whitespace is kept, except that File drops one
//     trailing newline, which editors and kubelets' projected files add.
package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/z5labs/humus"
)

// Source is where one value comes from.
type Source interface {
	// Lookup returns the value, and whether it is set. An error is a source
	// that is set but can't be read, such as a file without permission.
	Lookup(ctx context.Context) (value string, ok bool, err error)

	// String names the source in errors, such as
	// `environment variable "POD_NAME"`.
	String() string
}

// Env is the environment variable name, looked up on h.
func Env(h humus.Host, name string) Source { return envSource{h: h, name: name} }

type envSource struct {
	h    humus.Host
	name string
}

func (s envSource) Lookup(context.Context) (string, bool, error) {
	if s.h.LookupEnv == nil {
		return "", false, errors.New("the Host has no LookupEnv")
	}
	v, ok := s.h.LookupEnv(s.name)
	return v, ok, nil
}

func (s envSource) String() string { return fmt.Sprintf("environment variable %q", s.name) }

// File is the content of the file at path in h.FS, such as
// "var/run/secrets/kubernetes.io/serviceaccount/namespace". A leading slash
// is dropped, so "/etc/app/name" names the same file. A file that doesn't
// exist isn't set.
func File(h humus.Host, path string) Source {
	return fileSource{fsys: h.FS, path: strings.TrimPrefix(path, "/")}
}

type fileSource struct {
	fsys fs.FS
	path string
}

func (s fileSource) Lookup(context.Context) (string, bool, error) {
	if s.fsys == nil {
		return "", false, errors.New("the Host has no FS")
	}
	b, err := fs.ReadFile(s.fsys, s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSuffix(string(b), "\n"), true, nil
}

func (s fileSource) String() string { return fmt.Sprintf("file %q", "/"+s.path) }

// Default is src, or def where src isn't set.
func Default(src Source, def string) Source { return defaultSource{src: src, def: def} }

type defaultSource struct {
	src Source
	def string
}

func (s defaultSource) Lookup(ctx context.Context) (string, bool, error) {
	v, ok, err := s.src.Lookup(ctx)
	if err != nil || ok {
		return v, ok, err
	}
	return s.def, true, nil
}

func (s defaultSource) String() string { return s.src.String() }

// Resolver answers a Struct's function's questions, and records every
// problem with the answers.
type Resolver struct {
	ctx  context.Context
	errs []error
}

// Get returns src's value. A src that isn't set, or can't be read, is
// recorded as a problem, and Get returns "".
func (r *Resolver) Get(src Source) string {
	v, ok, err := src.Lookup(r.ctx)
	switch {
	case err != nil:
		r.errs = append(r.errs, fmt.Errorf("config: reading %s: %w", src, err))
		return ""
	case !ok:
		r.errs = append(r.errs, fmt.Errorf("config: %s is not set", src))
		return ""
	}
	return v
}

// Lookup returns src's value and whether it is set. Only a src that can't be
// read is recorded as a problem.
func (r *Resolver) Lookup(src Source) (string, bool) {
	v, ok, err := src.Lookup(r.ctx)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("config: reading %s: %w", src, err))
		return "", false
	}
	return v, ok
}

// Parse returns src's value parsed by parse. A src that isn't set, or whose
// value parse rejects, is recorded as a problem naming src and the value,
// and Parse returns T's zero value.
func Parse[T any](r *Resolver, src Source, parse func(string) (T, error)) T {
	var zero T
	v, ok, err := src.Lookup(r.ctx)
	switch {
	case err != nil:
		r.errs = append(r.errs, fmt.Errorf("config: reading %s: %w", src, err))
		return zero
	case !ok:
		r.errs = append(r.errs, fmt.Errorf("config: %s is not set", src))
		return zero
	}
	t, err := parse(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("config: %s: invalid value %q: %w", src, v, err))
		return zero
	}
	return t
}

// Checked is a parser for Parse that parses a value with parse, then
// checks what it parsed with check, which returns nil for a valid value.
// A value check refuses is recorded as one parse refuses is, naming the
// source and the value, so a library's own check of a setting (a worker
// count of at least 1, say) names the variable a bad value came from:
//
//	workers := config.Parse(r, config.Env(h, "WORKERS"), config.Checked(strconv.Atoi, checkWorkers))
//
// With AsIs as parse, it checks a string as it is.
func Checked[T any](parse func(string) (T, error), check func(T) error) func(string) (T, error) {
	return func(s string) (T, error) {
		v, err := parse(s)
		if err != nil {
			return v, err
		}
		if err := check(v); err != nil {
			var zero T
			return zero, err
		}
		return v, nil
	}
}

// AsIs is the parser of a value taken as it is, for Checked to check a
// string with:
//
//	ns := config.Parse(r, config.Env(h, "WATCH_NAMESPACE"), config.Checked(config.AsIs, checkNamespace))
func AsIs(s string) (string, error) { return s, nil }

// Int is src's value as a decimal int.
func Int(r *Resolver, src Source) int {
	return Parse(r, src, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("out of range")
		}
		if err != nil {
			return 0, errors.New("not a whole number")
		}
		return n, nil
	})
}

// Duration is src's value as a time.Duration, such as "10s" or "1h30m".
func Duration(r *Resolver, src Source) time.Duration {
	return Parse(r, src, func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, errors.New(`not a duration, such as "10s"`)
		}
		return d, nil
	})
}

// Bool is src's value as a bool, as strconv.ParseBool reads one.
func Bool(r *Resolver, src Source) bool {
	return Parse(r, src, func(s string) (bool, error) {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return false, errors.New("not true or false")
		}
		return b, nil
	})
}

// Reader reads a T.
type Reader[T any] struct {
	build func(r *Resolver) T
}

// Struct returns a Reader of the T that build makes from its Resolver's
// answers.
func Struct[T any](build func(r *Resolver) T) Reader[T] { return Reader[T]{build: build} }

// Read runs the Reader's function, and returns its T, or one error joining
// every problem the function's Resolver recorded, in the order they were
// found.
func (rd Reader[T]) Read(ctx context.Context) (T, error) {
	if rd.build == nil {
		var zero T
		return zero, errors.New("config: the Reader has no function: make it with Struct")
	}
	r := &Resolver{ctx: ctx}
	v := rd.build(r)
	if err := errors.Join(r.errs...); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}
