package webhook

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/z5labs/humus"
)

// certificates is a Service's serving certificate: the pair its files
// held when last read well, read again on a handshake at most every
// every.
type certificates struct {
	host              humus.Host
	certPath, keyPath string // as Settings gave them, for errors
	every             time.Duration
	now               func() time.Time
	log               *slog.Logger

	serving atomic.Pointer[keyPair]

	// checking is held by the one handshake that reads the files; the
	// others serve what is serving meanwhile, never waiting on the disk.
	checking sync.Mutex
	checked  time.Time // when the files were last read
	refused  string    // why the files were last refused, recorded once
}

// filesRead is the content of the two files, as read together.
type filesRead struct{ cert, key []byte }

func (f filesRead) same(o filesRead) bool {
	return bytes.Equal(f.cert, o.cert) && bytes.Equal(f.key, o.key)
}

// The attributes of the package's log records, beside the error.
const (
	attrFile     = "humus.webhook.certificate.file"
	attrNotAfter = "humus.webhook.certificate.not_after"
)

// keyPair is a certificate that serves, and the files it was read from.
type keyPair struct {
	files filesRead
	cert  *tls.Certificate
}

// tlsConfig is the configuration the Service's TLS listener serves with.
func (c *certificates) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: c.get,
	}
}

// load reads and checks the files, and serves them: NewService's first
// read, whose every problem is an error.
func (c *certificates) load() error {
	files, err := c.read()
	if err != nil {
		return err
	}
	kp, err := c.parse(files)
	if err != nil {
		return err
	}
	c.serving.Store(kp)
	c.checked = c.now()
	return nil
}

// get is tls.Config.GetCertificate: what is serving, after reading the
// files again if every has passed since they last were.
func (c *certificates) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c.checking.TryLock() {
		if now := c.now(); now.Sub(c.checked) >= c.every {
			c.checked = now
			c.renew()
		}
		c.checking.Unlock()
	}
	return c.serving.Load().cert, nil
}

// renew serves what the files hold, if it changed and can serve. A
// renewed pair that can't leaves the one before it serving, and is
// recorded once: the same refusal, a file still missing say, isn't
// recorded at every check.
func (c *certificates) renew() {
	old := c.serving.Load()
	files, err := c.read()
	var kp *keyPair
	if err == nil {
		if files.same(old.files) {
			c.refused = ""
			return
		}
		kp, err = c.parse(files)
	}
	if err != nil {
		if err.Error() != c.refused {
			c.log.Error("webhook: a renewed certificate can't serve: the one before it keeps serving",
				slog.String("error", err.Error()),
				slog.String(attrNotAfter, old.cert.Leaf.NotAfter.UTC().Format(time.RFC3339)))
		}
		c.refused = err.Error()
		return
	}
	c.refused = ""
	c.serving.Store(kp)
	c.log.Info("webhook: serving a renewed certificate",
		slog.String(attrFile, c.certPath),
		slog.String(attrNotAfter, kp.cert.Leaf.NotAfter.UTC().Format(time.RFC3339)))
}

// read returns the files' content, read as one pair: a kubelet updates a
// Secret volume by swapping a symlink, so the certificate is read again
// after the key, and both again when it changed in between. Every file
// that can't be read is in the error.
func (c *certificates) read() (filesRead, error) {
	var files filesRead
	for range 3 {
		cert, certErr := c.readFile("certificate", c.certPath)
		key, keyErr := c.readFile("key", c.keyPath)
		if err := errors.Join(certErr, keyErr); err != nil {
			return filesRead{}, err
		}
		files = filesRead{cert: cert, key: key}
		if again, err := c.readFile("certificate", c.certPath); err == nil && bytes.Equal(again, cert) {
			break
		}
	}
	return files, nil
}

func (c *certificates) readFile(what, path string) ([]byte, error) {
	b, err := fs.ReadFile(c.host.FS, c.host.HostPath(path))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("webhook: the %s file %q doesn't exist", what, path)
	case err != nil:
		return nil, fmt.Errorf("webhook: reading the %s file %q: %w", what, path, err)
	}
	return b, nil
}

// parse returns the pair files hold, or why it can't serve: not PEM, a key
// that isn't the certificate's, a certificate that isn't valid now.
func (c *certificates) parse(files filesRead) (*keyPair, error) {
	cert, err := tls.X509KeyPair(files.cert, files.key)
	if err != nil {
		return nil, fmt.Errorf("webhook: the certificate %q and key %q: %w", c.certPath, c.keyPath, err)
	}
	now := c.now()
	switch leaf := cert.Leaf; {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("webhook: the certificate %q expired at %s", c.certPath, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("webhook: the certificate %q isn't valid until %s", c.certPath, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &keyPair{files: files, cert: &cert}, nil
}
