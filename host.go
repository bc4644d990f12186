package humus

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
)

// Host is the process's boundary, passed in as a value: everything an App
// reaches outside its own memory goes through one. OSHost is the real
// process's; humustest.NewHost makes one for tests.
//
// Every field must be set. Run checks them before it calls Init.
type Host struct {
	// Dial opens a connection, as net.Dialer.DialContext does.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// Listen opens a listener, as net.ListenConfig.Listen does.
	Listen func(ctx context.Context, network, addr string) (net.Listener, error)

	// FS is a read-only file system of the host's root: the file
	// /var/run/secrets/token is "var/run/secrets/token" in it, as fs.FS
	// paths have no leading slash.
	FS fs.FS

	// LookupEnv returns an environment variable's value, and whether it is
	// set, as os.LookupEnv does.
	LookupEnv func(key string) (string, bool)

	// Stdout and Stderr are the process's standard output and error.
	Stdout io.Writer
	Stderr io.Writer
}

// OSHost returns the real process's Host: the network through net.Dialer
// and net.ListenConfig, the root directory through os.DirFS("/"), the real
// environment, and os.Stdout and os.Stderr.
func OSHost() Host {
	var d net.Dialer
	var lc net.ListenConfig
	return Host{
		Dial:      d.DialContext,
		Listen:    lc.Listen,
		FS:        os.DirFS("/"),
		LookupEnv: os.LookupEnv,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
	}
}

// check returns one error naming every field of h that isn't set.
func (h Host) check() error {
	var errs []error
	missing := func(set bool, name string) {
		if !set {
			errs = append(errs, errors.New("humus: Host."+name+" is nil"))
		}
	}
	missing(h.Dial != nil, "Dial")
	missing(h.Listen != nil, "Listen")
	missing(h.FS != nil, "FS")
	missing(h.LookupEnv != nil, "LookupEnv")
	missing(h.Stdout != nil, "Stdout")
	missing(h.Stderr != nil, "Stderr")
	return errors.Join(errs...)
}
