package config_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/humustest"
)

type settings struct {
	Namespace string
	Workers   int
	Resync    time.Duration
	Verbose   bool
	Token     string
}

func read(h humus.Host) (settings, error) {
	env := func(name string) config.Source { return config.Env(h, name) }
	return config.Struct(func(r *config.Resolver) settings {
		return settings{
			Namespace: r.Get(env("POD_NAMESPACE")),
			Workers:   config.Int(r, env("WORKERS")),
			Resync:    config.Duration(r, config.Default(env("RESYNC"), "10h")),
			Verbose:   config.Bool(r, config.Default(env("VERBOSE"), "false")),
			Token:     r.Get(config.File(h, "/var/run/secrets/token")),
		}
	}).Read(context.Background())
}

func TestStructReadsEveryValue(t *testing.T) {
	h := humustest.NewHost()
	h.Env["POD_NAMESPACE"] = "memcached-system"
	h.Env["WORKERS"] = "4"
	h.Env["VERBOSE"] = "true"
	h.Files["var/run/secrets/token"] = &fstest.MapFile{Data: []byte("abc.def\n")}

	got, err := read(h.Host())

	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := settings{Namespace: "memcached-system", Workers: 4, Resync: 10 * time.Hour, Verbose: true, Token: "abc.def"}
	if got != want {
		t.Errorf("Read() = %+v, want %+v", got, want)
	}
}

func TestStructNamesEveryProblemInOneError(t *testing.T) {
	h := humustest.NewHost()
	h.Env["WORKERS"] = "four"
	h.Env["RESYNC"] = "10"
	h.Env["VERBOSE"] = "yes please"

	got, err := read(h.Host())

	if got != (settings{}) {
		t.Errorf("Read() = %+v with an error, want the zero value", got)
	}
	want := strings.Join([]string{
		`config: environment variable "POD_NAMESPACE" is not set`,
		`config: environment variable "WORKERS": invalid value "four": not a whole number`,
		`config: environment variable "RESYNC": invalid value "10": not a duration, such as "10s"`,
		`config: environment variable "VERBOSE": invalid value "yes please": not true or false`,
		`config: file "/var/run/secrets/token" is not set`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Read's error =\n%v\nwant\n%s", err, want)
	}
}

func TestIntNamesAValueOutOfRange(t *testing.T) {
	h := humustest.NewHost()
	h.Env["WORKERS"] = "99999999999999999999"
	_, err := config.Struct(func(r *config.Resolver) int {
		return config.Int(r, config.Env(h.Host(), "WORKERS"))
	}).Read(context.Background())
	want := `config: environment variable "WORKERS": invalid value "99999999999999999999": out of range`
	if err == nil || err.Error() != want {
		t.Errorf("Read's error = %v, want %s", err, want)
	}
}

func TestParseWrapsTheParsersError(t *testing.T) {
	h := humustest.NewHost()
	h.Env["PORT"] = "0"
	errPort := errors.New("not a port, 1 to 65535")
	_, err := config.Struct(func(r *config.Resolver) int {
		return config.Parse(r, config.Env(h.Host(), "PORT"), func(s string) (int, error) {
			if s == "0" {
				return 0, errPort
			}
			return 1, nil
		})
	}).Read(context.Background())
	if !errors.Is(err, errPort) {
		t.Errorf("Read's error = %v, want one wrapping the parser's", err)
	}
	if want := `config: environment variable "PORT": invalid value "0": not a port, 1 to 65535`; err == nil || err.Error() != want {
		t.Errorf("Read's error = %v, want %s", err, want)
	}
}

// checkWorkers stands for a library's check of a setting, such as kube's
// CheckWorkers.
func checkWorkers(n int) error {
	if n < 1 {
		return fmt.Errorf("workers %d must be at least 1", n)
	}
	return nil
}

func TestChecked(t *testing.T) {
	parse := config.Checked(strconv.Atoi, checkWorkers)
	if n, err := parse("4"); n != 4 || err != nil {
		t.Errorf("parse(4) = %v, %v, want 4, nil", n, err)
	}
	if n, err := parse("0"); n != 0 || err == nil || err.Error() != "workers 0 must be at least 1" {
		t.Errorf("parse(0) = %v, %v, want 0 and checkWorkers' error", n, err)
	}
	if n, err := parse("four"); n != 0 || err == nil || err.Error() != `strconv.Atoi: parsing "four": invalid syntax` {
		t.Errorf("parse(four) = %v, %v, want 0 and strconv.Atoi's error, check not called", n, err)
	}
}

// A value Checked's check refuses is named by its source, as one its
// parser refuses is, and a string is checked as it is with AsIs.
func TestCheckedNamesTheSource(t *testing.T) {
	h := humustest.NewHost()
	h.Env["WORKERS"] = "0"
	h.Env["NAME"] = " memcached "
	errBlank := errors.New("has surrounding blanks")
	type got struct {
		workers int
		name    string
	}
	_, err := config.Struct(func(r *config.Resolver) got {
		return got{
			workers: config.Parse(r, config.Env(h.Host(), "WORKERS"), config.Checked(strconv.Atoi, checkWorkers)),
			name: config.Parse(r, config.Env(h.Host(), "NAME"), config.Checked(config.AsIs, func(s string) error {
				if strings.TrimSpace(s) != s {
					return errBlank
				}
				return nil
			})),
		}
	}).Read(context.Background())

	want := strings.Join([]string{
		`config: environment variable "WORKERS": invalid value "0": workers 0 must be at least 1`,
		`config: environment variable "NAME": invalid value " memcached ": has surrounding blanks`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Read's error =\n%v\nwant\n%s", err, want)
	}
	if !errors.Is(err, errBlank) {
		t.Errorf("Read's error doesn't wrap the check's")
	}

	name, err := config.Struct(func(r *config.Resolver) string {
		return config.Parse(r, config.Env(h.Host(), "NAME"), config.AsIs)
	}).Read(context.Background())
	if name != " memcached " || err != nil {
		t.Errorf("AsIs read %q, %v, want the value as it is, \" memcached \"", name, err)
	}
}

func TestLookupLeavesAnUnsetValueToTheCaller(t *testing.T) {
	h := humustest.NewHost()
	h.Env["SET"] = ""
	type got struct {
		set, unset     string
		setOK, unsetOK bool
	}
	v, err := config.Struct(func(r *config.Resolver) got {
		var g got
		g.set, g.setOK = r.Lookup(config.Env(h.Host(), "SET"))
		g.unset, g.unsetOK = r.Lookup(config.Env(h.Host(), "UNSET"))
		return g
	}).Read(context.Background())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if want := (got{set: "", setOK: true}); v != want {
		t.Errorf("Lookup's answers = %+v, want %+v: set but empty, and unset", v, want)
	}
}

func TestFileKeepsAllButOneTrailingNewline(t *testing.T) {
	h := humustest.NewHost()
	h.Files["etc/app/name"] = &fstest.MapFile{Data: []byte("  memcached \n\n")}
	v, err := config.Struct(func(r *config.Resolver) string {
		return r.Get(config.File(h.Host(), "etc/app/name"))
	}).Read(context.Background())
	if err != nil || v != "  memcached \n" {
		t.Errorf("Read() = %q, %v; want %q", v, err, "  memcached \n")
	}
}

// brokenFS fails every read with a permission error.
type brokenFS struct{}

func (brokenFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
}

func TestFileThatCantBeReadIsNamed(t *testing.T) {
	h := humustest.NewHost().Host()
	h.FS = brokenFS{}
	_, err := config.Struct(func(r *config.Resolver) string {
		def := r.Get(config.Default(config.File(h, "/var/run/secrets/token"), "unused"))
		_, _ = r.Lookup(config.File(h, "etc/other"))
		return def
	}).Read(context.Background())
	want := "config: reading file \"/var/run/secrets/token\": open var/run/secrets/token: permission denied\n" +
		"config: reading file \"/etc/other\": open etc/other: permission denied"
	if err == nil || err.Error() != want {
		t.Errorf("Read's error =\n%v\nwant\n%s", err, want)
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Read's error doesn't wrap fs.ErrPermission")
	}
}

func TestSourcesOnAnEmptyHostAreErrorsNotPanics(t *testing.T) {
	var h humus.Host
	_, err := config.Struct(func(r *config.Resolver) string {
		return r.Get(config.Env(h, "POD_NAME")) + r.Get(config.File(h, "etc/name"))
	}).Read(context.Background())
	want := "config: reading environment variable \"POD_NAME\": the Host has no LookupEnv\n" +
		"config: reading file \"/etc/name\": the Host has no FS"
	if err == nil || err.Error() != want {
		t.Errorf("Read's error =\n%v\nwant\n%s", err, want)
	}

	var zero config.Reader[int]
	if _, err := zero.Read(context.Background()); err == nil {
		t.Error("the zero Reader's Read returned no error")
	}
}

func TestStructRunsItsFunctionOncePerRead(t *testing.T) {
	h := humustest.NewHost()
	h.Env["N"] = "1"
	calls := 0
	rd := config.Struct(func(r *config.Resolver) int {
		calls++
		return config.Int(r, config.Env(h.Host(), "N"))
	})
	for range 2 {
		if _, err := rd.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Errorf("the function ran %d times for 2 Reads, want 2", calls)
	}
}
