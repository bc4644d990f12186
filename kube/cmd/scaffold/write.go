package main

import (
	"errors"
	"fmt"
	"go/format"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// files are the files a command writes, by their paths from the output
// folder, with slashes.
type files map[string][]byte

// write writes out into dir, and nothing if any of them exists already:
// the error then names every one that does. A Go file is gofmt'ed first,
// and one that doesn't parse is a bug of the templates, named.
func (out files) write(dir string) error {
	names := sortedKeys(out)
	var exist, errs []error
	for _, name := range names {
		if strings.HasSuffix(name, ".go") {
			src, err := format.Source(out[name])
			if err != nil {
				errs = append(errs, fmt.Errorf("scaffold: %s doesn't parse, a bug of the scaffold: %w\n%s", name, err, out[name]))
				continue
			}
			out[name] = src
		}
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name))); err == nil {
			exist = append(exist, errors.New(name))
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("scaffold: %w", err))
		}
	}
	if len(exist) > 0 {
		var list []string
		for _, e := range exist {
			list = append(list, "  "+e.Error())
		}
		errs = append(errs, fmt.Errorf("scaffold: nothing written: %d of the files it would write exist in %s, and are never overwritten:\n%s",
			len(exist), dir, strings.Join(list, "\n")))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("scaffold: %w", err)
		}
		// O_EXCL: a file made meanwhile is not overwritten either.
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("scaffold: %w", err)
		}
		_, err = f.Write(out[name])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("scaffold: %w", err)
		}
	}
	return nil
}

// list says what was written into dir, and lists out's files.
func (out files) list(what, dir string) string {
	var b strings.Builder
	b.WriteString("scaffold: wrote " + what + " into " + dir + ":\n")
	for _, name := range sortedKeys(out) {
		b.WriteString("  " + name + "\n")
	}
	return b.String()
}

// sortedKeys are out's paths, sorted.
func sortedKeys(out files) []string { return slices.Sorted(maps.Keys(out)) }
