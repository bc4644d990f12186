package humus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
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

	// Dir is the working directory, an absolute path such as
	// "/home/me/app", that a relative path the App is given, in an
	// environment variable say, is taken against. HostPath does that.
	Dir string

	// Stdout and Stderr are the process's standard output and error.
	Stdout io.Writer
	Stderr io.Writer
}

// OSHost returns the real process's Host: the network through net.Dialer
// and net.ListenConfig, the root directory through os.DirFS("/"), the real
// environment, the working directory, and os.Stdout and os.Stderr.
func OSHost() Host {
	var d net.Dialer
	var lc net.ListenConfig
	dir, err := os.Getwd()
	if err != nil {
		dir = "/" // a working directory that was removed: relative paths name nothing
	}
	return Host{
		Dial:      d.DialContext,
		Listen:    lc.Listen,
		FS:        os.DirFS("/"),
		LookupEnv: os.LookupEnv,
		Dir:       dir,
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
	if !filepath.IsAbs(h.Dir) && !path.IsAbs(filepath.ToSlash(h.Dir)) {
		errs = append(errs, fmt.Errorf("humus: Host.Dir %q isn't an absolute path", h.Dir))
	}
	missing(h.Stdout != nil, "Stdout")
	missing(h.Stderr != nil, "Stderr")
	return errors.Join(errs...)
}

// HostPath is the path in FS of the file p names: p itself when it is
// absolute, and otherwise p taken against Dir, as a process opening p
// would. "/etc/kube/config" and, with Dir "/home/me", "../me/config" are
// "etc/kube/config" and "home/me/config".
func (h Host) HostPath(p string) string {
	if !filepath.IsAbs(p) && !path.IsAbs(filepath.ToSlash(p)) {
		p = filepath.Join(h.Dir, p)
	}
	// FS is rooted at the root of Dir's volume, so a volume name, such as
	// Windows' "C:", is not part of a path in it.
	p = filepath.ToSlash(strings.TrimPrefix(p, filepath.VolumeName(p)))
	if p = strings.TrimPrefix(path.Clean(p), "/"); p == "" || p == "." {
		return "." // the root, as fs.FS names it
	}
	return p
}
