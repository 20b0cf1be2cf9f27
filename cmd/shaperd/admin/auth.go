package admin

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"

	"golang.org/x/crypto/bcrypt"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
	"github.com/shaperd/shaper/config"
)

// maxBody bounds the body of an admin POST or DELETE: only a replay's
// few JSON fields are read, so a small bound is generous.
const maxBody = 1 << 10

// maxBcryptChecks bounds the bcrypt comparisons running at once, so that a
// flood of admin requests (authenticated or not) cannot take every core
// from the lanes.
const maxBcryptChecks = 2

// limitBody answers 413 to a request whose body is larger than maxBody,
// and reads a smaller one before next runs, which finds it in r.Body.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tooLarge := func() {
			writeJSON(w, http.StatusRequestEntityTooLarge, api.Error{
				Error: fmt.Sprintf("request body larger than %d bytes; admin requests take at most a few JSON fields", maxBody)})
		}
		if r.ContentLength > maxBody {
			tooLarge()
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
				tooLarge()
				return
			}
			writeJSON(w, http.StatusBadRequest, api.Error{Error: "read request body: " + err.Error()})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// basicAuth requires HTTP basic auth on every path but those in open.
//
// Successful checks are not cached: each request pays one bcrypt
// comparison (about 80 ms of CPU at cost 10), which is what makes a leaked
// hash expensive to attack. The status page makes two requests per 2 s, so
// an open page costs about 8% of a core; at most maxBcryptChecks run at once.
type basicAuth struct {
	userSum [32]byte // sha256 of the user name: compared in constant time whatever its length
	hash    []byte
	open    map[string]bool
	sem     chan struct{}
	log     *slog.Logger
}

func newBasicAuth(c config.AdminBasicAuth, log *slog.Logger, open ...string) *basicAuth {
	a := &basicAuth{
		userSum: sha256.Sum256([]byte(c.Username)), hash: []byte(c.PasswordHash),
		open: map[string]bool{}, sem: make(chan struct{}, maxBcryptChecks), log: log,
	}
	for _, p := range open {
		a.open[p] = true
	}
	return a
}

func (a *basicAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.open[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		ok, err := a.check(r)
		if err != nil {
			return // the client went away while waiting for a check
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="shaper admin", charset="UTF-8"`)
			writeJSON(w, http.StatusUnauthorized, api.Error{Error: "authentication required (admin.basic_auth)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// check reports whether r carries the configured credentials. The password
// is checked even for a wrong user name, so timing does not tell which of
// the two was wrong.
func (a *basicAuth) check(r *http.Request) (bool, error) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false, nil
	}
	select {
	case a.sem <- struct{}{}:
		defer func() { <-a.sem }()
	case <-r.Context().Done():
		return false, r.Context().Err()
	}
	userSum := sha256.Sum256([]byte(user))
	userOK := subtle.ConstantTimeCompare(userSum[:], a.userSum[:]) == 1
	passOK := bcrypt.CompareHashAndPassword(a.hash, []byte(pass)) == nil
	if userOK && passOK {
		return true, nil
	}
	a.log.Debug("admin API: wrong basic auth credentials", "remote", r.RemoteAddr, "path", r.URL.Path)
	return false, nil
}

// loadTLS loads the admin listener's certificate; nil, nil when TLS is
// not configured (config.Validate ensures both files or neither).
func loadTLS(c config.AdminTLS) (*tls.Config, error) {
	if c.CertFile == "" && c.KeyFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("admin.tls: load cert_file %q and key_file %q: %w", c.CertFile, c.KeyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// warnExposure logs a WARN line when the admin API is reachable beyond
// this machine without protection: with no basic auth anyone who can reach
// it can pause downstreams; with basic auth but no TLS the password travels
// in clear text.
func warnExposure(log *slog.Logger, c config.Admin) {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil || isLoopback(host) {
		return
	}
	switch {
	case c.BasicAuth.Username == "":
		log.Warn("admin API listens on a non-loopback address without basic auth: anyone who can reach it can read the status and pause downstreams; set admin.basic_auth (see deploy/example.yaml) or listen on 127.0.0.1",
			"listen", c.Listen)
	case c.TLS.CertFile == "":
		log.Warn("admin API listens on a non-loopback address with basic auth over plain HTTP: the password crosses the network in clear text; set admin.tls.cert_file and admin.tls.key_file",
			"listen", c.Listen)
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
