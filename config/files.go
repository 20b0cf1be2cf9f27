package config

import (
	"errors"
	"io/fs"
	"os"
)

// The keys that name a file the daemon reads when it starts: credentials
// and TLS material. Each is checked when the config is loaded, so that a
// path that cannot be read stops -check-config and start-up as a config
// problem naming the key, not as a failure to connect later. A reload
// checks them again: one whose file went away is refused, and the running
// config stays (every nats.* and admin.* key needs a restart to change, so
// a reload never reads these files itself).
func (c Config) validateFiles(v validator) {
	for _, f := range []struct{ key, path, what string }{
		{"nats.creds", c.NATS.Creds, "NATS credentials file (.creds)"},
		{"nats.nkey", c.NATS.NKey, "nkey seed file"},
		{"nats.tls.ca", c.NATS.TLS.CA, "PEM CA file"},
		{"nats.tls.cert", c.NATS.TLS.Cert, "PEM certificate file"},
		{"nats.tls.key", c.NATS.TLS.Key, "PEM private key file"},
		{"admin.tls.cert_file", c.Admin.TLS.CertFile, "PEM certificate file"},
		{"admin.tls.key_file", c.Admin.TLS.KeyFile, "PEM private key file"},
	} {
		v.file(f.key, f.path, f.what)
	}
}

// file checks that path, the value of key, is a file this process can
// open for reading; an empty path (the key unset) is not checked. what
// names the kind of file the key wants, for the message.
func (v validator) file(key, path, what string) {
	if path == "" || !v.ok(key) {
		return
	}
	f, err := os.Open(path)
	if err == nil {
		var fi fs.FileInfo
		fi, err = f.Stat()
		_ = f.Close() // opened read-only: nothing to flush
		if err == nil && fi.IsDir() {
			v.add(key, "%q is a directory; write the path of a readable %s", path, what)
			return
		}
	}
	if err == nil {
		return
	}
	reason := err.Error()
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		reason = pe.Err.Error()
	}
	v.add(key, "cannot read %q: %s; write the path of a readable %s", path, reason, what)
}
